"""Physics simulators behind the Ajax protocol: Brax and MuJoCo Playground.

Both libraries step a ``State`` that carries ``obs``, ``reward`` and ``done``, and neither
tracks a time limit in the bare environment (their training wrappers do). The adapter counts
steps itself and reports the time limit as truncation, apart from the simulator's own
termination, so that agents bootstrap from the true final observation at a time limit.

Resets are left to :class:`ajax.envs.wrappers.AutoReset`, which computes one only on steps
where some copy's episode ended; ``differentiable_reset=True`` makes it compute one on every
step instead, for agents that differentiate through whole rollouts.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ajax.envs import catalog
from ajax.envs.core import Env, StepResult, checked_params
from ajax.envs.spaces import Box

#: What installs the OpenGL library each ``MUJOCO_GL`` value loads, on Debian and Ubuntu.
GL_PACKAGES = {"egl": "apt install libegl1", "osmesa": "apt install libosmesa6"}


def import_mujoco() -> None:
    """Imports MuJoCo, refusing with the fix where ``MUJOCO_GL`` makes it fail: MuJoCo loads
    the OpenGL library the variable names as it is imported, even for a run that draws
    nothing, and without that library the import ends deep inside PyOpenGL."""
    try:
        import mujoco  # noqa: F401
    except Exception as error:
        setting = os.environ.get("MUJOCO_GL")
        if not setting:
            raise
        install = GL_PACKAGES.get(setting.lower())
        raise ImportError(
            f"MuJoCo, which Brax and Playground run on, failed to import with "
            f"MUJOCO_GL={setting} ({type(error).__name__}: {error}): it loads the OpenGL "
            "library that names as it is imported, even for a run that draws nothing. "
            + (f"Install it ({install}), or" if install else "Set it to egl, osmesa or glfw, or")
            + " unset MUJOCO_GL to train without drawing.",
            name="mujoco",
        ) from error


@struct.dataclass
class SimulatorState:
    """The simulator's own state, the steps taken in this episode, and (when initial states
    are reused) the initial state every episode starts from."""

    inner: Any
    time: jax.Array
    initial: Any = None


class SimulatorEnv(Env):
    """An environment whose ``reset(key)`` and ``step(state, action)`` return a ``State``
    with ``obs``, ``reward`` and ``done`` (Brax's and Playground's protocol)."""

    def __init__(
        self,
        env: Any,
        env_id: str,
        episode_length: int,
        action_low: np.ndarray,
        action_high: np.ndarray,
        *,
        fresh_reset: bool = True,
        differentiable_reset: bool = False,
    ):
        if not isinstance(env.observation_size, int):
            raise ValueError(
                f"{env_id} has dictionary observations {env.observation_size}; Ajax agents "
                "take one flat observation array. Pick an environment with array observations."
            )
        if episode_length < 1:
            raise ValueError(f"episode_length must be at least 1, got {episode_length}.")
        self.env = env
        self.env_id = env_id
        self.max_episode_steps = int(episode_length)
        self.fresh_reset = fresh_reset
        self.differentiable_reset = differentiable_reset
        # Brax's and MJX's pipelines are differentiable; a rollout is too once resets are
        # computed on every step rather than behind a cond.
        self.differentiable = differentiable_reset
        obs_shape = (int(env.observation_size),)
        self.observation_space = Box(
            np.full(obs_shape, -np.inf), np.full(obs_shape, np.inf), obs_shape, np.float32
        )
        act_shape = (int(env.action_size),)
        self.action_space = Box(
            np.broadcast_to(action_low, act_shape).astype(np.float32),
            np.broadcast_to(action_high, act_shape).astype(np.float32),
            act_shape,
            np.float32,
        )

    def reset(self, key: jax.Array) -> tuple[SimulatorState, jax.Array]:
        inner = self.env.reset(key)
        initial = None if self.fresh_reset else inner
        return SimulatorState(inner, jnp.zeros((), jnp.int32), initial), self._obs(inner)

    def reset_episode(self, key: jax.Array, state: SimulatorState):
        if self.fresh_reset:
            return self.reset(key)
        return state.replace(inner=state.initial, time=jnp.zeros((), jnp.int32)), self._obs(
            state.initial
        )

    def step(self, key: jax.Array, state: SimulatorState, action: jax.Array) -> StepResult:
        inner = self.env.step(state.inner, action)
        time = state.time + 1
        terminated = inner.done > 0.5
        truncated = (time >= self.max_episode_steps) & ~terminated
        reward = jnp.asarray(inner.reward, jnp.float32)
        return (
            state.replace(inner=inner, time=time),
            self._obs(inner),
            reward,
            terminated,
            truncated,
            {},
        )

    @staticmethod
    def _obs(inner: Any) -> jax.Array:
        return jnp.asarray(inner.obs, jnp.float32)


class BraxEnv(SimulatorEnv):
    """A Brax environment. ``backend`` picks the physics pipeline (``"generalized"``,
    ``"positional"``, ``"spring"`` or ``"mjx"``; Brax's own default when left out); other
    keyword arguments go to the environment's constructor. Actions lie in ``[-1, 1]``, the
    range Brax's environments take and its own trainers act in."""

    def __init__(
        self,
        name: str,
        *,
        backend: str | None = None,
        episode_length: int = 1000,
        differentiable_reset: bool = False,
        **env_kwargs: Any,
    ):
        import_mujoco()
        from brax import envs

        (episode_length,) = checked_params(
            f"brax/{name}",
            {"episode_length": episode_length},
            {"episode_length": 1000},
            "options",
            whole=["episode_length"],
        ).values()
        if backend is not None:
            env_kwargs["backend"] = backend
        try:
            env = envs.get_environment(name, **env_kwargs)
        except TypeError as error:
            raise ValueError(f"brax/{name} does not take these options: {error}") from error
        super().__init__(
            env,
            f"brax/{name}",
            episode_length,
            np.float32(-1.0),
            np.float32(1.0),
            differentiable_reset=differentiable_reset,
        )


def playground_unavailable(name: str) -> str | None:
    """Why a Playground id that ``ajax list`` leaves out cannot be built here, or None."""
    if name in catalog.PLAYGROUND_DOWNLOADS:
        return (
            f"playground/{name} needs the MuJoCo Menagerie model files, which Playground "
            "downloads when the environment is first built; Ajax fetches nothing at run "
            "time. The Playground environments that load offline are the dm_control_suite "
            "ids that `ajax list` shows."
        )
    return None


class PlaygroundEnv(SimulatorEnv):
    """A MuJoCo Playground environment, run with MJX's pure-JAX implementation.

    ``fresh_reset=True`` (the default) draws a new initial state for every episode;
    ``fresh_reset=False`` computes one initial state per copy at the start and starts every
    later episode from it, saving the reset's cost (CheetahRun's reset settles the model for
    200 steps). ``episode_length`` defaults to the environment's config; other keyword
    arguments override its config entries.
    """

    def __init__(
        self,
        name: str,
        *,
        fresh_reset: bool = True,
        episode_length: int | None = None,
        differentiable_reset: bool = False,
        impl: str = "jax",
        **config_overrides: Any,
    ):
        import_mujoco()
        from mujoco_playground import registry

        config = registry.get_default_config(name)
        defaults = dict(config.items())
        given = config_overrides | (
            {} if episode_length is None else {"episode_length": episode_length}
        )
        # The config's types are its entries' (ml_collections keeps them): ints are whole.
        config_overrides = checked_params(
            f"playground/{name}",
            given,
            defaults,
            "config entries",
            whole=[key for key, value in defaults.items() if type(value) is int],
        )
        episode_length = config_overrides.pop("episode_length", None)
        env = registry.load(name, config_overrides={**config_overrides, "impl": impl})
        model = env.mj_model
        limited = model.actuator_ctrllimited.astype(bool)
        low = np.where(limited, model.actuator_ctrlrange[:, 0], -1.0)
        high = np.where(limited, model.actuator_ctrlrange[:, 1], 1.0)
        super().__init__(
            env,
            f"playground/{name}",
            episode_length or int(config.episode_length),
            low,
            high,
            fresh_reset=fresh_reset,
            differentiable_reset=differentiable_reset,
        )
