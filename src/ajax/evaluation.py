"""Deterministic evaluation episodes on environment copies kept apart from training."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from ajax.envs import Env


@struct.dataclass
class Episodes:
    """One deterministic episode under way on each copy of an evaluation environment: the
    copies' state and observation, the acting carry, and each episode's return, length and
    whether it has ended."""

    env_state: Any
    obs: jax.Array
    carry: Any
    key: jax.Array
    returns: jax.Array
    lengths: jax.Array
    done: jax.Array


def start_episodes(
    agent: Any, env: Env, params: Any, key: jax.Array, source_env_state: Any
) -> Episodes:
    """Episodes starting on every copy of ``env`` (an evaluation copy, see
    ``Wrapper.for_evaluation``), with the normalisation statistics of ``source_env_state``."""
    reset_key, key = jax.random.split(key)
    state, obs = env.reset_from(reset_key, source_env_state)
    zeros = jnp.zeros(env.num_envs)
    carry = agent.initial_carry(params, env.num_envs)
    return Episodes(state, obs, carry, key, zeros, zeros.astype(jnp.int32), zeros.astype(bool))


def step_episodes(agent: Any, env: Env, params: Any, episodes: Episodes) -> Episodes:
    """``episodes`` one step on under the agent's deterministic policy. Finished episodes are
    masked: each copy plays one episode, so its acting carry never needs a reset."""
    key, act_key, step_key = jax.random.split(episodes.key, 3)
    action, carry = agent.act(params, episodes.obs, episodes.carry, act_key, deterministic=True)
    state, obs, reward, terminated, truncated, _ = env.step(step_key, episodes.env_state, action)
    carry = agent.after_step(params, carry, reward)
    done = episodes.done
    return Episodes(
        state,
        obs,
        carry,
        key,
        episodes.returns + jnp.where(done, 0.0, reward),
        episodes.lengths + jnp.where(done, 0, 1),
        done | terminated | truncated,
    )


def run_episodes(
    agent: Any, env: Env, params: Any, key: jax.Array, source_env_state: Any
) -> tuple[jax.Array, jax.Array]:
    """One deterministic episode on each copy of ``env`` (an evaluation copy, see
    ``Wrapper.for_evaluation``), with the normalisation statistics of ``source_env_state``.

    Returns each copy's undiscounted return and length. The loop stops as soon as every
    copy's episode has ended, or at the time limit.
    (Under the vmap over seeds it runs until every seed's episodes have ended.)
    """

    def one_step(loop):
        episodes, t = loop
        return step_episodes(agent, env, params, episodes), t + 1

    def running(loop):
        episodes, t = loop
        return jnp.logical_and(~jnp.all(episodes.done), t < env.max_episode_steps)

    start = start_episodes(agent, env, params, key, source_env_state)
    episodes, _ = jax.lax.while_loop(running, one_step, (start, 0))
    return episodes.returns, episodes.lengths
