"""What the on-policy agents (PPO, PQN) share: an iteration that collects a rollout of
``n_steps`` per copy with the behaviour policy (:func:`ajax.acting.rollout`), turns it into
training targets, then fits them for ``n_epochs`` passes of ``n_minibatches`` minibatches.

A subclass gives the parts the algorithms differ in:

* :meth:`_init_params` (the networks) and :meth:`_direction` (the optimiser, after the
  global-norm clip);
* :meth:`_behaviour`: the policy function that collects (with any per-step extras, such as
  PPO's log-probabilities);
* :meth:`_batch`: the targets of one rollout, flattened into one batch axis (the advantage
  hook: GAE for PPO, Q(lambda) returns for PQN), and any statistics of the state it moves
  on (APO's reward rate);
* :meth:`_loss`: the loss of a minibatch.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from ajax.acting import EnvCursor, PolicyFn, Transition, episode_metrics, rollout
from ajax.agents.base import Agent, hyperparameter
from ajax.envs import Env
from ajax.minibatches import check_minibatches, fit_minibatches, fit_opt_state
from ajax.updates import annealed, clipped_over_one_vector


@dataclass(frozen=True)
class OnPolicyConfig:
    """The rollout and fitting hyperparameters every on-policy agent has. Defaults are
    PureJaxRL's PPO CartPole configuration (luchris429/purejaxrl, ``ppo.py``) unless a subclass
    says otherwise."""

    learning_rate: float = hyperparameter(
        2.5e-4, "step size; PureJaxRL/CleanRL CartPole.", low=0.0, low_open=True, batchable=True
    )
    anneal_lr: bool = hyperparameter(
        True, "decay the step size linearly to 0 over the run; PureJaxRL ANNEAL_LR."
    )
    n_steps: int = hyperparameter(
        128, "steps collected per copy per iteration; PureJaxRL NUM_STEPS.", low=1
    )
    n_epochs: int = hyperparameter(4, "passes over each rollout; PureJaxRL UPDATE_EPOCHS.", low=1)
    n_minibatches: int = hyperparameter(
        4, "minibatches per epoch; PureJaxRL NUM_MINIBATCHES.", low=1
    )
    gamma: float = hyperparameter(
        0.99, "discount; PureJaxRL GAMMA.", low=0.0, high=1.0, batchable=True
    )
    max_grad_norm: float = hyperparameter(
        0.5,
        "global gradient-norm clip; PureJaxRL MAX_GRAD_NORM.",
        low=0.0,
        low_open=True,
        batchable=True,
    )


@struct.dataclass
class OnPolicyState:
    params: Any
    opt_state: optax.OptState
    cursor: EnvCursor
    key: jax.Array
    iteration: jax.Array
    total_iterations: jax.Array
    #: Statistics the rollouts move on outside the gradient (APO's reward rate); ``()`` for
    #: agents without any.
    stats: Any = ()

    @classmethod
    def start(
        cls,
        params: Any,
        opt_state: optax.OptState,
        cursor: EnvCursor,
        key: jax.Array,
        total_iterations: int,
        stats: Any = (),
    ) -> OnPolicyState:
        """The state before the first iteration, with the optimiser's initial state."""
        return cls(
            params=params,
            opt_state=opt_state,
            cursor=cursor,
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            total_iterations=jnp.asarray(total_iterations, jnp.int32),
            stats=stats,
        )

    @property
    def progress(self) -> jax.Array:
        """The fraction of the run's iterations done: 0 at the start, 1 at the end."""
        return self.iteration / jnp.maximum(self.total_iterations, 1)


class OnPolicyAgent(Agent):
    """Base of PPO and PQN: collect, compute targets, fit minibatch epochs."""

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        c = self.config
        check_minibatches(self.n_envs, c.n_steps, c.n_minibatches)
        self._optimizer = clipped_over_one_vector(c.max_grad_norm, self._direction())

    @property
    def steps_per_iteration(self) -> int:
        return self.n_envs * self.config.n_steps

    # What a subclass provides.

    @abc.abstractmethod
    def _direction(self) -> optax.GradientTransformation:
        """The optimiser's direction (its step size is applied by the fit)."""

    @abc.abstractmethod
    def _init_params(self, key: jax.Array, obs: jax.Array) -> Any:
        """Every trainable parameter, for a batch of observations like ``obs``."""

    @abc.abstractmethod
    def _behaviour(self, state: OnPolicyState) -> PolicyFn:
        """The policy function that collects the rollout."""

    @abc.abstractmethod
    def _batch(
        self, state: OnPolicyState, steps: Transition, extras: Any
    ) -> tuple[OnPolicyState, tuple[jax.Array, ...], dict[str, jax.Array]]:
        """The state (with any statistics the rollout moves on), the training batch of one
        rollout (leaves ``[n_steps * n_envs, ...]``) and any metrics of its making."""

    @abc.abstractmethod
    def _loss(self, params: Any, minibatch: Any) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The loss of one minibatch, and metrics."""

    def _initial_stats(self) -> Any:
        """The statistics of :attr:`OnPolicyState.stats` before the first rollout."""
        return ()

    # Shared machinery.

    def init(self, key: jax.Array, env: Env, total_iterations: int) -> OnPolicyState:
        params, cursor, key = self._start(key, env, self._init_params)
        opt_state = fit_opt_state(self._optimizer, params)
        return OnPolicyState.start(
            params, opt_state, cursor, key, total_iterations, self._initial_stats()
        )

    def iteration(
        self, state: OnPolicyState, env: Env
    ) -> tuple[OnPolicyState, dict[str, jax.Array]]:
        c = self.config
        key, rollout_key = jax.random.split(state.key)
        cursor, steps, extras = rollout(
            env,
            self._behaviour(state),
            state.params,
            state.cursor,
            rollout_key,
            c.n_steps,
            self.initial_carry(state.params, self.n_envs),
            lambda carry, reward: self.after_step(state.params, carry, reward),
        )
        state = state.replace(cursor=cursor, key=key)
        state, batch, metrics = self._batch(state, steps, extras)
        lr = annealed(c.learning_rate, state.progress, c.anneal_lr)
        state, fit_metrics = fit_minibatches(
            state, batch, self._loss, self._optimizer, lr, c.n_epochs, c.n_minibatches
        )
        state = state.replace(iteration=state.iteration + 1)
        return state, metrics | fit_metrics | {"learning_rate": lr} | episode_metrics(steps)
