"""Return and advantage estimators, shared by the agents that need them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: float,
    lam: float,
) -> tuple[jax.Array, jax.Array]:
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) over a rollout [T, ...].

    ``next_values`` are the values of each step's true next observation (the final observation
    where an episode ended), so a truncated episode bootstraps from where it stopped while a
    terminated one does not (Pardo et al. 2018). ``done`` (terminated or truncated) cuts the
    recursion at episode boundaries. Returns (advantages, value targets).
    """
    deltas = rewards + gamma * next_values * (1.0 - terminated) - values
    continues = gamma * lam * (1.0 - done)

    def backward(carry, step):
        delta, cont = step
        advantage = delta + cont * carry
        return advantage, advantage

    _, advantages = jax.lax.scan(
        backward, jnp.zeros_like(deltas[0]), (deltas, continues), reverse=True
    )
    return advantages, advantages + values


def td_target(
    reward: jax.Array, next_value: jax.Array, terminated: jax.Array, gamma: float
) -> jax.Array:
    """One-step TD target: ``r + gamma * V(s')``, with no bootstrap where the episode
    terminated. Truncated transitions bootstrap, from their true final observation."""
    return reward + gamma * (1.0 - terminated) * next_value


def n_step_returns(
    rewards: jax.Array, terminated: jax.Array, truncated: jax.Array, gamma: float
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Discounted sums over runs of n consecutive steps [..., n] that stop at the first
    episode end (Sutton 1988; the multi-step targets of Hessel et al. 2018, "Rainbow").

    Returns ``(partial_return, last, bootstrap_discount)``: the sum of ``gamma^k r_k`` over
    the steps used, the index of the last step used (the first that ended an episode, or the
    run's last), and the factor on the value of that step's true next observation:
    ``gamma^(last + 1)``, or 0 where that step terminated. With n = 1 this is
    :func:`td_target`'s target.
    """
    n = rewards.shape[-1]
    ends = jnp.logical_or(terminated > 0, truncated > 0).astype(jnp.int32)
    used = (jnp.cumsum(ends, axis=-1) - ends) == 0
    discounts = gamma ** jnp.arange(n, dtype=rewards.dtype)
    partial_return = jnp.sum(jnp.where(used, discounts * rewards, 0.0), axis=-1)
    last = jnp.sum(used, axis=-1) - 1
    last_terminated = jnp.take_along_axis(terminated, last[..., None], -1)[..., 0]
    bootstrap_discount = gamma ** (last + 1).astype(rewards.dtype) * (1.0 - last_terminated)
    return partial_return, last, bootstrap_discount


def lambda_returns(
    rewards: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: float,
    lam: float,
) -> jax.Array:
    """Peng's Q(lambda)-style returns over a rollout [T, ...] (Gallici et al. 2025, eq. 5).

    ``G_t = r_t + gamma * (1 - terminated_t) * ((1 - lam) * v'_t + lam * G_{t+1})`` where
    ``v'_t`` is the value of step t's true next observation. Where an episode ended, the next
    step belongs to another episode, so ``G_t`` bootstraps from ``v'_t`` alone; the rollout's
    last step does too.
    """

    def backward(next_return, step):
        reward, next_value, term, end = step
        blend = jnp.where(end, next_value, (1.0 - lam) * next_value + lam * next_return)
        ret = reward + gamma * (1.0 - term) * blend
        return ret, ret

    _, returns = jax.lax.scan(
        backward, next_values[-1], (rewards, next_values, terminated, done), reverse=True
    )
    return returns


def discount_for_episodes(
    episode_length: int, denominator: float = 5.0, low: float = 0.95, high: float = 0.995
) -> float:
    """TD-MPC2's discount for a task whose episodes last ``episode_length`` steps (Hansen et
    al. 2024, appendix; the reference's ``_get_discount``): ``(T/5 - 1) / (T/5)``, clipped to
    ``[0.95, 0.995]``, so that the horizon the discount sees grows with the episode."""
    fraction = episode_length / denominator
    return min(max((fraction - 1) / fraction, low), high)


@struct.dataclass
class PercentileScale:
    """DreamerV3's return scale (Hafner et al. 2023, section 3; the reference's ``retnorm``):
    exponential averages of the returns' 5th and 95th percentiles, the actor's advantages
    divided by their spread, never by less than 1, so that small returns are not blown up
    to noise."""

    low: jax.Array
    high: jax.Array

    @classmethod
    def zeros(cls) -> PercentileScale:
        return cls(jnp.zeros(()), jnp.zeros(()))

    def update(self, returns: jax.Array, rate: float = 0.01) -> PercentileScale:
        """Move both averages by ``rate`` towards this batch's percentiles."""
        low, high = jnp.percentile(jax.lax.stop_gradient(returns), jnp.array([5.0, 95.0]))
        return PercentileScale(
            self.low + rate * (low - self.low), self.high + rate * (high - self.high)
        )

    @property
    def scale(self) -> jax.Array:
        return jnp.maximum(1.0, self.high - self.low)


@struct.dataclass
class SpreadScale:
    """TD-MPC2's return scale (Hansen et al. 2024, section 3.2; the reference's
    ``RunningScale``): an exponential average, from 1, of the spread between the 5th and 95th
    percentiles of the Q-values, each batch's spread floored at 1 before it is averaged."""

    value: jax.Array

    @classmethod
    def ones(cls) -> SpreadScale:
        return cls(jnp.ones(()))

    def update(self, q: jax.Array, rate: float = 0.01) -> SpreadScale:
        """Move the average by ``rate`` towards this batch's floored spread."""
        low, high = jnp.percentile(jax.lax.stop_gradient(q), jnp.array([5.0, 95.0]))
        return SpreadScale(self.value + rate * (jnp.maximum(1.0, high - low) - self.value))

    @property
    def scale(self) -> jax.Array:
        return self.value
