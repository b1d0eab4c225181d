"""Environment ids -> environments. Ids carry a family prefix (``gymnax/CartPole-v1``,
``brax/ant``, ``playground/CheetahRun``, ``target_gym/plane``, ``ajax/PendulumTracking-v0``);
unprefixed ids are looked up in every family, in that order.

The built-in families' ids are a static table (:mod:`ajax.envs.catalog`): listing, resolving
and refusing ids imports no environment library, and a family's library is imported only when
one of its environments is built (Brax and Playground take seconds to import). A family whose
library is not installed lists no ids.
"""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ajax.envs import catalog, gymnax_adapter, physics, target_gym_adapter, tasks
from ajax.envs.core import Env


@dataclass(frozen=True)
class Family:
    """How a family lists and builds its environments."""

    #: Every id of the family (unprefixed) that builds on this machine.
    list_ids: Callable[[], list[str]]
    #: ``make(id, **kwargs)``: the environment for an unprefixed id.
    make: Callable[..., Env]
    #: Why an id that is not listed cannot be built (it downloads files, say), or None.
    unavailable: Callable[[str], str | None] = lambda name: None


#: The extra (pyproject.toml's optional dependencies) that installs each optional built-in
#: family's library.
_EXTRAS = {"brax": "brax", "playground": "playground", "target_gym": "target-gym"}


def install_hint(prefix: str) -> str:
    """How to install the library family ``prefix`` needs: for a built-in family, its extra,
    from the root of a clone of Ajax (the install the README gives)."""
    if prefix not in _EXTRAS:
        return "install it"
    return (
        f'from the root of your clone of Ajax, pip install -e ".[{_EXTRAS[prefix]}]" '
        '(".[envs]" installs every optional family)'
    )


def _installed(module: str, ids: tuple[str, ...]) -> Callable[[], list[str]]:
    """Lists ``ids`` where ``module`` can be imported; raises ImportError where it cannot
    (without importing it)."""

    def list_ids() -> list[str]:
        if importlib.util.find_spec(module) is None:
            raise ImportError(f"No module named {module!r}", name=module)
        return list(ids)

    return list_ids


_FAMILIES: dict[str, Family] = {
    "gymnax": Family(_installed("gymnax", catalog.GYMNAX), gymnax_adapter.GymnaxEnv),
    "brax": Family(_installed("brax", catalog.BRAX), physics.BraxEnv),
    "playground": Family(
        _installed("mujoco_playground", catalog.PLAYGROUND),
        physics.PlaygroundEnv,
        physics.playground_unavailable,
    ),
    "target_gym": Family(
        _installed("target_gym", (*target_gym_adapter.ALIASES, *catalog.TARGET_GYM)),
        target_gym_adapter.TargetGymEnv,
    ),
    "ajax": Family(tasks.registered_ids, tasks.make),
}


def register_family(
    prefix: str,
    list_ids: Callable[[], list[str]],
    make: Callable[..., Env],
    unavailable: Callable[[str], str | None] | None = None,
) -> None:
    """Add a family of environments: ``make_env("prefix/<id>", **kwargs)`` then returns
    ``make(id, **kwargs)``, and an unprefixed id is looked up in it after the built-in
    families.

    Args:
        prefix: the family's prefix in ids; an existing one is replaced.
        list_ids: every id of the family (unprefixed), for ``ajax list``, resolving ids and
            their suggestions. Raising ``ImportError`` marks the family's library as not
            installed: the family then lists no ids.
        make: ``make(id, **kwargs) -> ajax.envs.Env``, an environment for one of the ids.
        unavailable: ``unavailable(id)``, why an id that is not listed cannot be built (a
            file it would download, say), or None; its answer is the error's message.

    A registration lasts for the process. ``ajax.load`` and ``ajax.resume`` rebuild a run's
    environment from its id, so a process that loads or resumes a run on such a family
    registers it first. The program cache keys a run's programs by the source of the
    modules that define the environment's classes, so editing them between two processes
    traces the run anew.
    """
    _FAMILIES[prefix] = Family(list_ids, make, unavailable or (lambda name: None))


def _ids(family: Family) -> list[str]:
    try:
        return family.list_ids()
    except ImportError:
        return []


def env_ids() -> list[str]:
    """Every known id, prefixed by its family."""
    return [f"{prefix}/{i}" for prefix, family in _FAMILIES.items() for i in _ids(family)]


def _resolve(env_id: str) -> tuple[str, str]:
    prefix, _, name = env_id.rpartition("/")
    if prefix in _FAMILIES:
        family = _FAMILIES[prefix]
        try:
            ids = family.list_ids()
        except ImportError as error:
            raise ValueError(
                f"{env_id} needs a library that is not installed ({error.name}): "
                f"{install_hint(prefix)}."
            ) from error
        if name in ids:
            return prefix, name
        reason = _unavailable(family, name)
        if reason:
            raise ValueError(reason)
    elif not prefix:
        for candidate, family in _FAMILIES.items():
            if env_id in _ids(family):
                return candidate, env_id
    known = env_ids() + [i.split("/", 1)[1] for i in env_ids()]
    close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"Unknown environment id {env_id!r}.{hint} `ajax list` shows every id "
        "(an Env instance is accepted too)."
    )


def is_registered(env_id: str | None) -> bool:
    """Whether ``env_id`` names a registered environment (so that ``make_env`` rebuilds it)."""
    prefix, _, name = (env_id or "").rpartition("/")
    family = _FAMILIES.get(prefix)
    return family is not None and name in _ids(family)


def _unavailable(family: Family, name: str) -> str | None:
    try:
        return family.unavailable(name)
    except ImportError:
        return None


def make_env(env_id: str | Env, **kwargs: Any) -> Env:
    """The environment for ``env_id`` (``kwargs`` set its parameters); an Env passes through."""
    if isinstance(env_id, Env):
        if kwargs:
            raise ValueError("Environment parameters go to make_env(env_id, ...), not an instance.")
        return env_id
    if not isinstance(env_id, str):
        raise TypeError(
            f"env_id must be a string id or an ajax Env, got {type(env_id).__name__}; wrap an "
            "environment written to gymnax's API with ajax.envs.from_gymnax(env, env_params)."
        )
    family, name = _resolve(env_id)
    return _FAMILIES[family].make(name, **kwargs)
