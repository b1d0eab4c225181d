"""gymnax environments (and environments written to gymnax's API) behind the Ajax protocol.

gymnax 1.x's own ``step`` resets every copy on every step; the adapter calls ``step_env`` and
``is_truncated`` instead, so resets happen only where :class:`AutoReset` asks for them.
"""

from __future__ import annotations

from typing import Any

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces as gymnax_spaces

from ajax.envs.core import Env, StepResult
from ajax.envs.spaces import Box, Discrete, Space


def convert_space(space: Any) -> Space:
    """The Ajax space equal to a gymnax space."""
    if isinstance(space, gymnax_spaces.Discrete):
        return Discrete(int(space.n), dtype=np.dtype(space.dtype))
    if isinstance(space, gymnax_spaces.Box):
        shape = tuple(space.shape)
        return Box(np.asarray(space.low), np.asarray(space.high), shape, np.dtype(np.float32))
    raise TypeError(f"gymnax space {space!r} has no Ajax equivalent")


class GymnaxEnv(Env):
    """A gymnax environment with fixed parameters (``env_params`` overrides its defaults)."""

    def __init__(self, name: str, **env_params: Any):
        try:
            env, defaults = gymnax.make(name)
        except OSError as error:
            # MNISTBandit-bsuite downloads MNIST when built; nothing is fetched at run time here.
            raise RuntimeError(
                f"gymnax/{name} downloads its data when built, and the download failed "
                f"({error}). Run it on a machine with network access, or pick another id."
            ) from error
        self._adopt(env, defaults, f"gymnax/{name}", env_params)

    def _adopt(self, env: Any, defaults: Any, env_id: str, env_params: dict[str, Any]) -> None:
        """Serve ``env`` (any environment with gymnax's API) with ``defaults`` overridden by
        ``env_params``."""
        fields = defaults.__dataclass_fields__
        unknown = set(env_params) - set(fields)
        if unknown:
            raise ValueError(
                f"{env_id} has no parameter(s) {sorted(unknown)}; "
                f"its parameters are {sorted(fields)}."
            )
        self.env = env
        self.params = defaults.replace(**env_params)
        self.env_id = env_id
        self.observation_space = convert_space(env.observation_space(self.params))
        self.action_space = convert_space(env.action_space(self.params))
        self.max_episode_steps = int(self.params.max_steps_in_episode)

    def reset(self, key: jax.Array) -> tuple[Any, jax.Array]:
        obs, state = self.env.reset_env(key, self.params)
        return state, jnp.asarray(obs, jnp.float32)

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> StepResult:
        obs, state, reward, terminated, _info = self.env.step_env(key, state, action, self.params)
        truncated = self.env.is_truncated(state, self.params)
        # A time-limit step that also terminates counts as terminated: no bootstrap.
        truncated = jnp.logical_and(truncated, jnp.logical_not(terminated))
        return (
            state,
            jnp.asarray(obs, jnp.float32),
            jnp.asarray(reward, jnp.float32),
            jnp.asarray(terminated, bool),
            jnp.asarray(truncated, bool),
            {},
        )


def registered_ids() -> list[str]:
    return list(gymnax.registered_envs)
