"""Wrappers over a batch of environment copies: vectorisation, auto-reset, episode statistics,
the action map, and observation and reward normalisation.

Everything above :class:`VectorEnv` sees arrays with a leading copy axis.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ajax.envs.core import SEED_AXIS, Env, StepResult, Wrapper
from ajax.envs.spaces import Box


class VectorEnv(Wrapper):
    """``num_envs`` copies of ``inner`` stepped together as one vectorised operation."""

    def __init__(self, inner: Env, num_envs: int):
        super().__init__(inner)
        self._num_envs = num_envs

    num_envs = property(lambda self: self._num_envs)

    def reset(self, key: jax.Array) -> tuple[Any, jax.Array]:
        state, obs = jax.vmap(self.inner.reset)(jax.random.split(key, self.num_envs))
        # Typed as a step leaves it: a leaf a reset builds from a Python number is weakly
        # typed (gymnax Pendulum's last_u), the stepped one is not, and a jitted function
        # given the first state and then a later one compiled twice.
        return jax.tree.map(_strongly_typed, state), obs

    def reset_from(self, key: jax.Array, source: Any) -> tuple[Any, jax.Array]:
        # Statistics are kept over the batch, so nothing beneath the vectorisation has any.
        return self.reset(key)

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> StepResult:
        keys = jax.random.split(key, self.num_envs)
        return jax.vmap(self.inner.step)(keys, state, action)

    def reset_episode(self, key: jax.Array, state: Any) -> tuple[Any, jax.Array]:
        keys = jax.random.split(key, self.num_envs)
        return jax.vmap(self.inner.reset_episode)(keys, state)


def _strongly_typed(leaf: Any) -> Any:
    return leaf.astype(leaf.dtype) if getattr(jax.typeof(leaf), "weak_type", False) else leaf


class AutoReset(Wrapper):
    """Resets the copies whose episode ended; the pre-reset observation goes to ``final_obs``.

    The reset is computed only on steps where some copy's episode ended (``lax.cond``), so
    environments with costly resets do not pay for them every step. Under a batch transform
    JAX turns a cond whose predicate differs between the batch members into a select that
    computes both branches, so under the run's vmap over seeds (the axis ``SEED_AXIS``) the
    predicate is reduced over the seeds first: the reset is computed when any copy of any
    seed needs it. An environment with ``differentiable_reset`` gets the reset computed on
    every step and selected, so that gradients through a rollout also flow through its
    resets.
    """

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> StepResult:
        step_key, reset_key = jax.random.split(key)
        state, obs, reward, terminated, truncated, info = self.inner.step(step_key, state, action)
        done = terminated | truncated

        def reset_done(carry):
            state, obs = carry
            fresh_state, fresh_obs = self.inner.reset_episode(reset_key, state)
            pick = lambda new, old: jnp.where(_expand(done, new), new, old)  # noqa: E731
            return jax.tree.map(pick, fresh_state, state), pick(fresh_obs, obs)

        if self.differentiable_reset:
            next_state, next_obs = reset_done((state, obs))
        else:
            next_state, next_obs = jax.lax.cond(
                _any_over_seeds(done), reset_done, lambda c: c, (state, obs)
            )
        info = {**info, "final_obs": obs}
        return next_state, next_obs, reward, terminated, truncated, info


def _any_over_seeds(done: jax.Array) -> jax.Array:
    """Whether any copy ended, in any seed when under the run's vmap over seeds."""
    any_done = done.any().astype(jnp.int32)
    try:
        return jax.lax.pmax(any_done, SEED_AXIS) > 0
    except NameError:  # Not under the run's vmap (a bare environment, a user's own loop).
        return any_done > 0


def _expand(mask: jax.Array, like: jax.Array) -> jax.Array:
    return mask.reshape(mask.shape + (1,) * (like.ndim - mask.ndim))


@struct.dataclass
class EpisodeStatsState:
    inner: Any
    running_return: jax.Array
    running_length: jax.Array


class EpisodeStats(Wrapper):
    """Adds ``episode_return`` and ``episode_length`` (of the episode ending at this step,
    valid where ``terminated | truncated``) to ``info``, on the rewards it receives."""

    def step(self, key: jax.Array, state: EpisodeStatsState, action: jax.Array) -> StepResult:
        inner, obs, reward, terminated, truncated, info = self.inner.step(key, state.inner, action)
        episode_return = state.running_return + reward
        episode_length = state.running_length + 1
        done = terminated | truncated
        info = {**info, "episode_return": episode_return, "episode_length": episode_length}
        state = EpisodeStatsState(
            inner, jnp.where(done, 0.0, episode_return), jnp.where(done, 0, episode_length)
        )
        return state, obs, reward, terminated, truncated, info

    def reset(self, key: jax.Array) -> tuple[Any, jax.Array]:
        return self._start(*self.inner.reset(key))

    def reset_from(self, key: jax.Array, source: EpisodeStatsState) -> tuple[Any, jax.Array]:
        return self._start(*self.inner.reset_from(key, source.inner))

    def inner_state(self, state: EpisodeStatsState) -> Any:
        return state.inner

    def _start(self, state: Any, obs: jax.Array) -> tuple[EpisodeStatsState, jax.Array]:
        zeros = jnp.zeros(self.num_envs)
        return EpisodeStatsState(state, zeros, zeros.astype(jnp.int32)), obs


class ActionMap(Wrapper):
    """Agents act in ``[-1, 1]``; this maps each action affinely onto the env's bounds.

    Actions outside ``[-1, 1]`` (a Gaussian's tails) are clipped first, so the env always
    receives an action inside its bounds.
    """

    def __init__(self, inner: Env):
        super().__init__(inner)
        space = inner.action_space
        if not isinstance(space, Box) or not space.bounded:
            raise ValueError(
                f"ActionMap needs a bounded Box action space, got {space}; "
                "leave the action map off for this environment."
            )
        self._low, self._high = space.low, space.high

    @property
    def action_space(self) -> Box:
        space = self.inner.action_space
        return Box(-np.ones(space.shape), np.ones(space.shape), space.shape, space.dtype)

    def to_env(self, action: jax.Array) -> jax.Array:
        """The env-space action for an agent action in ``[-1, 1]``."""
        unit = (jnp.clip(action, -1.0, 1.0) + 1.0) / 2.0
        return self._low + unit * (self._high - self._low)

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> StepResult:
        return self.inner.step(key, state, self.to_env(action))

    def action_to_env(self, action: jax.Array) -> jax.Array:
        return super().action_to_env(self.to_env(action))


@struct.dataclass
class RunningMoments:
    """Mean and variance of a stream of batches (Chan et al.'s parallel update)."""

    mean: jax.Array
    var: jax.Array
    count: jax.Array

    @classmethod
    def zeros(cls, shape: tuple[int, ...]) -> RunningMoments:
        # A small prior count avoids dividing by zero before the first batch.
        return cls(jnp.zeros(shape), jnp.ones(shape), jnp.asarray(1e-4))

    def update(self, batch: jax.Array) -> RunningMoments:
        # Statistics are data, not functions of the policy: no gradient flows into them, so
        # a rollout differentiated through the environment (APG) sees (obs - mean) / std
        # with mean and std held fixed, as Brax's running statistics are.
        batch = jax.lax.stop_gradient(batch)
        batch_mean, batch_var, n = batch.mean(0), batch.var(0), batch.shape[0]
        delta = batch_mean - self.mean
        total = self.count + n
        mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        return RunningMoments(mean, m2 / total, total)


@struct.dataclass
class NormalizeObservationState:
    inner: Any
    moments: RunningMoments


class NormalizeObservation(Wrapper):
    """Standardises observations with running statistics kept in the env state.

    As in SB3's ``VecNormalize`` and CleanRL: statistics update on every training step, the
    result is clipped to ``[-clip, clip]``. An evaluation copy (``for_evaluation``) uses the
    training statistics frozen.
    """

    def __init__(self, inner: Env, clip: float = 10.0, training: bool = True):
        super().__init__(inner)
        self.clip, self.training = clip, training

    def for_evaluation(self) -> NormalizeObservation:
        clone = super().for_evaluation()
        clone.training = False
        return clone

    def _normalize(self, moments: RunningMoments, obs: jax.Array) -> jax.Array:
        return jnp.clip((obs - moments.mean) / jnp.sqrt(moments.var + 1e-8), -self.clip, self.clip)

    def reset(self, key: jax.Array) -> tuple[Any, jax.Array]:
        state, obs = self.inner.reset(key)
        moments = RunningMoments.zeros(obs.shape[1:])
        if self.training:
            moments = moments.update(obs)
        return NormalizeObservationState(state, moments), self._normalize(moments, obs)

    def reset_from(self, key: jax.Array, source: NormalizeObservationState):
        state, obs = self.inner.reset_from(key, source.inner)
        return NormalizeObservationState(state, source.moments), self._normalize(
            source.moments, obs
        )

    def inner_state(self, state: NormalizeObservationState) -> Any:
        return state.inner

    def observe(self, state: NormalizeObservationState, obs: jax.Array) -> jax.Array:
        return self._normalize(state.moments, super().observe(state, obs))

    def step(
        self, key: jax.Array, state: NormalizeObservationState, action: jax.Array
    ) -> StepResult:
        inner, obs, reward, terminated, truncated, info = self.inner.step(key, state.inner, action)
        moments = state.moments.update(obs) if self.training else state.moments
        info = {**info, "final_obs": self._normalize(moments, info["final_obs"])}
        state = NormalizeObservationState(inner, moments)
        return state, self._normalize(moments, obs), reward, terminated, truncated, info


@struct.dataclass
class NormalizeRewardState:
    inner: Any
    discounted_return: jax.Array
    moments: RunningMoments


class NormalizeReward(Wrapper):
    """Scales rewards by the running standard deviation of the discounted return.

    The scaling of SB3's ``VecNormalize`` and CleanRL's continuous PPO: rewards are divided,
    not centred, so their sign is kept. An evaluation copy passes raw rewards through.
    """

    def __init__(self, inner: Env, gamma: float, clip: float = 10.0, training: bool = True):
        super().__init__(inner)
        self.gamma, self.clip, self.training = gamma, clip, training

    def for_evaluation(self) -> NormalizeReward:
        clone = super().for_evaluation()
        clone.training = False
        return clone

    def reset(self, key: jax.Array) -> tuple[Any, jax.Array]:
        state, obs = self.inner.reset(key)
        returns = jnp.zeros(self.num_envs)
        return NormalizeRewardState(state, returns, RunningMoments.zeros(())), obs

    def reset_from(self, key: jax.Array, source: NormalizeRewardState):
        state, obs = self.inner.reset_from(key, source.inner)
        return NormalizeRewardState(state, jnp.zeros(self.num_envs), source.moments), obs

    def inner_state(self, state: NormalizeRewardState) -> Any:
        return state.inner

    def step(self, key: jax.Array, state: NormalizeRewardState, action: jax.Array) -> StepResult:
        inner, obs, reward, terminated, truncated, info = self.inner.step(key, state.inner, action)
        if not self.training:
            return state.replace(inner=inner), obs, reward, terminated, truncated, info
        discounted = state.discounted_return * self.gamma + reward
        moments = state.moments.update(discounted)
        scaled = jnp.clip(reward / jnp.sqrt(moments.var + 1e-8), -self.clip, self.clip)
        discounted = jnp.where(terminated | truncated, 0.0, discounted)
        state = NormalizeRewardState(inner, discounted, moments)
        return state, obs, scaled, terminated, truncated, info


def copies(env: Env, num_envs: int) -> Env:
    """``num_envs`` copies of ``env`` with every wrapper an agent trains and evaluates under:
    vectorised, reset where an episode ends, with episode statistics, and with the action
    map for continuous actions (so agents act in ``[-1, 1]``). Episode statistics see raw
    rewards, beneath any normalisation an agent adds on top."""
    if isinstance(env.action_space, Box):
        env = ActionMap(env)
    return EpisodeStats(AutoReset(VectorEnv(env, num_envs)))
