"""Compile-cache trouble costs at most a warning: a corrupted entry, an unwritable cache and
two processes filling one cache at once each end in a correct run. Real files and real
processes: each child imports Ajax with its own cache root and trains the same small run."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from ajax import PPO

CHILD = (
    "import hashlib, jax, numpy as np, ajax\n"
    "result = ajax.PPO(env_id='CartPole-v1', n_envs=2, n_steps=16).train(seed=[0, 1],\n"
    "    n_timesteps=640)\n"
    "leaves = jax.tree.leaves(result.state)\n"
    "print('digest', hashlib.sha256(b''.join(np.asarray(x).tobytes() for x in leaves))\n"
    "    .hexdigest(), flush=True)\n"
)


def digest(state) -> str:
    leaves = jax.tree.leaves(state)
    return hashlib.sha256(b"".join(np.asarray(x).tobytes() for x in leaves)).hexdigest()


def start_child(cache_root: Path) -> subprocess.Popen:
    env = dict(os.environ, AJAX_JAX_COMPILE_CACHE_DIR=str(cache_root), JAX_PLATFORMS="cpu")
    env.pop("AJAX_NO_COMPILE_CACHE", None)
    return subprocess.Popen(
        [sys.executable, "-c", CHILD],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(child: subprocess.Popen) -> tuple[str, str]:
    """The child's digest and what it wrote on standard error; it must have succeeded."""
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err
    assert "Traceback" not in err, err
    return next(line.split()[1] for line in out.splitlines() if line.startswith("digest")), err


def entries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.fixture(scope="module")
def reference() -> str:
    """The run's final state, computed in this process (its own cache)."""
    return digest(
        PPO(env_id="CartPole-v1", n_envs=2, n_steps=16).train(seed=[0, 1], n_timesteps=640).state
    )


@pytest.mark.slow
def test_corrupted_entries_are_recompiled(tmp_path, reference):
    """Every file of a filled cache (JAX's compiled programs and Ajax's exported ones) cut to
    half its length: the next process warns at most, and computes the same run."""
    root = tmp_path / "cache"
    assert finish(start_child(root))[0] == reference
    files = entries(root)
    assert any(p.name.endswith("-cache") for p in files), files
    assert any(p.parent.name == "programs" for p in files), files
    for path in files:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert finish(start_child(root))[0] == reference
    # And the entries it wrote back serve a third process.
    assert finish(start_child(root))[0] == reference


@pytest.mark.slow
def test_an_unwritable_cache_costs_at_most_a_warning(tmp_path, reference):
    """The cache root lies under a regular file, so no directory can be made there (a check
    that holds for root too, unlike file modes)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result, err = finish(start_child(blocker / "cache"))
    assert result == reference
    assert "Ajax's compile cache cannot be made at" in err and "AJAX_JAX_COMPILE_CACHE_DIR" in err
    assert "program cache" not in err  # one warning says it, not one per program


@pytest.mark.slow
def test_two_processes_filling_one_cache_at_once(tmp_path, reference):
    """Two processes compile the same programs into one empty cache at the same time; both
    compute the run, and what they left serves a third."""
    root = tmp_path / "cache"
    children = [start_child(root), start_child(root)]
    assert [finish(child)[0] for child in children] == [reference, reference]
    assert any(p.name.endswith("-cache") for p in entries(root))
    assert finish(start_child(root))[0] == reference
