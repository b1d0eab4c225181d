"""Where logged rows go. Each sink writes a row as soon as it gets it, so an interrupted run
keeps every row it produced."""

from __future__ import annotations

import csv
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from ajax.logging.config import WANDB_MODES, LoggingConfig

Row = dict[str, Any]


class Sink:
    def write(self, row: Row) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Flush and release the sink's files."""


class CSVSink(Sink):
    """``metrics.csv``: one row per seed and evaluation; columns fixed by the first row."""

    def __init__(self, path: Path):
        self._file = path.open("w", newline="")
        self._writer: csv.DictWriter | None = None

    def write(self, row: Row) -> None:
        if self._writer is None:
            self._writer = csv.DictWriter(self._file, fieldnames=list(row), extrasaction="ignore")
            self._writer.writeheader()
        self._writer.writerow(row)
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class JSONLinesSink(Sink):
    """``metrics.jsonl``: one JSON object per line (NaN written as null)."""

    def __init__(self, path: Path):
        self._file = path.open("w")

    def write(self, row: Row) -> None:
        clean = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in row.items()
        }
        self._file.write(json.dumps(clean) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


#: A row's columns that say where it is from, not what was measured.
_LABELS = {"timestep", "seed", "config"}


def place_name(row: Row) -> str:
    """The place a row is of: ``seed_<s>``, or ``config_<c>/seed_<s>`` in a sweep, whose
    configurations share their seeds."""
    seed = f"seed_{row['seed']}"
    return seed if "config" not in row else f"config_{row['config']}/{seed}"


def _measured(row: Row) -> dict[str, int | float]:
    return {k: v for k, v in row.items() if k not in _LABELS and isinstance(v, int | float)}


def read_rows(directory: Path) -> list[Row]:
    """The rows a :class:`JSONLinesSink` wrote in ``directory``, its nulls NaN again."""
    lines = (directory / "metrics.jsonl").read_text().splitlines()
    return [
        {k: float("nan") if v is None else v for k, v in json.loads(line).items()} for line in lines
    ]


class TensorBoardSink(Sink):
    """TensorBoard event files, one directory per place (``tensorboard/seed_<s>``, or
    ``tensorboard/config_<c>/seed_<s>`` in a sweep).

    With ``purge_step``, the new event files tell TensorBoard to drop the earlier files'
    events from that step on: a resumed run writes its rows again from there. A NaN (a
    training metric before the first update) is written as it is, without tensorboardX's
    warning for each one, which would flood the console through a whole warm-up.
    """

    def __init__(self, directory: Path, purge_step: int | None = None):
        from tensorboardX import SummaryWriter

        self._directory = directory
        self._purge_step = purge_step
        self._writers: dict[str, SummaryWriter] = {}
        self._summary_writer = SummaryWriter
        logging.getLogger("tensorboardX.x2num").addFilter(_no_nan_warning)

    def write(self, row: Row) -> None:
        place = place_name(row)
        if place not in self._writers:
            self._writers[place] = self._summary_writer(
                str(self._directory / place), purge_step=self._purge_step
            )
        writer = self._writers[place]
        for key, value in _measured(row).items():
            writer.add_scalar(key, value, row["timestep"])
        writer.flush()

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
        logging.getLogger("tensorboardX.x2num").removeFilter(_no_nan_warning)


def _no_nan_warning(record: logging.LogRecord) -> bool:
    """Drops tensorboardX's "NaN or Inf found" warning, its only message (see TensorBoardSink)."""
    return not record.getMessage().startswith("NaN or Inf")


def _import_wandb() -> Any:
    try:
        import wandb
    except ImportError as error:
        raise ImportError(
            "LoggingConfig(wandb=True) needs Weights & Biases: from Ajax's clone, "
            'pip install -e ".[wandb]".'
        ) from error
    return wandb


def wandb_mode(config: LoggingConfig) -> str:
    """The mode ``config``'s W&B run runs in: its ``wandb_mode``, else ``WANDB_MODE``, else
    online. Refuses an online run without W&B credentials, which ``wandb.init`` would fail
    on (or prompt for) once the run had compiled."""
    mode = config.wandb_mode or os.environ.get("WANDB_MODE") or "online"
    if mode not in WANDB_MODES:
        raise ValueError(
            f"WANDB_MODE={mode!r} is not a mode Ajax runs W&B in: set it to online, offline or "
            "disabled, or give LoggingConfig(wandb_mode=...) (ajax train --wandb-mode)."
        )
    wandb = _import_wandb()
    # login(prompt=False) reads the key W&B would use (WANDB_API_KEY, its settings, .netrc)
    # without asking for one or contacting the server.
    if mode == "online" and wandb.run is None and not wandb.login(prompt=False, verify=False):
        raise ValueError(
            "Weights & Biases has no API key on this machine, so an online run cannot start: "
            "run `wandb login` (or set WANDB_API_KEY), or log offline with "
            "LoggingConfig(wandb_mode='offline') / ajax train --wandb-mode offline / "
            "WANDB_MODE=offline, and `wandb sync` the run directory later."
        )
    return mode


class WandbSink(Sink):
    """One Weights & Biases run for the whole batch of seeds; keys are ``<place>/<metric>``,
    each place named as :func:`place_name` names it.
    An offline run is written under the run directory's ``wandb/``."""

    def __init__(self, directory: Path, project: str, mode: str, name: str, config: dict):
        wandb = _import_wandb()
        self._run = wandb.init(
            project=project, mode=mode, name=name, dir=str(directory), config=config, reinit=True
        )

    def write(self, row: Row) -> None:
        place = place_name(row)
        values = {f"{place}/{k}": v for k, v in _measured(row).items()}
        self._run.log(values | {"timestep": row["timestep"]})

    def close(self) -> None:
        self._run.finish()
