"""JAX's persistent compile cache, pointed at one directory per machine and version set.

``import ajax`` calls :func:`configure`, so a second process that compiles the same program
(a rerun, a resumed trial) loads it from disk instead of compiling it again.

Environment variables:
    ``AJAX_JAX_COMPILE_CACHE_DIR``: the cache root (default ``~/.cache/ajax/jax_compile_cache``).
    ``AJAX_NO_COMPILE_CACHE=1``: leave JAX's cache off.

Entries live in ``<root>/<machine-and-versions>/`` so that machines sharing a home directory,
or virtual environments with other JAX versions, never load each other's programs. Nothing
trims the cache on its own: :func:`prune` deletes the least recently used entries.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import jax
import jaxlib

DEFAULT_ROOT = Path("~/.cache/ajax/jax_compile_cache")
ROOT_ENV = "AJAX_JAX_COMPILE_CACHE_DIR"
DISABLE_ENV = "AJAX_NO_COMPILE_CACHE"
# JAX records an entry's last read in a "<key>-atime" file only when its own eviction is on.
# A limit no disk reaches turns that bookkeeping on without ever evicting, so prune() can
# order entries by real use rather than by file-system access times (often not updated).
_UNREACHABLE_MAX_BYTES = 2**62
_CACHE_SUFFIX = "-cache"
_ATIME_SUFFIX = "-atime"


def cpuinfo_field(name: str, cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The first CPU's ``name`` field (``model name``, ``flags``) as Linux reports it in
    ``cpuinfo``; None where the file or the field is missing."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        field, _, value = line.partition(":")
        if field.strip().lower() == name:
            return value.strip()
    return None


def cpu_model() -> str:
    """The CPU's model name, as the kernel reports it (falls back to the platform's)."""
    return cpuinfo_field("model name") or platform.processor() or "unknown-cpu"


def machine_tag() -> str:
    """The subdirectory name: CPU model, architecture, Python, jax and jaxlib versions."""
    parts = [
        cpu_model(),
        platform.machine(),
        f"py{sys.version_info.major}.{sys.version_info.minor}",
        f"jax{jax.__version__}",
        f"jaxlib{jaxlib.__version__}",
    ]
    return "_".join(re.sub(r"[^A-Za-z0-9.+-]+", "-", p).strip("-") for p in parts)


def cache_root() -> Path:
    """The cache root: ``AJAX_JAX_COMPILE_CACHE_DIR`` or ``~/.cache/ajax/jax_compile_cache``."""
    return Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT).expanduser()


def cache_dir() -> Path:
    """The directory this machine and version set reads and writes."""
    return cache_root() / machine_tag()


def enabled() -> bool:
    """False when ``AJAX_NO_COMPILE_CACHE`` is set to a true value."""
    return os.environ.get(DISABLE_ENV, "").strip().lower() not in {"1", "true", "yes", "on"}


def usable_dir() -> Path | None:
    """:func:`cache_dir`, made if need be; None when the cache is off or the directory
    cannot be made (a path through a file, a read-only file system)."""
    if not enabled():
        return None
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return directory


def configure() -> Path | None:
    """Point JAX's persistent cache at :func:`cache_dir`; returns it, or None when disabled.

    Every program is cached, however small or quick to compile: the short programs of a
    sweep's evaluation and the long training program alike are paid for once per machine.
    """
    if not enabled():
        jax.config.update("jax_compilation_cache_dir", None)
        return None
    directory = usable_dir()
    if directory is None:
        # A cache that cannot be made costs the reuse of compiled programs, not the import.
        warnings.warn(
            f"Ajax's compile cache cannot be made at {cache_dir()}: every process will "
            f"compile its programs. Set {ROOT_ENV} to a directory you can write, or "
            f"{DISABLE_ENV}=1 to silence this.",
            stacklevel=2,
        )
        jax.config.update("jax_compilation_cache_dir", None)
        return None
    _release_earlier_cache(directory)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.config.update("jax_compilation_cache_max_size", _UNREACHABLE_MAX_BYTES)
    return directory


def _release_earlier_cache(directory: Path) -> None:
    """Let JAX open ``directory`` even if it already opened a cache elsewhere.

    JAX opens its persistent cache once, at the first compile after a cache directory is
    set, and keeps it: a program compiled under another ``jax_compilation_cache_dir``
    before :func:`configure` would keep every later program out of Ajax's directory,
    silently. JAX has no public call to reopen it, so this uses ``reset_cache`` from its
    private module, and warns with the fix where that is gone.
    """
    try:
        from jax._src import compilation_cache as jax_cache

        opened = jax_cache._cache
        if opened is None or Path(str(opened._path)) == directory:
            return
        jax_cache.reset_cache()
    except (ImportError, AttributeError):
        warnings.warn(
            "JAX's compile cache was opened before Ajax could point it at "
            f"{directory}, and this JAX version cannot reopen it: programs will not be "
            "cached there. Import ajax before compiling anything, or set "
            f"{DISABLE_ENV}=1 to silence this.",
            stacklevel=3,
        )


@dataclass(frozen=True)
class _Entry:
    files: tuple[Path, ...]
    last_used: float
    size: int


def _entries(root: Path) -> list[_Entry]:
    """Every cached program under ``root`` (its data and atime files as one entry)."""
    groups: dict[Path, list[Path]] = {}
    for path in root.rglob("*"):
        if not path.is_file() or path.name == ".lockfile":
            continue
        stem = path.name
        for suffix in (_CACHE_SUFFIX, _ATIME_SUFFIX):
            if stem.endswith(suffix):
                stem = stem[: -len(suffix)]
                break
        groups.setdefault(path.with_name(stem), []).append(path)
    entries = []
    for stem, files in groups.items():
        stats = [f.stat() for f in files]
        atime_file = stem.with_name(stem.name + _ATIME_SUFFIX)
        if atime_file in files:
            # JAX's own record of the entry's last read (written on every cache hit).
            last_used = int.from_bytes(atime_file.read_bytes()[:8] or b"\0", "little") / 1e9
        else:
            last_used = max(max(s.st_mtime, s.st_atime) for s in stats)
        entries.append(_Entry(tuple(files), last_used, sum(s.st_size for s in stats)))
    return entries


def size_of(root: Path | str) -> int:
    """Total bytes of the cache files under ``root``."""
    root = Path(root).expanduser()
    return sum(e.size for e in _entries(root)) if root.exists() else 0


def prune(root: Path | str, max_bytes: int) -> int:
    """Delete the least recently used entries under ``root`` until the rest fit ``max_bytes``.

    Works on the whole root (every machine's subdirectory), so one call trims a cache shared
    by several machines. Returns the number of bytes deleted.
    """
    if max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
    root = Path(root).expanduser()
    if not root.exists():
        return 0
    entries = sorted(_entries(root), key=lambda e: e.last_used)
    total = sum(e.size for e in entries)
    deleted = 0
    for entry in entries:
        if total - deleted <= max_bytes:
            break
        for f in entry.files:
            f.unlink(missing_ok=True)
        deleted += entry.size
    return deleted
