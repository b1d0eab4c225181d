"""Environment ids -> environments. Ids may carry a family prefix (``gymnax/CartPole-v1``);
unprefixed ids are looked up in every family."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from ajax.envs import gymnax_adapter
from ajax.envs.core import Env

#: family prefix -> (list of its ids, constructor from an unprefixed id)
_FAMILIES: dict[str, tuple[Callable[[], list[str]], Callable[..., Env]]] = {
    "gymnax": (gymnax_adapter.registered_ids, gymnax_adapter.GymnaxEnv),
}


def register_family(
    prefix: str, list_ids: Callable[[], list[str]], make: Callable[..., Env]
) -> None:
    """Make ``prefix/<id>`` resolve through ``make(id, **kwargs)``."""
    _FAMILIES[prefix] = (list_ids, make)


def env_ids() -> list[str]:
    """Every known id, prefixed by its family."""
    return [f"{prefix}/{i}" for prefix, (ids, _) in _FAMILIES.items() for i in ids()]


def _resolve(env_id: str) -> tuple[str, str]:
    prefix, _, name = env_id.rpartition("/")
    if prefix:
        if prefix in _FAMILIES and name in _FAMILIES[prefix][0]():
            return prefix, name
    else:
        for family, (ids, _) in _FAMILIES.items():
            if env_id in ids():
                return family, env_id
    known = env_ids() + [i.split("/", 1)[1] for i in env_ids()]
    close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"Unknown environment id {env_id!r}.{hint} `ajax list` shows every id "
        "(an Env instance is accepted too)."
    )


def make_env(env_id: str | Env, **kwargs: Any) -> Env:
    """The environment for ``env_id`` (``kwargs`` set its parameters); an Env passes through."""
    if isinstance(env_id, Env):
        if kwargs:
            raise ValueError("Environment parameters go to make_env(env_id, ...), not an instance.")
        return env_id
    if not isinstance(env_id, str):
        raise TypeError(f"env_id must be a string id or an ajax Env, got {type(env_id).__name__}")
    family, name = _resolve(env_id)
    return _FAMILIES[family][1](name, **kwargs)
