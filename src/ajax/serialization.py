"""A run's state as bytes and back: every array keyed by its path in the state, so that any
pytree (MJX's ``Data``, Brax's ``State``, an agent's dataclasses) is written without pickle,
and read back into the structure of a template that checks every array."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import flax.serialization
import jax
import numpy as np


def as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists; what JSON cannot hold, its
    ``str``), so that a config compares equal to the one saved."""
    return json.loads(json.dumps(value, default=str))


def encode_state(state: Any) -> bytes:
    """``state``'s arrays, keyed by their paths in it, as msgpack."""
    arrays = {
        jax.tree_util.keystr(where): np.asarray(leaf)
        for where, leaf in jax.tree_util.tree_leaves_with_path(jax.device_get(state))
    }
    return flax.serialization.msgpack_serialize(arrays)


def fit_leaves(template: Any, leaves: list[Any]) -> Any:
    """``leaves`` (saved arrays) in the structure of ``template``; raises ValueError naming
    the first array whose shape or dtype differs from the template's, or a count that
    does."""
    paths = jax.tree_util.tree_leaves_with_path(template)
    if len(paths) != len(leaves):
        raise ValueError(
            f"{len(leaves)} arrays were saved, where this agent's state has {len(paths)}"
        )
    for (where, want), got in zip(paths, leaves, strict=True):
        if np.shape(got) != want.shape or np.asarray(got).dtype != want.dtype:
            raise ValueError(
                f"the saved {jax.tree_util.keystr(where)} is {np.asarray(got).dtype}"
                f"{list(np.shape(got))}, where this agent's is {want.dtype}{list(want.shape)}"
            )
    return jax.tree.unflatten(jax.tree.structure(template), leaves)


def decode_state(file: Path, template: Any, format: int) -> Any:
    """The state saved in ``file``, in the structure of ``template``: by each array's path
    (format 3), or by Flax's state dict (formats 1 and 2). Raises ValueError naming the
    first array missing, left over, or of another shape or dtype."""
    if format < 3:
        # from_bytes fills the template's structure without checking the arrays' shapes.
        state = flax.serialization.from_bytes(template, file.read_bytes())
        return fit_leaves(template, jax.tree.leaves(state))
    arrays = flax.serialization.msgpack_restore(file.read_bytes())
    wanted = [
        jax.tree_util.keystr(where) for where, _ in jax.tree_util.tree_leaves_with_path(template)
    ]
    missing = [name for name in wanted if name not in arrays]
    if missing:
        raise ValueError(f"the saved state has no {missing[0]}, which this agent's state has")
    extra = sorted(set(arrays) - set(wanted))
    if extra:
        raise ValueError(f"the saved state has {extra[0]}, which this agent's state has not")
    return fit_leaves(template, [arrays[name] for name in wanted])
