"""The writer thread: rows from the run are queued by the training loop and written on the
CPU by a worker, so the compiled program never waits on files or network."""

from __future__ import annotations

import json
import queue
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ajax.logging.config import LoggingConfig
from ajax.logging.sinks import (
    CSVSink,
    JSONLinesSink,
    Row,
    Sink,
    TensorBoardSink,
    WandbSink,
    wandb_mode,
)

_STOP = object()


def run_directory(config: LoggingConfig, default_name: str, claim: bool = True) -> Path:
    """``log_dir/run_name``; without a run name, a fresh ``<default_name>_<time>`` directory,
    suffixed ``_2``, ``_3``... past those that exist. With ``claim`` (the process that writes
    the run's files) the fresh directory is created here, which only one process can do: runs
    started in the same second in parallel (a shell loop over seeds) each get their own."""
    root = Path(config.log_dir).expanduser()
    if config.run_name is not None:
        return root / config.run_name
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate, n = root / f"{default_name}_{stamp}", 1
    while _taken(candidate, claim):
        n += 1
        candidate = root / f"{default_name}_{stamp}_{n}"
    return candidate


def _taken(directory: Path, claim: bool) -> bool:
    """Whether ``directory`` exists; with ``claim``, creating it if not, in one step."""
    if not claim:
        return directory.exists()
    try:
        directory.mkdir(parents=True)
    except FileExistsError:
        return True
    except OSError as error:
        raise _unwritable(directory, error) from error
    return False


def _unwritable(directory: Path, error: OSError) -> OSError:
    """The error of a run whose log directory cannot be written, naming the fix."""
    return OSError(
        f"Cannot write logs to {directory} ({error}). Give LoggingConfig a log_dir you can "
        "write to."
    )


class RunDirectoryTaken(FileExistsError):
    """A new run was pointed at a directory that holds another run's ``config.json``."""


def refuse_a_taken_directory(directory: Path, fix: str | None = None) -> None:
    """Refuses a new run in ``directory`` if another run is there (its ``config.json``): the
    new run would overwrite that run's logs and saved result. ``fix`` says what to do instead
    where the caller names the directory (a study's trials). A resumed run continues its own
    directory and is not checked."""
    if (directory / "config.json").exists():
        fix = fix or (
            "Give this run another run_name, or remove that directory; if it was "
            f"checkpointed, continue it with ajax.resume({str(directory)!r})."
        )
        raise RunDirectoryTaken(
            f"{directory} already holds a run (its config.json), whose logs and saved result "
            f"a new run there would overwrite. {fix}"
        )


def make_sinks(
    config: LoggingConfig, directory: Path, run_config: dict, first_step: int | None
) -> list[Sink]:
    """The sinks ``config`` asks for; ``first_step`` is the first row's timestep when the
    rows are written again from the start (a resumed run), from which TensorBoard drops what
    the earlier writers wrote."""
    sinks: list[Sink] = []
    if config.csv:
        sinks.append(CSVSink(directory / "metrics.csv"))
    if config.jsonl:
        sinks.append(JSONLinesSink(directory / "metrics.jsonl"))
    if config.tensorboard:
        sinks.append(TensorBoardSink(directory / "tensorboard", first_step))
    if config.wandb:
        sinks.append(
            WandbSink(
                directory, config.wandb_project, wandb_mode(config), directory.name, run_config
            )
        )
    return sinks


class LogWriterError(RuntimeError):
    """Writing the logs failed; the rows that were not written are in ``fallback``."""

    def __init__(self, message: str, fallback: Path | None):
        super().__init__(message)
        self.fallback = fallback


def _write_fallback(directory: Path, rows: list[Row]) -> Path:
    """Writes ``rows`` that could not go to ``directory`` to a fresh JSON-lines file under the
    system's temporary directory (most likely another file system); returns its path."""
    root = Path(tempfile.gettempdir()) / "ajax-unwritten-rows"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", dir=root, prefix=f"{directory.name}-", suffix=".jsonl", delete=False
    ) as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return Path(f.name)


class LogWriter:
    """Writes rows to every sink from a background thread.

    The directory is created and ``config.json`` written when the writer is built, which the
    run does before compiling: a log directory that cannot be written fails the run at once.
    If a sink fails later (a full disk, say), that batch and every later one are kept in
    memory, :meth:`check` raises in the training loop at the next segment, and ``close``
    writes the kept rows to a fallback file, named in the error. ``close`` drains the queue
    and closes the sinks; the run calls it on normal end, on an exception and on Ctrl-C, so
    every row produced before a failure is on disk, in the log directory or the fallback.

    ``replay`` are rows written first: a resumed run's rows up to its checkpoint, with which
    its logs start again, in place of what the interrupted run left.
    """

    def __init__(
        self,
        config: LoggingConfig,
        directory: Path,
        run_config: dict[str, Any],
        replay: list[Row] | None = None,
    ):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / "config.json").write_text(json.dumps(run_config, indent=2, default=str))
        except OSError as error:
            raise _unwritable(directory, error) from error
        self.directory = directory
        first_step = replay[0]["timestep"] if replay else None
        self._sinks = make_sinks(config, directory, run_config, first_step)
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._unwritten: list[Row] = []
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="ajax-log-writer", daemon=True)
        self._thread.start()
        if replay:
            self.write(replay)

    def _work(self) -> None:
        while (rows := self._queue.get()) is not _STOP:
            if self._error is not None:
                self._unwritten.extend(rows)
                continue
            try:
                for row in rows:
                    for sink in self._sinks:
                        sink.write(row)
            except BaseException as error:  # kept, with the rows; raised by check() and close()
                self._error = error
                self._unwritten.extend(rows)

    def write(self, rows: list[Row]) -> None:
        self._queue.put(rows)

    def check(self) -> None:
        """Raises (closing the writer) if a sink has failed."""
        if self._error is not None:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join()
        for sink in self._sinks:
            try:
                sink.close()
            except OSError as error:
                self._error = self._error or error
        if self._error is None:
            return
        fallback = _write_fallback(self.directory, self._unwritten) if self._unwritten else None
        kept = (
            f"; the {len(self._unwritten)} rows not written are in {fallback}" if fallback else ""
        )
        raise LogWriterError(
            f"Writing logs to {self.directory} failed ({type(self._error).__name__}: "
            f"{self._error}){kept}.",
            fallback,
        ) from self._error
