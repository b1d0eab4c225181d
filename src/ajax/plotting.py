"""Learning-curve plots."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def plot_learning_curve(result, path: str | Path, title: str | None = None) -> Path:
    """Evaluation return against steps: the mean over seeds, and a band of one standard
    deviation; each seed as a thin line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = result.evaluations["timestep"]
    returns = result.evaluations["episode_return"]
    if steps.size == 0:
        raise ValueError("the run has no evaluations to plot; train with a LoggingConfig.")
    mean, std = returns.mean(0), returns.std(0)
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for seed, curve in zip(result.seeds, returns, strict=True):
        ax.plot(
            steps, curve, lw=0.7, alpha=0.35, label=f"seed {seed}" if len(returns) <= 8 else None
        )
    ax.plot(steps, mean, lw=2.2, color="C0", label=f"mean of {len(returns)} seeds")
    ax.fill_between(steps, mean - std, mean + std, color="C0", alpha=0.2, label="± 1 std")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("evaluation return")
    ax.set_title(title or f"{result.agent.name} on {result.agent.env_id}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path


def curve_summary(result) -> dict[str, float]:
    """Final and best mean evaluation return over seeds."""
    returns = result.evaluations["episode_return"]
    mean = returns.mean(0)
    return {"final": float(mean[-1]), "best": float(np.max(mean))}
