"""A state's file: written and read one array at a time, in the msgpack encoding that Flax's
``msgpack_serialize`` wrote for earlier versions, so files of either read back."""

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import serialization

STATE = {
    "scalar": jnp.float32(2.5),
    "flag": jnp.asarray(True),
    "counts": jnp.arange(70_000, dtype=jnp.uint32).reshape(7, 10_000),
    "pair": (jnp.zeros((2, 3), jnp.int32), jnp.ones((3, 5), jnp.bfloat16)),
    "empty": jnp.zeros((0, 4)),
}


def _by_path(state):
    return {
        jax.tree_util.keystr(where): np.asarray(leaf)
        for where, leaf in jax.tree_util.tree_leaves_with_path(state)
    }


def _assert_same(got, want):
    pairs = zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(want), strict=True)
    for (where, a), b in pairs:
        assert a.dtype == b.dtype and a.shape == b.shape, jax.tree_util.keystr(where)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("chunk_bytes", [2**30, 4_000])
def test_a_state_reads_back_and_reads_as_flax_wrote_it(chunk_bytes, tmp_path, monkeypatch):
    # 4,000 bytes splits the 280,000-byte array into chunks, as arrays over 1 GiB are split.
    monkeypatch.setattr(serialization, "_CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(flax.serialization, "MAX_CHUNK_SIZE", chunk_bytes)
    template = jax.eval_shape(lambda: STATE)
    serialization.write_state(tmp_path / "ours", STATE)
    _assert_same(serialization.read_state(tmp_path / "ours", template, 3), STATE)
    # Earlier versions read it, and this one reads what they wrote.
    theirs = flax.serialization.msgpack_restore((tmp_path / "ours").read_bytes())
    _assert_same(jax.tree.unflatten(jax.tree.structure(STATE), list(theirs.values())), STATE)
    (tmp_path / "theirs").write_bytes(flax.serialization.msgpack_serialize(_by_path(STATE)))
    _assert_same(serialization.read_state(tmp_path / "theirs", template, 3, jnp.asarray), STATE)


def test_a_save_that_fails_leaves_the_file_it_replaces(tmp_path, monkeypatch):
    file = tmp_path / "state.msgpack"
    serialization.write_state(file, STATE)
    written = file.read_bytes()
    calls = []

    def failing(leaf, copy=False):
        calls.append(leaf)
        if len(calls) == 3:
            raise OSError("No space left on device")
        return np.asarray(leaf)

    monkeypatch.setattr(serialization, "host_array", failing)
    with pytest.raises(OSError, match="No space left"):
        serialization.write_state(file, jax.tree.map(lambda x: x + 1, STATE))
    assert file.read_bytes() == written and [p.name for p in tmp_path.iterdir()] == [file.name]


def test_a_file_cut_short_is_refused(tmp_path):
    file = tmp_path / "state.msgpack"
    serialization.write_state(file, STATE)
    file.write_bytes(file.read_bytes()[:-100])
    with pytest.raises(EOFError, match="ends before the state does"):
        serialization.read_state(file, jax.eval_shape(lambda: STATE), 3)
