"""What a run logs, how often and where."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: The modes of a Weights & Biases run.
WANDB_MODES = ("online", "offline", "disabled")


@dataclass(frozen=True)
class LoggingConfig:
    """Evaluate every ``log_frequency`` environment steps and record the results.

    Each evaluation runs ``num_episode_test`` deterministic episodes (an argument of
    ``train``) on copies of the environment kept apart from training. Rows go to
    ``log_dir/run_name/``: ``metrics.csv`` and ``metrics.jsonl`` by default, TensorBoard event
    files with ``tensorboard=True``, a Weights & Biases run with ``wandb=True`` (install the
    ``wandb`` extra). ``wandb_mode`` is ``"online"``, ``"offline"`` (written under the run
    directory, for ``wandb sync`` later; needs no login or network) or ``"disabled"``; None
    takes the ``WANDB_MODE`` environment variable, or online where it is unset. An online
    run without a W&B login is refused before anything compiles. Without a ``run_name`` each
    run takes a fresh dated directory, its own even among runs started in the same second
    (suffixed ``_2``, ``_3``...); a ``run_name`` whose directory already holds a run is
    refused before anything compiles, not written over.
    """

    log_frequency: int
    log_dir: str | Path = "runs"
    run_name: str | None = None
    csv: bool = True
    jsonl: bool = True
    tensorboard: bool = False
    wandb: bool = False
    wandb_project: str = "ajax"
    wandb_mode: str | None = None

    def __post_init__(self) -> None:
        f = self.log_frequency
        if isinstance(f, bool) or not isinstance(f, int) or f <= 0:
            raise ValueError(
                f"log_frequency must be a positive number of environment steps, got {f!r}; "
                "e.g. LoggingConfig(log_frequency=10_000)."
            )
        if self.run_name is not None and not re.fullmatch(r"[A-Za-z0-9._=+-]+", self.run_name):
            raise ValueError(
                f"run_name {self.run_name!r} must be a plain directory name "
                "(letters, digits and . _ = + -)."
            )
        if self.wandb_mode not in {None, *WANDB_MODES}:
            raise ValueError(
                f"wandb_mode must be 'online', 'offline', 'disabled' or None (WANDB_MODE, else "
                f"online), got {self.wandb_mode!r}."
            )
