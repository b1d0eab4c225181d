"""Acting in the batch of environment copies: shared by every agent.

A *policy function* ``policy_fn(params, obs, carry, key) -> (action, carry, extras)`` maps a
batch of observations and the acting carry to actions in the environment's action shape, the
next carry, and anything the learner wants kept per step (``extras``: log-probabilities, say;
``()`` if nothing). The rollout takes it and the parameters as arguments, so that it is a
function of the parameters that gradients can flow through (APG differentiates it), in the
spirit of brax's ``acting.generate_unroll``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from ajax.envs import Discrete, Env
from ajax.envs.spaces import Space


def uniform_action(space: Space, key: jax.Array, batch: tuple[int, ...]) -> jax.Array:
    """Uniformly random actions for a ``batch`` of copies: the warm-up of every agent that
    collects before it learns (``learning_starts``), in the agents' action space (``[-1, 1]``
    for a ``Box``), in the environment's action shape."""
    if isinstance(space, Discrete):
        # Epsilon-greedy with epsilon 1, the DQN paper's warm-up policy, draws exactly this:
        # its exploration test always passes, so neither it nor the greedy action is traced.
        _, action_key = jax.random.split(key)
        return jax.random.randint(action_key, batch, 0, space.n, dtype=jnp.int32)
    return jax.random.uniform(key, batch + space.shape, minval=-1.0, maxval=1.0)


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


@struct.dataclass
class EnvCursor:
    """Where a batch of copies stands: the environment state, the current (post-reset)
    observation and the acting carry (see :mod:`ajax.agents.base`)."""

    env_state: Any
    obs: jax.Array
    carry: Any = ()


PolicyFn = Callable[[Any, jax.Array, Any, jax.Array], tuple[jax.Array, Any, Any]]
#: ``after_step(carry, reward) -> carry``: what the step's outcome does to the carry (UDRL's
#: command spends the reward just earned), applied before a finished episode's reset.
AfterStep = Callable[[Any, jax.Array], Any]


def _unchanged(carry: Any, reward: jax.Array) -> Any:
    return carry


def reset_carry(carry: Any, fresh: Any, done: jax.Array) -> Any:
    """``fresh`` in the copies whose episode ended (``done``, one flag per copy), ``carry`` in
    the others, leaf by leaf (leaves have the copy axis first)."""

    def pick(fresh_leaf: jax.Array, leaf: jax.Array) -> jax.Array:
        mask = done.reshape(done.shape + (1,) * (leaf.ndim - done.ndim))
        return jnp.where(mask, fresh_leaf, leaf)

    return jax.tree.map(pick, fresh, carry)


def step_env(
    env: Env, key: jax.Array, env_state: Any, obs: jax.Array, action: jax.Array
) -> tuple[Any, jax.Array, Transition]:
    """Step every copy; returns the new env state, the next (post-reset) obs and the transition."""
    env_state, next_obs, reward, terminated, truncated, info = env.step(key, env_state, action)
    final_obs = info.pop("final_obs")
    transition = Transition(obs, action, reward, terminated, truncated, final_obs, info)
    return env_state, next_obs, transition


def actor_step(
    env: Env,
    policy_fn: PolicyFn,
    params: Any,
    cursor: EnvCursor,
    key: jax.Array,
    fresh_carry: Any = (),
    after_step: AfterStep = _unchanged,
) -> tuple[EnvCursor, Transition, Any]:
    """One step of every copy with the actions of ``policy_fn``; the carry then takes in the
    reward (``after_step``), and that of a copy whose episode ended becomes ``fresh_carry``'s.
    Returns the new cursor, the transition and the policy's extras."""
    act_key, step_key = jax.random.split(key)
    action, carry, extras = policy_fn(params, cursor.obs, cursor.carry, act_key)
    env_state, next_obs, transition = step_env(env, step_key, cursor.env_state, cursor.obs, action)
    carry = reset_carry(after_step(carry, transition.reward), fresh_carry, transition.done)
    return EnvCursor(env_state, next_obs, carry), transition, extras


def rollout(
    env: Env,
    policy_fn: PolicyFn,
    params: Any,
    cursor: EnvCursor,
    key: jax.Array,
    n_steps: int,
    fresh_carry: Any = (),
    after_step: AfterStep = _unchanged,
) -> tuple[EnvCursor, Transition, Any]:
    """``n_steps`` steps of every copy (:func:`actor_step`); transitions and extras gain a
    leading step axis. Differentiable with respect to ``params`` where the environment's
    step (and, across episode ends, its reset) is."""

    def one_step(cursor: EnvCursor, step_key: jax.Array):
        cursor, transition, extras = actor_step(
            env, policy_fn, params, cursor, step_key, fresh_carry, after_step
        )
        return cursor, (transition, extras)

    cursor, (transitions, extras) = jax.lax.scan(one_step, cursor, jax.random.split(key, n_steps))
    return cursor, transitions, extras


#: ``store(buffer, transition) -> buffer``: how a step's transition is written to a store.
Store = Callable[[Any, Transition], Any]


def step_and_store(
    env: Env,
    state: Any,
    policy_fn: PolicyFn,
    key: jax.Array,
    store: Store,
    fresh_carry: Any = (),
    after_step: AfterStep = _unchanged,
):
    """One step of every copy (:func:`actor_step`, the carry handled as there), written to
    the replay agents' ``state.buffer`` by ``store`` (the agent's row of it).

    ``state`` has ``params``, ``buffer``, ``cursor`` and ``steps`` (environment steps so far,
    over all copies). Returns the state and the transition."""
    cursor, transition, _ = actor_step(
        env, policy_fn, state.params, state.cursor, key, fresh_carry, after_step
    )
    state = state.replace(
        buffer=store(state.buffer, transition),
        cursor=cursor,
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
