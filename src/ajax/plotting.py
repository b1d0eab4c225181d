"""Learning-curve plots."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ajax._values import as_text

#: Matplotlib's default cycle, named so that runs past the tenth reuse it in order.
COLORS = [f"C{i}" for i in range(10)]


def plot_learning_curve(result, path: str | Path, title: str | None = None) -> Path:
    """Evaluation return against steps: the mean over seeds, and a band of one standard
    deviation; each seed as a thin line."""
    steps = result.evaluations["timestep"]
    returns = result.evaluations["episode_return"]
    if steps.size == 0:
        raise ValueError("the run has no evaluations to plot; train with a LoggingConfig.")
    mean, std = returns.mean(0), returns.std(0)
    fig, (ax,) = _figure()
    for seed, curve in zip(result.seeds, returns, strict=True):
        ax.plot(
            steps, curve, lw=0.7, alpha=0.35, label=f"seed {seed}" if len(returns) <= 8 else None
        )
    ax.plot(steps, mean, lw=2.2, color="C0", label=f"mean of {len(returns)} seeds")
    ax.fill_between(steps, mean - std, mean + std, color="C0", alpha=0.2, label="± 1 std")
    _label(ax, "evaluation return", title or f"{result.agent.name} on {result.agent.env_id}")
    return _save(fig, path)


def _figure(panels: int = 1):
    """A figure of ``panels`` plots, three to a row, and its axes in order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(panels, 3)
    rows = -(-panels // columns)
    width = 7 if panels == 1 else 5.2 * columns
    fig, axes = plt.subplots(rows, columns, figsize=(width, 4.2 * rows), dpi=110, squeeze=False)
    for ax in axes.ravel()[panels:]:
        ax.set_visible(False)
    return fig, axes.ravel()[:panels]


def _label(ax, ylabel: str, title: str) -> None:
    """Labels, grid and legend of a curve plot."""
    ax.set_xlabel("environment steps")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")


def _save(fig, path: str | Path) -> Path:
    """``fig`` written to ``path``, and closed."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def differing_settings(metas: list[dict[str, Any]]) -> list[str]:
    """A label for each saved run (see ``ajax.result.read_meta``): its agent, then what
    sets it apart from the other runs of that agent (environment, copies, hyperparameters),
    as ``name=value``."""
    labels = []
    for meta in metas:
        settings = _settings(meta)
        peers = [_settings(m) for m in metas if m["agent"] == meta["agent"]]
        differing = [
            f"{name}={as_text(value)}"
            for name, value in settings.items()
            if any(peer.get(name) != value for peer in peers)
        ]
        labels.append(" ".join([meta["agent"], *differing]))
    return labels


def _settings(meta: dict[str, Any]) -> dict[str, Any]:
    return {"env": meta["env_id"], "n_envs": meta["n_envs"]} | meta["hyperparameters"]


def runs_in(path: str | Path) -> list[dict[str, Any]]:
    """The runs ``path`` holds, each described as ``ajax.result.read_meta`` describes a saved
    one: its saved result; else, in a run directory that saved none (a run from Python, or a
    sweep's, one per configuration with its values among the hyperparameters), its
    ``config.json`` and the evaluations logged in its ``metrics.jsonl``."""
    from ajax.logging.sinks import read_rows
    from ajax.result import read_meta

    path = Path(path)
    try:
        return [read_meta(path)]
    except FileNotFoundError:
        if not (path / "config.json").is_file() or not (path / "metrics.jsonl").is_file():
            raise FileNotFoundError(
                f"{path} holds no run to plot: give a run directory (its config.json and "
                "metrics.jsonl) or a saved result."
            ) from None
    config = json.loads((path / "config.json").read_text())
    rows = [row for row in read_rows(path) if "episode_return" in row]
    seeds = config["seeds"]
    runs = []
    for c, values in enumerate(config.get("sweep", {}).get("configs", [{}])):
        returns = {
            (r["timestep"], r["seed"]): r["episode_return"] for r in rows if r.get("config", 0) == c
        }
        steps = sorted({t for t, _ in returns if all((t, s) in returns for s in seeds)})
        curves = [[returns[t, s] for t in steps] for s in seeds]
        runs.append(
            config
            | {
                "hyperparameters": config["hyperparameters"] | values,
                "evaluations": {"timestep": steps, "episode_return": curves},
            }
        )
    return runs


def panels(metas: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, Any], str]]]:
    """The runs of each environment, in order of first appearance, each with its legend
    label: its agent and what sets it apart from that environment's other runs, and its
    count of seeds. Returns on different tasks share no scale, so each task has a panel."""
    by_env: dict[str, list[dict[str, Any]]] = {}
    for meta in metas:
        by_env.setdefault(meta["env_id"], []).append(meta)
    out = {}
    for env_id, runs in by_env.items():
        labels = []
        for meta, label in zip(runs, differing_settings(runs), strict=True):
            seeds = len(meta["evaluations"]["episode_return"])
            labels.append((meta, f"{label} ({seeds} seed{'s' if seeds > 1 else ''})"))
        out[env_id] = labels
    return out


def plot_runs(paths: Sequence[str | Path], out: str | Path) -> Path:
    """Overlays the learning curves of runs (see :func:`runs_in`), a panel per environment:
    for each run, the interquartile mean over its seeds at each evaluation and its 95%
    stratified-bootstrap band, labelled as :func:`panels` labels it."""
    from ajax.stats import iqm, iqm_interval

    metas = []
    for path in paths:
        for meta in runs_in(path):
            if not meta["evaluations"]["timestep"]:
                raise ValueError(f"the run in {path} has no evaluations to plot.")
            metas.append(meta)
    by_env = panels(metas)
    fig, axes = _figure(len(by_env))
    for ax, (env_id, runs) in zip(axes, by_env.items(), strict=True):
        for color, (meta, label) in zip(itertools.cycle(COLORS), runs, strict=False):
            steps = np.asarray(meta["evaluations"]["timestep"])
            returns = np.asarray(meta["evaluations"]["episode_return"], np.float64)
            low, high = iqm_interval(returns[:, None])
            ax.plot(steps, iqm(returns), lw=2, color=color, label=label)
            ax.fill_between(steps, low, high, color=color, alpha=0.2)
        _label(ax, "evaluation return (IQM over seeds, 95% interval)", env_id)
    return _save(fig, out)
