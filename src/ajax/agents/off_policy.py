"""What the continuous-action off-policy agents (SAC, TD3, REDQ) share beyond the replay
schedule (:class:`ajax.agents.replay.ReplayAgent`): a critic ensemble with Polyak-averaged
targets, and the order of critic and actor updates.

An iteration takes one step in each of the ``n_envs`` copies, stores the transitions, then
makes ``gradient_steps`` critic updates and one actor update per ``policy_delay`` critic
updates. With ``n_envs`` copies the updates still happen once per iteration, so there are
``gradient_steps / n_envs`` updates per environment step (docs/training.md).

Subclasses give the actor (:meth:`_init_actor`, :meth:`policy`), the critics' bootstrap value
(:meth:`_next_value`) and the actor's update (:meth:`_actor_loss`). Hooks change the rest
without copying a method: the critics' target (:meth:`_target`, discounted TD by default),
what follows a critic update (:meth:`_after_critic`: the targets move) and an actor update
(:meth:`_after_actor`), and which networks have targets (:meth:`_target_names`).
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from ajax._xla import tuned_optimizer
from ajax.acting import EnvCursor, PolicyFn
from ajax.agents.base import hyperparameter
from ajax.agents.replay import ReplayAgent, ReplayConfig
from ajax.buffers import ReplayBuffer
from ajax.critics import QEnsemble
from ajax.envs import Box, Env
from ajax.returns import td_target
from ajax.updates import optimizer_step, select, soft_update


@dataclass(frozen=True)
class OffPolicyConfig(ReplayConfig):
    """Hyperparameters every continuous-action off-policy agent has, beyond the replay
    agents' (:class:`ReplayConfig`, with SAC's defaults)."""

    policy_delay: int = hyperparameter(
        1, "critic updates per actor update; SAC paper (every step).", low=1
    )
    n_critics: int = hyperparameter(
        2, "critics in the ensemble; SAC paper (two, clipped double Q).", low=1
    )
    normalize_observations: bool = hyperparameter(
        False,
        "running observation standardisation, for observations far from unit scale (the "
        "papers' tasks need none). The replay buffer keeps observations as normalised when "
        "collected, as with gymnasium's NormalizeObservation wrapper; SB3's VecNormalize "
        "instead stores raw ones and normalises each sample with the current statistics.",
    )


@struct.dataclass
class Learner:
    """What the updates change: networks, targets, optimiser states and the update count."""

    params: dict[str, Any]
    target_params: dict[str, Any]
    opt_state: dict[str, Any]
    updates: jax.Array


@struct.dataclass
class OffPolicyState:
    learner: Learner
    buffer: ReplayBuffer
    cursor: EnvCursor
    key: jax.Array
    steps: jax.Array

    @property
    def params(self) -> dict[str, Any]:
        return self.learner.params


class OffPolicyAgent(ReplayAgent):
    """Base of SAC, TD3 and REDQ."""

    action_spaces = (Box,)
    example_env = "Pendulum-v1"
    default_n_envs = 1

    def with_params(self, state: OffPolicyState, params: dict[str, Any]) -> OffPolicyState:
        return state.replace(learner=state.learner.replace(params=params))

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        c = self.config
        steps, delay = c.gradient_steps, c.policy_delay
        if steps % delay and delay % steps:
            raise ValueError(
                f"gradient_steps={steps} and policy_delay={delay}: one must divide the other, "
                "so that actor updates fall on a fixed schedule of iterations. Try "
                f"policy_delay={steps} or policy_delay=1."
            )
        self._action_dim = math.prod(self.env.action_space.shape)
        self.critic = QEnsemble(c.hidden_sizes, c.activation, c.n_critics)
        self._adam = tuned_optimizer(self, optax.adam(c.learning_rate))

    # What a subclass provides.

    @abc.abstractmethod
    def _init_actor(self, key: jax.Array, obs: jax.Array) -> dict[str, Any]:
        """The actor's trainable parameters (a dict with an "actor" entry, plus any others)."""

    @abc.abstractmethod
    def _next_value(self, learner: Learner, next_obs: jax.Array, key: jax.Array) -> jax.Array:
        """The bootstrap value of ``next_obs``, from the target networks."""

    @abc.abstractmethod
    def _actor_loss(
        self, actor_params: dict[str, Any], learner: Learner, obs: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The actor's loss at ``obs`` and what the update after it needs (``_after_actor``)."""

    def _after_actor(
        self, learner: Learner, aux: dict[str, jax.Array]
    ) -> tuple[Learner, dict[str, jax.Array]]:
        """Anything updated together with the actor (SAC's temperature; TD3's targets)."""
        return learner, {}

    def _after_critic(self, learner: Learner) -> Learner:
        """What follows each critic update: the targets move toward the online networks
        (SAC, REDQ; TD3 moves them after the actor instead)."""
        return self._follow_targets(learner)

    def _target_names(self) -> tuple[str, ...]:
        """The networks that have target copies."""
        return ("critic",)

    def _target(
        self, learner: Learner, batch: dict[str, jax.Array], key: jax.Array
    ) -> tuple[jax.Array, Learner]:
        """The critics' regression target, and the learner with any statistic the target
        keeps (ASAC's reward rate): the discounted TD target ``r + gamma (1 - terminated)
        V'(s')`` by default, with the bootstrap value of :meth:`_next_value`."""
        next_value = self._next_value(learner, batch["next_obs"], key)
        target = td_target(batch["reward"], next_value, batch["terminated"], self.config.gamma)
        return target, learner

    def _optimizer(self, name: str) -> optax.GradientTransformation:
        """The optimiser of ``params[name]``: Adam at ``learning_rate`` by default."""
        return self._adam

    # Shared machinery.

    def q_values(self, params: dict[str, Any], obs: jax.Array, action: jax.Array) -> jax.Array:
        """``Q(obs, action)`` of every critic: ``[n_critics, ...]``, the discounted return
        each critic expects (soft, with SAC's entropy bonus, for SAC and REDQ), for actions in
        ``[-1, 1]``, flat or in the environment's shape."""
        return self._q(params["critic"], obs, action)

    def value(self, params: dict[str, Any], obs: jax.Array) -> jax.Array:
        """The critics' mean ``Q(obs, a)`` at the policy's deterministic action ``a``."""
        return self.q_values(params, obs, self.policy(params, obs).mode()).mean(axis=0)

    def _q(self, critic_params: Any, obs: jax.Array, action: jax.Array) -> jax.Array:
        """``Q(obs, action)`` of every critic in ``critic_params`` (the ensemble, or a subset
        of it from :func:`ajax.critics.critic_subset`): ``[members, ...]``."""
        action = action.reshape(*obs.shape[: obs.ndim - self._obs_ndim], self._action_dim)
        members = jax.tree.leaves(critic_params)[0].shape[0]
        return self.critic.clone(n_critics=members).apply(critic_params, self._flat(obs), action)

    def _init_params(self, key: jax.Array, obs: jax.Array) -> dict[str, Any]:
        """The actor's parameters and the critics'."""
        actor_key, critic_key = jax.random.split(key)
        params = self._init_actor(actor_key, self._flat(obs))
        action = jnp.zeros((obs.shape[0], self._action_dim))
        params["critic"] = self.critic.init(critic_key, self._flat(obs), action)
        return params

    def init(self, key: jax.Array, env: Env, total_iterations: int) -> OffPolicyState:
        params, cursor, key = self._start(key, env, self._init_params)
        obs = cursor.obs
        action = jnp.zeros((obs.shape[0], *self.env.action_space.shape))
        learner = Learner(
            params=params,
            target_params={name: params[name] for name in self._target_names()},
            opt_state={name: self._optimizer(name).init(p) for name, p in params.items()},
            updates=jnp.zeros((), jnp.int32),
        )
        return OffPolicyState(
            learner=learner,
            buffer=ReplayBuffer.for_transitions(obs[0], action[0], self.config.buffer_size),
            cursor=cursor,
            key=key,
            steps=jnp.zeros((), jnp.int32),
        )

    def _apply(self, learner: Learner, name: str, grads: Any) -> Learner:
        """One Adam step on ``learner.params[name]``."""
        params, opt_state = optimizer_step(
            self._optimizer(name), grads, learner.opt_state[name], learner.params[name]
        )
        return learner.replace(
            params=learner.params | {name: params},
            opt_state=learner.opt_state | {name: opt_state},
        )

    def _follow_targets(self, learner: Learner) -> Learner:
        targets = {
            name: soft_update(learner.target_params[name], learner.params[name], self.config.tau)
            for name in learner.target_params
        }
        return learner.replace(target_params=targets)

    def _explorer_at(self, state: OffPolicyState) -> PolicyFn:
        warming_up = state.steps < self.config.learning_starts

        def policy_fn(params, obs, carry, act_key):
            policy_key, random_key = jax.random.split(act_key)
            explored = self._env_action(self.policy(params, obs).sample(policy_key), obs)
            action = jnp.where(warming_up, self._uniform_action(random_key, obs), explored)
            return action, carry, ()

        return policy_fn

    def _critic_update(
        self, learner: Learner, batch: dict[str, jax.Array], key: jax.Array
    ) -> tuple[Learner, dict[str, jax.Array]]:
        target, learner = self._target(learner, batch, key)
        target = jax.lax.stop_gradient(target)

        def loss_fn(critic_params):
            q = self._q(critic_params, batch["obs"], batch["action"])
            # Half the squared error, summed over critics and averaged over the batch (SB3).
            return 0.5 * ((q - target) ** 2).mean(axis=-1).sum(), q.mean()

        (loss, q), grads = jax.value_and_grad(loss_fn, has_aux=True)(learner.params["critic"])
        learner = self._apply(learner, "critic", grads)
        learner = self._after_critic(learner.replace(updates=learner.updates + 1))
        return learner, {"critic_loss": loss, "q_value": q}

    def _actor_update(
        self, learner: Learner, obs: jax.Array, key: jax.Array
    ) -> tuple[Learner, dict[str, jax.Array]]:
        (loss, aux), grads = jax.value_and_grad(self._actor_loss, has_aux=True)(
            learner.params["actor"], learner, obs, key
        )
        learner = self._apply(learner, "actor", grads)
        learner, metrics = self._after_actor(learner, aux)
        return learner, {"actor_loss": loss} | metrics

    def _train(
        self, learner: Learner, buffer: ReplayBuffer, key: jax.Array
    ) -> tuple[Learner, dict[str, jax.Array]]:
        """``gradient_steps`` critic updates and the actor updates that fall among them.

        The updates run in blocks of ``min(gradient_steps, policy_delay)`` critic updates,
        each followed by an actor update. Where ``policy_delay`` exceeds ``gradient_steps``
        (TD3: one critic update per iteration, the actor every second) the actor's update is
        kept only on iterations where the count of critic updates reaches a multiple of
        ``policy_delay``.
        """
        c = self.config
        per_block = min(c.gradient_steps, c.policy_delay)

        def critic_step(learner, key):
            sample_key, target_key = jax.random.split(key)
            batch = buffer.sample(sample_key, c.batch_size)
            return self._critic_update(learner, batch, target_key)

        def block(learner, key):
            critic_keys, sample_key, actor_key = jax.random.split(key, 3)
            learner, critic_metrics = jax.lax.scan(
                critic_step, learner, jax.random.split(critic_keys, per_block)
            )
            obs = buffer.sample(sample_key, c.batch_size)["obs"]
            updated, actor_metrics = self._actor_update(learner, obs, actor_key)
            if c.policy_delay > per_block:
                updated = select(learner.updates % c.policy_delay == 0, updated, learner)
            return updated, jax.tree.map(jnp.mean, critic_metrics) | actor_metrics

        learner, metrics = jax.lax.scan(
            block, learner, jax.random.split(key, c.gradient_steps // per_block)
        )
        return learner, jax.tree.map(jnp.mean, metrics)

    def _update(self, state: OffPolicyState) -> tuple[OffPolicyState, dict[str, jax.Array]]:
        key, train_key = jax.random.split(state.key)
        learner, metrics = self._train(state.learner, state.buffer, train_key)
        return state.replace(learner=learner, key=key), metrics
