"""The writer thread: rows from the run are queued by the training loop and written on the
CPU by a worker, so the compiled program never waits on files or network."""

from __future__ import annotations

import json
import queue
import threading
import time
from pathlib import Path
from typing import Any

from ajax.logging.config import LoggingConfig
from ajax.logging.sinks import CSVSink, JSONLinesSink, Row, Sink, TensorBoardSink, WandbSink

_STOP = object()


def run_directory(config: LoggingConfig, default_name: str) -> Path:
    """``log_dir/run_name``; without a run name, a fresh ``<default_name>_<time>`` directory."""
    root = Path(config.log_dir).expanduser()
    if config.run_name is not None:
        return root / config.run_name
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate, n = root / f"{default_name}_{stamp}", 1
    while candidate.exists():
        n += 1
        candidate = root / f"{default_name}_{stamp}_{n}"
    return candidate


def make_sinks(config: LoggingConfig, directory: Path, run_config: dict) -> list[Sink]:
    sinks: list[Sink] = []
    if config.csv:
        sinks.append(CSVSink(directory / "metrics.csv"))
    if config.jsonl:
        sinks.append(JSONLinesSink(directory / "metrics.jsonl"))
    if config.tensorboard:
        sinks.append(TensorBoardSink(directory / "tensorboard"))
    if config.wandb:
        sinks.append(
            WandbSink(
                directory, config.wandb_project, config.wandb_mode, directory.name, run_config
            )
        )
    return sinks


class LogWriter:
    """Writes rows to every sink from a background thread.

    ``close`` drains the queue and closes the sinks; the run calls it on normal end, on an
    exception and on Ctrl-C, so every row produced before a failure is on disk.
    """

    def __init__(self, config: LoggingConfig, directory: Path, run_config: dict[str, Any]):
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(run_config, indent=2, default=str))
        self.directory = directory
        self._sinks = make_sinks(config, directory, run_config)
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="ajax-log-writer", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while (rows := self._queue.get()) is not _STOP:
            try:
                for row in rows:
                    for sink in self._sinks:
                        sink.write(row)
            except BaseException as error:  # keep draining; reported by close()
                self._error = error

    def write(self, rows: list[Row]) -> None:
        self._queue.put(rows)

    def close(self) -> None:
        self._queue.put(_STOP)
        self._thread.join()
        for sink in self._sinks:
            sink.close()
        if self._error is not None:
            raise RuntimeError(f"writing logs to {self.directory} failed") from self._error
