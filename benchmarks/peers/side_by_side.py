"""What the peer scripts share: the reference's seeds in worker processes, Ajax's seeds in one
vmapped run, training returns averaged over windows of steps, the row's provenance, and the
plot of both sides' IQM with its 95% band."""

from __future__ import annotations

import datetime
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np


def reference_seeds(run: Callable[..., Any], workers: int, seeds: int, *args: Any):
    """``run(*args, seed)`` for seeds 0..seeds-1, ``workers`` processes at once; the results
    and the wall time."""
    started = time.perf_counter()
    with ProcessPoolExecutor(workers) as pool:
        results = list(pool.map(run, *([a] * seeds for a in args), range(seeds)))
    return results, time.perf_counter() - started


def windowed(ends: list, returns: list, steps: int, window: int) -> np.ndarray:
    """The mean return of the episodes that ended in each window of steps (NaN for none)."""
    edges = np.arange(window, steps + 1, window)
    bins = np.searchsorted(edges, np.asarray(ends), side="left")
    out = np.full(len(edges), np.nan)
    for b in range(len(edges)):
        inside = np.asarray(returns)[bins == b]
        if inside.size:
            out[b] = inside.mean()
    return out


def ajax_seeds(agent: Any, steps: int, seeds: int, window: int, episodes: int) -> dict:
    """The agent's seeds in one vmapped run, evaluated every ``window`` steps: the mean return
    of the training episodes that ended in each segment, the evaluations, their timesteps,
    and the wall time."""
    import ajax

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as log_dir:
        result = agent.train(
            seed=list(range(seeds)),
            n_timesteps=steps,
            logging_config=ajax.LoggingConfig(log_frequency=window, log_dir=log_dir),
            num_episode_test=episodes,
        )
    return {
        "ajax_window_ends": np.asarray(result.train_metrics["timestep"]).tolist(),
        "ajax": np.round(result.train_metrics["train/episode_return"], 1).tolist(),
        "ajax_eval_steps": np.asarray(result.evaluations["timestep"]).tolist(),
        "ajax_eval": np.round(result.evaluations["episode_return"], 1).tolist(),
        "ajax_wall_s": round(time.perf_counter() - started, 1),
    }


def provenance(reference: str) -> dict:
    """The reference clone's commit, this repository's, and the date."""

    def head(*where: str) -> str:
        out = subprocess.run(["git", *where, "rev-parse", "--short", "HEAD"], capture_output=True)
        return out.stdout.decode().strip()

    return {
        "reference_commit": head("-C", reference),
        "commit": head(),
        "date": datetime.date.today().isoformat(),
    }


def plot(row: dict, path: Path, title: str) -> None:
    """Both sides' training returns: the IQM over seeds per window, with its 95% band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ajax.stats import iqm, iqm_interval

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for color, name, steps in (
        ("C0", "ajax", row["ajax_window_ends"]),
        ("C1", "reference", row["window_ends"]),
    ):
        returns = np.asarray(row[name], np.float64)
        low, high = iqm_interval(returns[:, None])
        ax.plot(steps, iqm(returns), color=color, lw=2, label=f"{name} ({len(returns)} seeds)")
        ax.fill_between(steps, low, high, color=color, alpha=0.2)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(f"training return (IQM, 95% interval; {row['window']:,}-step windows)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
