"""Exploration schedules shared by the value-based agents (the epsilon-greedy policy itself
is :class:`ajax.nn.EpsilonGreedy`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def linear_schedule(start: float, end: float, progress: jax.Array) -> jax.Array:
    """``start`` moving linearly to ``end`` as ``progress`` goes 0 -> 1, then held."""
    return start + (end - start) * jnp.clip(progress, 0.0, 1.0)
