"""Acting in the batch of environment copies: shared by every agent."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from ajax.envs import Env


@struct.dataclass
class Transition:
    """One step of every copy. ``next_obs`` is the true next observation (the final one where
    the episode ended), so targets bootstrap from it; ``obs`` of the next step is post-reset."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    next_obs: jax.Array
    info: dict[str, jax.Array]

    @property
    def done(self) -> jax.Array:
        return self.terminated | self.truncated


def step_env(
    env: Env, key: jax.Array, env_state: Any, obs: jax.Array, action: jax.Array
) -> tuple[Any, jax.Array, Transition]:
    """Step every copy; returns the new env state, the next (post-reset) obs and the transition."""
    env_state, next_obs, reward, terminated, truncated, info = env.step(key, env_state, action)
    final_obs = info.pop("final_obs")
    transition = Transition(obs, action, reward, terminated, truncated, final_obs, info)
    return env_state, next_obs, transition


def step_and_store(env: Env, state: Any, action: jax.Array, step_key: jax.Array, key: jax.Array):
    """One step of every copy, stored in the replay agents' ``state.buffer``.

    ``state`` has ``buffer``, ``env_state``, ``obs``, ``key`` and ``steps`` (environment steps
    so far, over all copies); ``key`` becomes its new key. Returns the state and the
    transition."""
    env_state, next_obs, transition = step_env(env, step_key, state.env_state, state.obs, action)
    state = state.replace(
        buffer=state.buffer.add_transitions(transition),
        env_state=env_state,
        obs=next_obs,
        key=key,
        steps=state.steps + transition.reward.shape[0],
    )
    return state, transition


def episode_metrics(transitions: Transition) -> dict[str, jax.Array]:
    """Sums over the episodes that ended in ``transitions`` (any leading axes)."""
    done = transitions.done
    return {
        "episode_return_sum": jnp.sum(jnp.where(done, transitions.info["episode_return"], 0.0)),
        "episode_length_sum": jnp.sum(jnp.where(done, transitions.info["episode_length"], 0)),
        "episode_count": jnp.sum(done),
    }
