"""Return and advantage estimators, shared by the agents that need them."""

from __future__ import annotations

import jax
import jax.numpy as jnp


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
