"""A trained policy compiled once, for a user's own loop: raw environment observations in,
environment actions out, at the cost of one call into a compiled program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ajax._xla import compiler_options, unrolled_threefry
from ajax.acting import reset_carry


def acting_state(state: Any, seed_index: int | None = None) -> tuple[Any, Any]:
    """What acting reads of a run's state, its parameters and its environment state (where
    the observation statistics live), for every seed or for seed ``seed_index``: never the
    rest, whose replay buffer a seed's slice, or a program given the whole state, copied (3
    GiB a seed for DreamerV3 on MinAtar)."""
    parts = (state.params, state.cursor.env_state)
    return parts if seed_index is None else jax.tree.map(lambda leaf: leaf[seed_index], parts)


def acting_step(agent: Any, deterministic: bool) -> Callable[..., tuple[jax.Array, Any]]:
    """One seed's step of acting on one raw observation, as training acts: the carry takes
    the reward the previous action earned, is reset where an episode starts, then the agent
    acts on the observation as its normalisation sees it. Returns the action in the
    environment's units and the next carry."""
    env = agent.env_copies(1)

    def one(params, env_state, obs, carry, start, reward, key):
        carry = agent.after_step(params, carry, reward[None])
        carry = reset_carry(carry, agent.initial_carry(params, 1), start[None])
        action, carry = agent.act(
            params, env.observe(env_state, obs[None]), carry, key, deterministic
        )
        return env.action_to_env(action)[0], carry

    return one


class Policy:
    """Acts as the run's deterministic evaluation does (or samples, when not
    ``deterministic``), one environment step per call. A planner (TD-MPC2) draws its
    candidates from the policy's key even when deterministic, as its evaluation draws them
    from the run's: the same policy, other draws.

    Call it as ``action = policy(obs)``: ``obs`` is the environment's own observation (the
    learnt normalisation is applied inside) and ``action`` is in the environment's action
    space. With ``seed_index=None`` every seed acts: ``obs`` is one observation given to every
    seed, or one per seed ``[S, *obs_shape]``, and actions have a leading seed axis.

    Agents that carry a state from step to step (UDRL's command, DreamerV3's latent, TD-MPC2's
    plan) keep it here: call :meth:`reset` when a new episode starts. UDRL's command spends the
    reward the previous action earned, so it must be given: ``policy(obs, reward=r)``.
    """

    def __init__(self, result: Any, seed_index: int | None, deterministic: bool, seed: int = 0):
        n_seeds = len(result.seeds)
        if seed_index is not None and not 0 <= seed_index < n_seeds:
            raise ValueError(
                f"seed_index {seed_index} is out of range: the run has {n_seeds} seeds "
                f"({result.seeds}); give an index in 0..{n_seeds - 1}, or None for all."
            )
        agent = result.agent
        self.obs_shape = agent.env.observation_space.shape
        self.seed_index, self.n_seeds = seed_index, n_seeds
        self.reads_reward = agent.reads_rewards
        self._name = agent.name
        one = acting_step(agent, deterministic)

        def step(params, env_state, obs, carry, start, reward, key):
            key, act_key = jax.random.split(key)
            if seed_index is not None:
                return (*one(params, env_state, obs, carry, start, reward, act_key), key)
            keys = jax.random.split(act_key, n_seeds)
            over_seeds = jax.vmap(one, in_axes=(0, 0, 0, 0, None, None, 0))
            return (*over_seeds(params, env_state, obs, carry, start, reward, keys), key)

        self._params, self._env_state = acting_state(result.state, seed_index)
        if seed_index is None:
            self._initial = jax.vmap(lambda params: agent.initial_carry(params, 1))(self._params)
        else:
            self._initial = agent.initial_carry(self._params, 1)
        self._key = jax.random.PRNGKey(seed)
        self._batch_shape = self.obs_shape if seed_index is not None else (n_seeds, *self.obs_shape)
        obs = jax.ShapeDtypeStruct(self._batch_shape, jnp.float32)
        flag, reward = jax.ShapeDtypeStruct((), jnp.bool_), jax.ShapeDtypeStruct((), jnp.float32)
        program = jax.jit(step, compiler_options=compiler_options(agent))
        with unrolled_threefry(agent):
            self._step = program.lower(
                self._params, self._env_state, obs, self._initial, flag, reward, self._key
            ).compile()
        self.reset()

    def reset(self) -> None:
        """Start a new episode: the next call acts from the initial carry."""
        self._carry, self._start = self._initial, True

    def __call__(self, obs: Any, reward: float | None = None) -> np.ndarray:
        """The action for ``obs``; ``reward`` is what the previous action earned (read only by
        agents whose carry spends it)."""
        if reward is None:
            if self.reads_reward and not self._start:
                raise ValueError(
                    f"{self._name}'s carry spends the reward each action earns: call "
                    "policy(obs, reward=r) with the reward of the previous step."
                )
            reward = 0.0
        obs = np.asarray(obs, np.float32)
        if obs.shape == self.obs_shape:
            obs = np.broadcast_to(obs, self._batch_shape)
        if obs.shape != self._batch_shape:
            shapes = {self.obs_shape, self._batch_shape}
            raise ValueError(
                f"obs must have shape {' or '.join(map(str, sorted(shapes)))}, got {obs.shape}."
            )
        action, self._carry, self._key = self._step(
            self._params,
            self._env_state,
            obs,
            self._carry,
            np.bool_(self._start),
            np.float32(reward),
            self._key,
        )
        self._start = False
        return np.asarray(action)
