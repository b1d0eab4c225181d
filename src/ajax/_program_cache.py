"""A run's programs, exported with ``jax.export`` and kept on disk, so that a relaunch skips
tracing and lowering as the compile cache lets it skip compiling.

JAX's persistent compile cache (:mod:`ajax._compile_cache`) stores what XLA compiled, but
finds it by the lowered program: a new process must first trace the agent's Python and lower
it to StableHLO, which for PPO on CartPole took most of a relaunch's compile-and-warm-up
time (PERFORMANCE_REPORT.md, "Relaunch"). ``train`` therefore runs every program through
``jax.export``: the traced program is serialised, and the run compiles a thin program that
calls it. A relaunch that finds a serialised program under its key deserialises it and
compiles the same thin program, which the compile cache then serves.

The key is a hash of everything that shapes the programs: Ajax's own source files, the
versions of JAX and of every library that traces into them, the JAX options that change
tracing, the agent's class, hyperparameters and copies, the environment's id and
parameters, the number of seeds each device runs (``ajax._devices``) and the evaluation;
the init program's key adds the budget, which the segment program does not depend on. A
run that cannot be keyed (an agent class or an environment built outside Ajax) is exported
all the same, and not stored. Entries live in ``<compile cache>/programs/``;
``AJAX_NO_COMPILE_CACHE=1`` turns both off, and :func:`ajax._compile_cache.prune` trims
both. An entry that cannot be read is ignored (with a warning) and written again.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import os
import pickle
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ajax import _compile_cache
from ajax._xla import active_choices, weight_gradient_form

#: Bumped when the stored layout changes.
FORMAT = 1
#: Distributions whose code is traced into a run's programs.
_TRACED_LIBRARIES = (
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "numpy",
    "chex",
    "gymnax",
    "brax",
    "mujoco",
    "mujoco-mjx",
    "playground",
    "target-gym",
)
#: JAX options that change what a trace produces.
_TRACE_OPTIONS = (
    "jax_enable_x64",
    "jax_default_prng_impl",
    "jax_threefry_partitionable",
    "jax_default_matmul_precision",
    "jax_numpy_rank_promotion",
    "jax_numpy_dtype_promotion",
)


@dataclasses.dataclass(frozen=True, eq=False)
class Program:
    """A program exported on the flat list of its arguments' arrays, and the tree structure
    of its outputs; calling it takes and returns trees, as the traced function did."""

    exported: jax.export.Exported
    out_tree: Any

    def __call__(self, *args: Any) -> Any:
        return jax.tree.unflatten(self.out_tree, self.exported.call(*jax.tree.leaves(args)))

    @property
    def out_shape(self) -> Any:
        leaves = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in self.exported.out_avals]
        return jax.tree.unflatten(self.out_tree, leaves)


def export(fn: Callable, *args: Any) -> Program:
    """Trace ``fn(*args)`` (arrays or shapes) and export it."""
    in_tree = jax.tree.structure(args)
    out_tree = []

    def flat(*leaves):
        out = fn(*jax.tree.unflatten(in_tree, leaves))
        out_tree.append(jax.tree.structure(out))
        return jax.tree.leaves(out)

    exported = jax.export.export(jax.jit(flat))(*jax.tree.leaves(args))
    return Program(exported, out_tree[0])


def cached(key: str | None, build: Callable[[], Program]) -> Program:
    """The program stored under ``key``, or ``build()``'s, stored there."""
    program = load(key)
    if program is None:
        program = build()
        store(key, program)
    return program


def _digest(value: Any, h: Any) -> bool:
    """Feeds ``value`` to the hash ``h``; False if it holds something that cannot be hashed
    by content (an object whose representation is its address)."""
    if isinstance(value, dict):
        h.update(b"{")
        for k in sorted(value, key=repr):
            h.update(repr(k).encode())
            if not _digest(value[k], h):
                return False
        h.update(b"}")
        return True
    if isinstance(value, list | tuple):
        h.update(f"{type(value).__name__}[".encode())
        if not all(_digest(v, h) for v in value):
            return False
        h.update(b"]")
        return True
    if isinstance(value, np.ndarray | jax.Array):
        array = np.asarray(value)
        h.update(f"{array.dtype}{array.shape}".encode() + array.tobytes())
        return True
    text = repr(value)
    if " at 0x" in text:
        return False
    h.update(f"{type(value).__qualname__}:{text}".encode())
    return True


@functools.cache
def _environment_digest() -> str:
    """Ajax's source files, the traced libraries' versions and the Python version."""
    h = hashlib.sha256(sys.version.encode())
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode() + path.read_bytes())
    for name in _TRACED_LIBRARIES:
        try:
            h.update(f"{name}={importlib.metadata.version(name)}".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{name}=absent".encode())
    return h.hexdigest()


def _sources_digest(objects: list[Any]) -> str | None:
    """The hash of the source files of the modules outside Ajax that define the classes of
    ``objects`` and their bases (a user's agent, an environment of a family added with
    ``register_family``), so that an edit to one keys its programs anew; None where one has
    no source file to read (a class defined at an interactive prompt)."""
    h = hashlib.sha256()
    names = {cls.__module__ for obj in objects for cls in type(obj).__mro__}
    for name in sorted(names - {"builtins"}):
        if name == "ajax" or name.startswith("ajax."):
            continue  # in _environment_digest already
        path = getattr(sys.modules.get(name), "__file__", None)
        if path is None or not Path(path).is_file():
            return None
        h.update(name.encode() + Path(path).read_bytes())
    return h.hexdigest()


def run_key(
    agent: Any, n_seeds: int, num_episode_test: int | None, swept: tuple[str, ...] = ()
) -> str | None:
    """The hash of everything that shapes a run's segment program for ``n_seeds`` seeds, a
    device's share (:func:`key_with` adds what else shapes its init program), or None when
    the run cannot be keyed: its environment is an object rather than a registered id, or a
    class it runs has no source file. The ``swept`` hyperparameters are arguments of a
    sweep's programs, so they enter the key by name, not by value."""
    if agent.registered_env_id is None:
        return None
    env = agent.env.unwrapped
    sources = _sources_digest([agent, env, *([env.env] if hasattr(env, "env") else [])])
    if sources is None:
        return None
    h = hashlib.sha256(f"format{FORMAT}".encode())
    h.update(_environment_digest().encode())
    h.update(sources.encode())
    h.update(jax.default_backend().encode())
    for option in _TRACE_OPTIONS:
        h.update(f"{option}={getattr(jax.config, option, None)}".encode())
    # The user's XLA_FLAGS can take the products from YNNPACK, and the layers' weight
    # gradients are traced for the library that has them.
    h.update(f"weight_gradients={weight_gradient_form(agent)}".encode())
    h.update(f"tuning={active_choices()}".encode())
    described = {
        "agent": f"{type(agent).__module__}.{type(agent).__qualname__}",
        "hyperparameters": agent.hyperparameters() | {name: "swept" for name in swept},
        "env_id": agent.registered_env_id,
        "env_params": agent.env_params,
        "n_envs": agent.n_envs,
        "n_seeds": n_seeds,
        "num_episode_test": num_episode_test,
    }
    return h.hexdigest() if _digest(described, h) else None


def key_with(key: str | None, *parts: Any) -> str | None:
    """``key`` extended by ``parts`` (None stays None)."""
    if key is None:
        return None
    return hashlib.sha256(f"{key}{parts!r}".encode()).hexdigest()


def _path(key: str | None) -> Path | None:
    """Where ``key``'s program is stored; None without a key or a usable cache (its
    compile cache warned at import)."""
    directory = _compile_cache.usable_dir()
    if key is None or directory is None:
        return None
    return directory / "programs" / f"{key}.jaxexport"


def load(key: str | None) -> Program | None:
    """The program stored under ``key``, or None (none stored, the cache off, or an entry
    that cannot be read, which is then replaced)."""
    path = _path(key)
    if path is None:
        return None
    try:
        blob = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        warnings.warn(f"Ajax's program cache could not read {path} ({error}).", stacklevel=3)
        return None
    try:
        stored = pickle.loads(blob)
        if stored["format"] != FORMAT:
            return None
        program = Program(jax.export.deserialize(stored["exported"]), stored["out_tree"])
    except Exception as error:  # a truncated or foreign file: compile afresh and rewrite it
        warnings.warn(
            f"Ajax's program cache entry {path} is unreadable ({type(error).__name__}); the "
            "run traces its programs again and replaces it.",
            stacklevel=3,
        )
        return None
    os.utime(path)  # its last use, for prune()
    return program


def store(key: str | None, program: Program) -> None:
    """Writes ``program`` under ``key`` atomically (a reader sees the old entry or the whole new
    one); a cache that cannot be written costs a warning, not the run."""
    path = _path(key)
    if path is None:
        return
    blob = pickle.dumps(
        {"format": FORMAT, "exported": program.exported.serialize(), "out_tree": program.out_tree}
    )
    partial = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".partial") as f:
            partial = Path(f.name)
            f.write(blob)
        os.replace(partial, path)
    except OSError as error:
        if partial is not None:
            partial.unlink(missing_ok=True)
        warnings.warn(f"Ajax's program cache could not write {path} ({error}).", stacklevel=3)
