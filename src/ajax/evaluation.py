"""Deterministic evaluation episodes on environment copies kept apart from training."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ajax.envs import Env


def run_episodes(
    agent: Any, env: Env, params: Any, key: jax.Array, source_env_state: Any
) -> tuple[jax.Array, jax.Array]:
    """One deterministic episode on each copy of ``env`` (an evaluation copy, see
    ``Wrapper.for_evaluation``), with the normalisation statistics of ``source_env_state``.

    Returns each copy's undiscounted return and length. The loop stops as soon as every
    copy's episode has ended, or at the time limit; finished episodes are masked meanwhile
    (each copy plays one episode, so its acting carry never needs a reset).
    (Under the vmap over seeds it runs until every seed's episodes have ended.)
    """
    reset_key, key = jax.random.split(key)
    state, obs = env.reset_from(reset_key, source_env_state)
    zeros = jnp.zeros(env.num_envs)

    def one_step(loop):
        state, obs, carry, key, returns, lengths, done, t = loop
        key, act_key, step_key = jax.random.split(key, 3)
        action, carry = agent.act(params, obs, carry, act_key, deterministic=True)
        state, obs, reward, terminated, truncated, _ = env.step(step_key, state, action)
        carry = agent.after_step(params, carry, reward)
        returns = returns + jnp.where(done, 0.0, reward)
        lengths = lengths + jnp.where(done, 0, 1)
        return state, obs, carry, key, returns, lengths, done | terminated | truncated, t + 1

    carry = agent.initial_carry(params, env.num_envs)
    init = (state, obs, carry, key, zeros, zeros.astype(jnp.int32), zeros.astype(bool), 0)

    def running(loop):
        *_, done, t = loop
        return jnp.logical_and(~jnp.all(done), t < env.max_episode_steps)

    *_, returns, lengths, _, _ = jax.lax.while_loop(running, one_step, init)
    return returns, lengths
