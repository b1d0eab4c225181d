"""A run's state in a file and back: every array keyed by its path in the state, so that any
pytree (MJX's ``Data``, Brax's ``State``, an agent's dataclasses) is written without pickle,
and read back into the structure of a template that checks every array.

The file is one msgpack map in Flax's encoding of arrays (``flax.serialization``'s
``msgpack_serialize``, which earlier versions wrote whole), but written and read one array at
a time: encoding the whole state at once held two more copies of it in host memory, so a
replay agent with a large buffer (DreamerV3's million MinAtar frames, 3 GiB a seed) ran out
of memory while saving what it had trained."""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import flax.serialization
import jax
import jax.numpy as jnp
import msgpack
import numpy as np

#: Flax's msgpack extension code for an array, and the size above which it splits an array
#: into chunks (msgpack caps an object at 2 GiB).
_NDARRAY_EXT = 1
_CHUNK_BYTES = 2**30
_CHUNKED = "__msgpack_chunked_array__"


def as_json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists; what JSON cannot hold, its
    ``str``), so that a config compares equal to the one saved."""
    return json.loads(json.dumps(value, default=str))


@contextlib.contextmanager
def written_whole(file: Path) -> Iterator[BinaryIO]:
    """A binary file to write ``file``'s contents into: a temporary one, renamed over ``file``
    once the block ends, so that a write that fails leaves no partial file under the name."""
    partial = file.with_name(file.name + ".partial")
    try:
        with open(partial, "wb") as out:
            yield out
        os.replace(partial, file)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_state(file: Path, state: Any) -> None:
    """Write ``state``'s arrays, keyed by their paths in it, to ``file`` (whole or not at all):
    one array's host copy at a time."""
    leaves = jax.tree_util.tree_leaves_with_path(state)
    packer = msgpack.Packer()
    with written_whole(file) as out:
        out.write(packer.pack_map_header(len(leaves)))
        for where, leaf in leaves:
            out.write(packer.pack(jax.tree_util.keystr(where)))
            _write_array(out, packer, host_array(leaf))


def host_array(leaf: Any, copy: bool = False) -> np.ndarray:
    """``leaf``'s values in host memory; with ``copy``, a device array's in memory of their
    own rather than a view of a CPU device's buffer (which a donated state's next program
    overwrites; a host array is taken as it is). An array split over devices is assembled
    from its shards here: ``np.asarray`` of it keeps the gathered copy on the array for as
    long as the array lives, a second copy of the state after a save."""
    if not isinstance(leaf, jax.Array):
        return np.asarray(leaf)
    if len(leaf.sharding.device_set) == 1:
        return np.array(leaf) if copy else np.asarray(leaf)
    whole = np.empty(leaf.shape, leaf.dtype)
    for shard in leaf.addressable_shards:
        if shard.replica_id == 0:
            whole[shard.index] = np.asarray(shard.data)
    return whole


def _write_array(out: BinaryIO, packer: msgpack.Packer, array: np.ndarray) -> None:
    """One array in Flax's encoding: an extension object, or above ``_CHUNK_BYTES`` a map of
    its shape and flat chunks."""
    if array.nbytes <= _CHUNK_BYTES:
        _write_extension(out, packer, array)
        return
    step = max(1, _CHUNK_BYTES // array.itemsize)
    flat = array.reshape(-1)
    starts = range(0, flat.size, step)
    out.write(packer.pack_map_header(3))
    out.write(packer.pack(_CHUNKED) + packer.pack(True))
    out.write(packer.pack("shape") + packer.pack(_numbered(array.shape)))
    out.write(packer.pack("chunks") + packer.pack_map_header(len(starts)))
    for i, start in enumerate(starts):
        out.write(packer.pack(str(i)))
        _write_extension(out, packer, flat[start : start + step])


def _write_extension(out: BinaryIO, packer: msgpack.Packer, array: np.ndarray) -> None:
    """``(shape, dtype name, bytes)`` packed inside an extension object, the bytes written
    from the array itself rather than from a copy (32-bit length headers, which msgpack
    allows at any size)."""
    data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    head = packer.pack_array_header(3) + packer.pack(list(array.shape))
    head += packer.pack(array.dtype.name) + b"\xc6" + data.size.to_bytes(4, "big")
    size = len(head) + data.size
    out.write(b"\xc9" + size.to_bytes(4, "big") + bytes([_NDARRAY_EXT]) + head)
    out.write(data.data)


def _numbered(values: tuple) -> dict[str, Any]:
    return {str(i): v for i, v in enumerate(values)}


class _SavedArrays:
    """The arrays of a format-3 state file, by name, in the order written: the msgpack map
    :func:`write_state` writes, or Flax's ``msgpack_serialize`` before it (the same objects,
    other headers). Each array's bytes are read straight into the array that holds them, so a
    load holds one array of the state in host memory at a time, where msgpack's own reader
    held several copies of each."""

    def __init__(self, file: BinaryIO):
        self._file = file

    def __iter__(self) -> Iterator[tuple[str, np.ndarray]]:
        for _ in range(self._map_size(self._byte())):
            yield self._value(), self._array()

    def _array(self) -> np.ndarray:
        """An array extension, or Flax's map of a large array's shape and flat chunks, read
        chunk by chunk into one array."""
        first = self._byte()
        if not self._is_map(first):
            shape, dtype = self._extension_header(first)
            return self._read_into(np.empty(shape, dtype))
        shape, flat, filled = None, None, 0
        for _ in range(self._map_size(first)):
            key = self._value()
            if key != "chunks":
                value = self._value()
                if key == "shape":
                    shape = tuple(value[str(i)] for i in range(len(value)))
                continue
            for _ in range(self._map_size(self._byte())):
                self._value()
                part, dtype = self._extension_header(self._byte())
                if flat is None:
                    flat = np.empty(math.prod(shape or ()), dtype)
                size = math.prod(part)
                self._read_into(flat[filled : filled + size])
                filled += size
        if shape is None or flat is None or filled != flat.size:
            raise ValueError("a chunked array of the saved state is incomplete")
        return flat.reshape(shape)

    def _extension_header(self, first: int) -> tuple[tuple[int, ...], np.dtype]:
        """An array extension's shape and dtype; its bytes come next."""
        if 0xD4 <= first <= 0xD8:
            pass  # fixext: the size is in the marker
        elif 0xC7 <= first <= 0xC9:
            self._uint(1 << (first - 0xC7))
        else:
            raise self._unexpected(first)
        if self._byte() != _NDARRAY_EXT or self._byte() != 0x93:
            raise ValueError("the saved state holds an extension object that is not an array")
        shape, dtype = tuple(self._value()), jnp.dtype(self._value())
        marker = self._byte()
        if not 0xC4 <= marker <= 0xC6:
            raise self._unexpected(marker)
        if self._uint(1 << (marker - 0xC4)) != math.prod(shape) * dtype.itemsize:
            raise ValueError(f"a saved {dtype}{list(shape)} array has the wrong number of bytes")
        return shape, dtype

    def _value(self) -> Any:
        """A name, shape, dtype name or flag: msgpack's integers, strings, lists and maps."""
        first = self._byte()
        if first <= 0x7F:
            return first
        if 0xCC <= first <= 0xCF:
            return self._uint(1 << (first - 0xCC))
        if first in (0xC2, 0xC3):
            return first == 0xC3
        if first & 0xE0 == 0xA0:
            return self._exact(first & 0x1F).decode()
        if 0xD9 <= first <= 0xDB:
            return self._exact(self._uint(1 << (first - 0xD9))).decode()
        if first & 0xF0 == 0x90 or first in (0xDC, 0xDD):
            size = first & 0x0F if first & 0xF0 == 0x90 else self._uint(2 if first == 0xDC else 4)
            return [self._value() for _ in range(size)]
        if self._is_map(first):
            return {self._value(): self._value() for _ in range(self._map_size(first))}
        raise self._unexpected(first)

    @staticmethod
    def _is_map(first: int) -> bool:
        return first & 0xF0 == 0x80 or first in (0xDE, 0xDF)

    def _map_size(self, first: int) -> int:
        if first & 0xF0 == 0x80:
            return first & 0x0F
        if first in (0xDE, 0xDF):
            return self._uint(2 if first == 0xDE else 4)
        raise self._unexpected(first)

    @staticmethod
    def _unexpected(first: int) -> ValueError:
        return ValueError(
            f"the saved state holds a msgpack object (0x{first:02x}) Ajax never writes"
        )

    def _byte(self) -> int:
        return self._exact(1)[0]

    def _uint(self, size: int) -> int:
        return int.from_bytes(self._exact(size), "big")

    def _exact(self, size: int) -> bytes:
        data = self._file.read(size)
        if len(data) != size:
            raise EOFError("the file ends before the state does")
        return data

    def _read_into(self, array: np.ndarray) -> np.ndarray:
        view = memoryview(array.reshape(-1).view(np.uint8))
        while view.nbytes:
            read = self._file.readinto(view)
            if not read:
                raise EOFError("the file ends before the state does")
            view = view[read:]
        return array


class StateLayoutError(ValueError):
    """A saved state whose arrays are whole but laid out otherwise than the agent's: one
    missing, left over, or of another shape or dtype (another build of Ajax, or other
    hyperparameters), not a damaged file."""


def fit_leaves(template: Any, leaves: list[Any]) -> Any:
    """``leaves`` (saved arrays) in the structure of ``template``; raises ValueError naming
    the first array whose shape or dtype differs from the template's, or a count that
    does."""
    paths = jax.tree_util.tree_leaves_with_path(template)
    if len(paths) != len(leaves):
        raise StateLayoutError(
            f"{len(leaves)} arrays were saved, where this agent's state has {len(paths)}"
        )
    for (where, want), got in zip(paths, leaves, strict=True):
        _check_fits(jax.tree_util.keystr(where), got, want)
    return jax.tree.unflatten(jax.tree.structure(template), leaves)


def _check_fits(name: str, got: Any, want: Any) -> None:
    if np.shape(got) != tuple(want.shape) or np.asarray(got).dtype != want.dtype:
        raise StateLayoutError(
            f"the saved {name} is {np.asarray(got).dtype}{list(np.shape(got))}, where this "
            f"agent's is {want.dtype}{list(want.shape)}"
        )


def read_state(
    file: Path, template: Any, format: int, place: Callable[[np.ndarray], Any] = np.asarray
) -> Any:
    """The state saved in ``file``, in the structure of ``template`` (arrays, or their shapes):
    by each array's path (format 3), or by Flax's state dict (formats 1 and 2). Each array
    goes through ``place`` as it is read (``jnp.asarray`` moves it to the device), so the
    host holds one array of a format-3 file at a time. Raises ValueError naming the first
    array missing, left over, or of another shape or dtype, and EOFError where the file ends
    before the state does."""
    if format < 3:
        # from_bytes fills the template's structure without checking the arrays' shapes.
        zeros = jax.tree.map(lambda want: np.zeros(want.shape, want.dtype), template)
        state = flax.serialization.from_bytes(zeros, file.read_bytes())
        return jax.tree.map(place, fit_leaves(template, jax.tree.leaves(state)))
    paths = jax.tree_util.tree_leaves_with_path(template)
    index = {jax.tree_util.keystr(where): i for i, (where, _) in enumerate(paths)}
    leaves: list[Any] = [None] * len(paths)
    with open(file, "rb") as saved:
        for name, array in _SavedArrays(saved):
            if name not in index:
                raise StateLayoutError(
                    f"the saved state has {name}, which this agent's state has not"
                )
            _check_fits(name, array, paths[index[name]][1])
            leaves[index[name]] = place(array)
    missing = [name for name, i in index.items() if leaves[i] is None]
    if missing:
        raise StateLayoutError(f"the saved state has no {missing[0]}, which this agent's state has")
    return jax.tree.unflatten(jax.tree.structure(template), leaves)
