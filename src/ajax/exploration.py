"""Exploration shared by the value-based agents."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def linear_schedule(start: float, end: float, progress: jax.Array) -> jax.Array:
    """``start`` moving linearly to ``end`` as ``progress`` goes 0 -> 1, then held."""
    return start + (end - start) * jnp.clip(progress, 0.0, 1.0)


def epsilon_greedy(key: jax.Array, q_values: jax.Array, epsilon: jax.Array) -> jax.Array:
    """The greedy action of ``q_values`` [..., actions], replaced with probability
    ``epsilon`` by a uniformly random one."""
    explore_key, action_key = jax.random.split(key)
    greedy = jnp.argmax(q_values, axis=-1)
    random = jax.random.randint(action_key, greedy.shape, 0, q_values.shape[-1])
    explore = jax.random.uniform(explore_key, greedy.shape) < epsilon
    return jnp.where(explore, random, greedy).astype(jnp.int32)
