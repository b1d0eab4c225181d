"""gymnax environments (and environments written to gymnax's API) behind the Ajax protocol.

gymnax 1.x's own ``step`` resets every copy on every step; the adapter calls ``step_env`` and
``is_truncated`` instead, so resets happen only where :class:`AutoReset` asks for them.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ajax.envs.core import Env, StepResult, checked_params
from ajax.envs.spaces import Box, Discrete, Space

#: Modules gymnax's environment modules import at the top for their renderers only; with
#: SciPy, which seaborn pulls in, they are most of gymnax's import time (PERFORMANCE_REPORT.md,
#: "Start-up").
_RENDERING_MODULES = ("matplotlib.pyplot", "seaborn")


class _ImportedOnFirstUse(types.ModuleType):
    """Stands in for a module while gymnax is imported; the first attribute read imports the
    real module and answers from it (a render call, say)."""

    def __getattr__(self, attr: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def import_gymnax() -> types.ModuleType:
    """gymnax, imported without its renderers' libraries (they are imported when a renderer
    is first used). Environment families written to gymnax's API import it through here."""
    if "gymnax" in sys.modules:
        return sys.modules["gymnax"]
    stand_ins = {
        name: _ImportedOnFirstUse(name) for name in _RENDERING_MODULES if name not in sys.modules
    }
    sys.modules.update(stand_ins)
    try:
        import gymnax
    finally:
        # Only gymnax's modules keep the stand-ins; an import after this one gets the real
        # module.
        for name, stand_in in stand_ins.items():
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
    return gymnax


def convert_space(space: Any) -> Space:
    """The Ajax space equal to a gymnax space."""
    gymnax_spaces = import_gymnax().environments.spaces
    if isinstance(space, gymnax_spaces.Discrete):
        return Discrete(int(space.n), dtype=np.dtype(space.dtype))
    if isinstance(space, gymnax_spaces.Box):
        shape = tuple(space.shape)
        return Box(np.asarray(space.low), np.asarray(space.high), shape, np.dtype(np.float32))
    raise TypeError(f"gymnax space {space!r} has no Ajax equivalent")


class GymnaxAdapter(Env):
    """Any environment written to gymnax's API (``reset_env``, ``step_env``,
    ``is_truncated``, spaces and ``EnvParams`` with ``max_steps_in_episode``), with fixed
    parameters. Build it with :func:`from_gymnax`."""

    def __init__(self, env: Any, params: Any, env_id: str | None = None):
        self.env = env
        self.params = params
        self.env_id = env_id
        self.observation_space = convert_space(env.observation_space(params))
        self.action_space = convert_space(env.action_space(params))
        self.max_episode_steps = int(params.max_steps_in_episode)

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


class GymnaxEnv(GymnaxAdapter):
    """A registered gymnax environment (``env_params`` overrides its default parameters)."""

    def __init__(self, name: str, **env_params: Any):
        try:
            env, defaults = import_gymnax().make(name)
        except OSError as error:
            # MNISTBandit-bsuite downloads MNIST when built; nothing is fetched at run time here.
            raise RuntimeError(
                f"gymnax/{name} downloads its data when built, and the download failed "
                f"({error}). Run it on a machine with network access, or pick another id."
            ) from error
        env_id = f"gymnax/{name}"
        super().__init__(env, override(defaults, env_params, env_id), env_id)


def override(defaults: Any, env_params: dict[str, Any], env_id: str) -> Any:
    """``defaults`` (an ``EnvParams`` dataclass) with the fields of ``env_params`` replaced,
    as :func:`~ajax.envs.core.checked_params` reads them; the whole-number fields are those
    declared ``int``."""
    fields = defaults.__dataclass_fields__
    values = {name: getattr(defaults, name) for name in fields}
    whole = [name for name, field in fields.items() if field.type in (int, "int")]
    return defaults.replace(**checked_params(env_id, env_params, values, "parameters", whole))


_GYMNAX_API = ("reset_env", "step_env", "is_truncated", "observation_space", "action_space")


def from_gymnax(env: Any, env_params: Any = None, env_id: str | None = None) -> GymnaxAdapter:
    """An Ajax environment serving ``env``, an environment object written to gymnax's API
    (for example a subclass of ``gymnax.environments.environment.Environment``), with
    ``env_params`` (its ``EnvParams``; ``env.default_params`` when None).

    Use it wherever an id goes: ``PPO(env_id=from_gymnax(MyEnv()))``. ``env_id`` names it in
    logs and run directories; by default, gymnax's ``env.name`` (its class's name). A run
    on it is saved like any other; ``ajax.load(path, env=...)`` takes the environment again,
    since a saved result holds no code.
    """
    missing = [name for name in _GYMNAX_API if not hasattr(env, name)]
    if missing:
        raise TypeError(
            f"{type(env).__name__} lacks {', '.join(missing)} of gymnax's environment API; "
            "subclass gymnax.environments.environment.Environment and define reset_env, "
            "step_env, observation_space and action_space."
        )
    if env_params is None:
        env_params = env.default_params
    if not hasattr(env_params, "max_steps_in_episode"):
        raise TypeError(
            f"env_params {env_params!r} has no max_steps_in_episode: pass the environment's "
            "EnvParams (a subclass of gymnax.environments.environment.EnvParams), which sets "
            "the time limit."
        )
    return GymnaxAdapter(env, env_params, env_id or getattr(env, "name", type(env).__name__))
