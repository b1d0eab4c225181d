"""Checkpoints of a run, and resuming one exactly.

With ``train(..., checkpoint=CheckpointConfig(...))`` the run saves its whole training state
every ``every`` segments: every array of the agent's state (parameters, optimiser states,
environment copies, RNG keys, replay or episode storage, normalisation statistics) together
with what the run needs to go on (its config, the segments done, every summary logged so
far). Saves go through Orbax: each is written to a temporary directory that is renamed
once complete, so a checkpoint is either whole or ignored, and written by Orbax's
background threads while the next segment runs. Only the last ``keep`` are kept.

:func:`resume` continues from the latest complete checkpoint. The segments are one compiled
program fed the restored state and the same segment indices, so the resumed run computes
what the uninterrupted one would have, bit for bit, and its logs are rewritten from the
saved summaries before it goes on: no row is missing or written twice.

Orbax is imported only by a run that checkpoints: it takes seconds to import.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ajax._version import __version__
from ajax.serialization import fit_leaves, host_array

#: The layout of a checkpoint: its ``meta`` item, and the state's. 2: the on-policy agents'
#: optimiser state follows the fit's layout of the parameters (``ajax.minibatches``), so a
#: format-1 checkpoint's would be read in the wrong order.
FORMAT = 2
_ITEMS = ("state", "meta")


@dataclasses.dataclass(frozen=True)
class CheckpointConfig:
    """Save the run's whole state every ``every`` segments, keeping the last ``keep``.

    A segment ends at each ``log_frequency`` boundary of the logging config (one segment is
    the whole run without one). ``dir`` is where the checkpoints go; by default the run
    directory's ``checkpoints/``, which needs a logging config. ``ajax.resume(dir)`` (or
    the run directory) continues the run from the latest one.
    """

    every: int = 10
    keep: int = 2
    dir: str | Path | None = None

    def __post_init__(self) -> None:
        for name in ("every", "keep"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(
                    f"CheckpointConfig.{name} must be a positive integer, got {value!r}; "
                    "e.g. CheckpointConfig(every=10, keep=2)."
                )


def checkpoint_directory(config: CheckpointConfig, run_directory: Path | None) -> Path:
    """Where a run's checkpoints go; refuses, before compiling, a run with nowhere to put
    them."""
    if config.dir is not None:
        return Path(config.dir).expanduser().absolute()
    if run_directory is None:
        raise ValueError(
            "CheckpointConfig has no dir and the run has no logging config, whose run "
            "directory would hold the checkpoints. Give CheckpointConfig(dir=...) or a "
            "logging_config."
        )
    return run_directory.absolute() / "checkpoints"


def _manager(directory: Path, keep: int | None = None) -> Any:
    import orbax.checkpoint as ocp

    # Each process's manager is its own: in a run of several processes, process 0 alone
    # saves (ajax.distributed), and every process may read a checkpoint to resume from.
    own = jax.process_index()
    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep,
        enable_async_checkpointing=True,
        create=False,  # the Checkpointer makes the directory (Orbax will not, for one process)
        multiprocessing_options=ocp.options.MultiprocessingOptions(
            primary_host=own, active_processes={own}
        ),
    )
    return ocp.CheckpointManager(directory, options=options, item_names=_ITEMS)


#: Copies of the state a checkpoint holds in host memory while it is made: the
#: checkpointer's own, which the run's next segment cannot overwrite, and Orbax's copy of it.
HOST_COPIES = 2


class Checkpointer:
    """Saves a run's checkpoints into ``directory`` (see the module's docstring).

    A fresh run refuses a directory that already holds checkpoints: they belong to another
    run, or to this one, which :func:`resume` continues.
    """

    def __init__(self, directory: Path, config: CheckpointConfig, fresh: bool):
        if fresh and _complete_steps(directory):
            raise ValueError(
                f"{directory} already holds checkpoints of a run. Continue that run with "
                f"ajax.resume({str(directory)!r}), or give CheckpointConfig another dir."
            )
        try:
            directory.mkdir(parents=True, exist_ok=True)
            probe = directory / ".ajax-write-probe"
            probe.write_text("")
            probe.unlink()
        except OSError as error:
            raise OSError(
                f"Cannot write checkpoints to {directory} ({error}). Give CheckpointConfig a "
                "dir you can write to."
            ) from error
        self.directory = directory
        self._manager = _manager(directory, config.keep)

    def save(self, segments_done: int, state: Any, extra: dict[str, Any]) -> None:
        """Starts saving ``state`` (after ``segments_done`` segments) with ``extra`` in its
        meta; returns once the arrays are copied to host memory, and the files are written in
        the background. The copies are the checkpoint's own: the run donates ``state`` to the
        next segment, which overwrites its buffers."""
        import orbax.checkpoint as ocp

        # The previous save's copies are let go before this one's are made: Orbax holds them
        # until its write is waited for, so a run of several checkpoints held two states'
        # copies at once (DreamerV3 with a million MinAtar frames ran out of memory).
        self._manager.wait_until_finished()
        # Orbax refuses arrays of zero size (MJX's empty Data fields); they hold nothing, and
        # restore() takes them from the template.
        leaves = [host_array(leaf, copy=True) for leaf in jax.tree.leaves(state) if np.size(leaf)]
        meta = {"format": FORMAT, "ajax_version": __version__, "segments_done": segments_done}
        self._manager.save(
            segments_done,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(leaves), meta=ocp.args.JsonSave(meta | extra)
            ),
        )

    def close(self) -> None:
        """Waits for the saves in flight, then releases the manager."""
        self._manager.wait_until_finished()
        self._manager.close()


def _complete_steps(directory: Path) -> list[int]:
    """The complete checkpoints in ``directory``: Orbax writes each into a temporary
    directory and renames it to its step once every file is in."""
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit() and p.is_dir())


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: its directory, its step (segments done) and its ``meta``."""

    directory: Path
    step: int
    meta: dict[str, Any]

    def state(self, template: Any) -> Any:
        """The saved state, in the structure of ``template`` (a state or its shapes); refuses
        one whose arrays do not fit it. Arrays of zero size, which were not saved, are made
        from the template."""
        import orbax.checkpoint as ocp

        manager = _manager(self.directory)
        try:
            restored = manager.restore(
                self.step, args=ocp.args.Composite(state=ocp.args.StandardRestore())
            )
        finally:
            manager.close()
        saved = iter(restored.state)
        leaves = [
            next(saved, None) if math.prod(want.shape) else np.zeros(want.shape, want.dtype)
            for want in jax.tree.leaves(template)
        ]
        if any(leaf is None for leaf in leaves) or next(saved, None) is not None:
            raise ValueError(
                f"{len(restored.state)} arrays were saved, where this agent's state has "
                f"{sum(1 for want in jax.tree.leaves(template) if math.prod(want.shape))} of "
                "non-zero size"
            )
        return fit_leaves(template, leaves)


def latest_checkpoint(path: str | Path) -> Checkpoint:
    """The latest complete checkpoint under ``path``: a checkpoint directory, or a run
    directory (whose ``checkpoints/`` holds them, or whose ``config.json`` says where)."""
    import orbax.checkpoint as ocp

    path = Path(path).expanduser().absolute()
    directory = path
    if _complete_steps(path / "checkpoints"):
        directory = path / "checkpoints"
    elif (path / "config.json").is_file():
        # A run directory whose checkpoints went elsewhere (CheckpointConfig(dir=...)).
        checkpoint = json.loads((path / "config.json").read_text()).get("checkpoint")
        directory = Path(checkpoint["dir"]) if checkpoint else path
    steps = _complete_steps(directory)
    if not steps:
        raise FileNotFoundError(
            f"{path} holds no complete Ajax checkpoint: give the run directory, or the "
            "checkpoint directory of a run trained with checkpoint=CheckpointConfig(...)."
        )
    manager = _manager(directory)
    try:
        meta = manager.restore(steps[-1], args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
    finally:
        manager.close()
    return Checkpoint(directory, steps[-1], dict(meta.meta))
