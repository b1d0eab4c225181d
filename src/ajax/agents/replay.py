"""What every replay agent (DQN; SAC, TD3 and REDQ) shares: its configuration (the replay
memory, the warm-up before learning, the minibatches, the updates per iteration, the discount,
the target networks' rate and the networks' shape) and its schedule (:class:`ReplayAgent`).

Each field is declared once here, with its valid range; an agent states its own defaults and
their sources with :func:`ajax.agents.base.override`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from ajax.acting import PolicyFn, Transition, episode_metrics, step_and_store, uniform_action
from ajax.agents.base import Agent, hyperparameter
from ajax.buffers import ReplayBuffer
from ajax.envs import Env


@dataclass(frozen=True)
class ReplayConfig:
    """Hyperparameters every replay agent has. Defaults are SAC's (Haarnoja et al. 2018b,
    "Soft Actor-Critic Algorithms and Applications", table 1) unless an agent says otherwise."""

    learning_rate: float = hyperparameter(
        3e-4, "Adam step size of every network; SAC paper.", low=0.0, low_open=True, batchable=True
    )
    buffer_size: int = hyperparameter(
        1_000_000, "replay capacity in transitions per seed; SAC paper.", low=1
    )
    learning_starts: int = hyperparameter(
        10_000,
        "steps of uniform random actions before updates begin; Ajax's performance page.",
        low=0,
    )
    batch_size: int = hyperparameter(256, "minibatch size; SAC paper.", low=1)
    gamma: float = hyperparameter(0.99, "discount; SAC paper.", low=0.0, high=1.0, batchable=True)
    tau: float = hyperparameter(
        0.005,
        "Polyak rate of the target networks; SAC paper.",
        low=0.0,
        high=1.0,
        low_open=True,
        batchable=True,
    )
    gradient_steps: int = hyperparameter(
        1, "updates per iteration; SAC paper (one per environment step).", low=1
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (256, 256), "hidden layers of the actor and of each critic; SAC paper."
    )
    activation: str = hyperparameter("relu", "hidden activation; SAC paper.")


class ReplayAgent(Agent):
    """The replay schedule of DQN, SAC, TD3, REDQ, ASAC, TD-MPC2 and DreamerV3: each
    iteration, every copy takes ``_steps_per_copy`` steps that go into the state's replay
    buffer, then the agent updates (:meth:`_update`).

    The first ``learning_starts // steps_per_iteration`` iterations are warm-up iterations
    (:meth:`warmup`): uniformly random actions, stored, and no update computed at all. As in
    SB3, updates begin with the first iteration that ends past ``learning_starts`` steps;
    within it, a step taken before ``learning_starts`` is still random (:meth:`_explorer_at`).

    The state has ``params``, ``buffer``, ``cursor``, ``key`` and ``steps`` (environment steps
    so far, over all copies).
    """

    @property
    def _steps_per_copy(self) -> int:
        """Steps each copy takes per iteration."""
        return 1

    @property
    def steps_per_iteration(self) -> int:
        return self.n_envs * self._steps_per_copy

    @property
    def warmup_iterations(self) -> int:
        return self.config.learning_starts // self.steps_per_iteration

    def _require_sequences_at_start(self, length: int) -> None:
        """Refuse a ``learning_starts`` too small for the first update to find a run of
        ``length`` consecutive steps of one copy in the store (a world model's sequences):
        :meth:`ajax.buffers.ReplayBuffer.sample_sequences` needs ``(length - 1) * n_envs + 1``
        rows written."""
        least = (length - 1) * self.n_envs + 1
        if self.config.learning_starts < least:
            raise ValueError(
                f"learning_starts={self.config.learning_starts} is too small for "
                f"{self.name}'s sequences of {length} steps with n_envs={self.n_envs}: the "
                f"first update needs {least} stored steps. Set learning_starts to at least "
                f"{least}."
            )

    @abc.abstractmethod
    def _explorer_at(self, state: Any) -> PolicyFn:
        """The behaviour at ``state.steps``: uniform until ``learning_starts``, the agent's
        exploration after."""

    @abc.abstractmethod
    def _update(self, state: Any) -> tuple[Any, dict[str, jax.Array]]:
        """The updates of one iteration, from the state's buffer."""

    def store(self, buffer: ReplayBuffer, transition: Transition) -> ReplayBuffer:
        """``buffer`` with a step's ``transition`` written: the row an agent learns from.
        By default the one-step row (:meth:`ajax.buffers.ReplayBuffer.add_transitions`); an
        agent that learns from something else (a world model's sequences) writes its own,
        into the buffer its ``init`` made for it."""
        return buffer.add_transitions(transition)

    def _uniform_action(self, key: jax.Array, obs: jax.Array) -> jax.Array:
        """Uniformly random actions for a batch of ``obs``, in the agent's action space
        (``[-1, 1]`` for continuous actions), in the environment's action shape."""
        return uniform_action(self.env.action_space, key, obs.shape[: obs.ndim - self._obs_ndim])

    def _collect(
        self, state: Any, env: Env, explorer_at: Callable[[Any], PolicyFn]
    ) -> tuple[Any, Transition]:
        """``_steps_per_copy`` steps of every copy, stored; the transitions have a leading
        step axis."""

        def one_step(state, _):
            key, step_key = jax.random.split(state.key)
            return step_and_store(
                env,
                state.replace(key=key),
                explorer_at(state),
                step_key,
                self.store,
                self.initial_carry(state.params, self.n_envs),
                lambda carry, reward: self.after_step(state.params, carry, reward),
            )

        return jax.lax.scan(one_step, state, length=self._steps_per_copy)

    def warmup(self, state: Any, env: Env) -> tuple[Any, dict[str, jax.Array]]:
        def uniform(params, obs, carry, key):
            return self._uniform_action(key, obs), carry, ()

        state, transitions = self._collect(state, env, lambda _: uniform)
        return state, episode_metrics(transitions)

    def iteration(
        self, state: Any, env: Env, update_calls: jax.Array | None = None
    ) -> tuple[Any, dict[str, jax.Array]]:
        """Collect, then :meth:`_update` once, or ``update_calls`` times (an integer the
        same for every seed): the run passes :attr:`pretrain_updates` for an agent's first
        learning iteration and 1 for the others, so that one compiled update serves both.

        The calls are a loop whose count XLA cannot read, even the one call, so that the
        update's sampling of the buffer stays apart from the step's write into it: with both
        in one computation (one copy and one update per iteration, SAC's and TD3's
        defaults) XLA fused the write into the sampling's gather and then copied the buffer's
        arrays twice an iteration (PERFORMANCE_REPORT.md, "The replay buffer, copied")."""
        state, transitions = self._collect(state, env, self._explorer_at)
        if update_calls is None:
            update_calls = jax.lax.optimization_barrier(jnp.int32(1))
        # Jitted, so that the loop's body reuses the trace that finds the metrics' shapes
        # rather than tracing the update a second time.
        update = jax.jit(self._update)
        zeros = jax.tree.map(jnp.zeros_like, jax.eval_shape(update, state)[1])
        state, metrics = jax.lax.fori_loop(
            0, update_calls, lambda _, carry: update(carry[0]), (state, zeros)
        )
        return state, metrics | episode_metrics(transitions)
