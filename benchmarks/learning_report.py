"""Every agent's learning, reported as RL papers report it: each agent on its documented task
and budget (those of its learning test or benchmark) with 10 seeds in one vmapped run, the
interquartile mean of the final evaluations with its 95% stratified-bootstrap interval
(Agarwal et al. 2021), and the same along the curve.

Writes one JSON line per run to ``benchmarks/results/learning.jsonl`` and one PNG per run,
the IQM curve with its band, to ``docs/agents/learning/``, where the agent pages show it; rows
written elsewhere (``--out``) get their figures beside them, unless ``--plots`` says.
Hours on 2 cores: run it in the background, one agent at a time if need be. With
``--run-dir`` a run checkpoints at every evaluation and a killed report, started again with
the same arguments, continues it exactly: a world model's run can span several sessions.

    JAX_PLATFORMS=cpu python benchmarks/learning_report.py [--agents PPO SAC] [--seeds 10]
    JAX_PLATFORMS=cpu python benchmarks/learning_report.py --agents PPO DQN --seeds 3 \\
        --n-timesteps 4096 --out /tmp/l.jsonl --plots /tmp/plots   # the pipeline, small
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
from records import emit

import ajax
from ajax.checkpoint import latest_checkpoint
from ajax.stats import iqm, iqm_interval

HERE = Path(__file__).resolve().parent
#: The committed table of rows, and the agent pages' figures of its runs.
TABLE = HERE / "results" / "learning.jsonl"
PAGES_FIGURES = HERE.parent / "docs" / "agents" / "learning"


def figures_for(out: str | Path) -> Path:
    """Where a report's figures go unless ``--plots`` says: the agent pages' folder for rows
    of the committed table, and beside any other ``--out`` (``/tmp/l.jsonl``: ``/tmp/l_plots``),
    so that a check's run does not replace the figure of the row the pages quote."""
    out = Path(out)
    if out.resolve() == TABLE:
        return PAGES_FIGURES
    return out.with_name(f"{out.stem}_plots")


#: target_gym/Plane with 200-step episodes, the continuous agents' second task. Its
#: observations (altitudes in metres, airspeeds) are far from unit scale: the off-policy
#: agents normalise them, as PPO's CleanRL settings do.
PLANE = {"env_params": {"max_steps_in_episode": 200}}
OFF_POLICY_PLANE = PLANE | {"normalize_observations": True, "learning_starts": 1_000}

#: A run: task, hyperparameters, steps, evaluation every, evaluation episodes. The agent
#: pages name these budgets; the first task of each agent is its learning test's.
RUNS: dict[str, list[tuple[str, dict, int, int, int]]] = {
    "PPO": [
        ("CartPole-v1", {"n_envs": 4}, 200_000, 20_000, 10),
        ("Acrobot-v1", {"n_envs": 4}, 200_000, 20_000, 10),
        # The learning test's continuous task: CleanRL's continuous-control settings.
        (
            "target_gym/Plane",
            PLANE
            | {
                "n_envs": 8,
                "n_steps": 256,
                "n_epochs": 10,
                "n_minibatches": 32,
                "learning_rate": 3e-4,
                "ent_coef": 0.0,
                "normalize_observations": True,
                "normalize_rewards": True,
            },
            100_000,
            10_000,
            4,
        ),
    ],
    "DQN": [("CartPole-v1", {}, 100_000, 5_000, 10), ("Acrobot-v1", {}, 100_000, 5_000, 10)],
    "PQN": [("CartPole-v1", {}, 500_000, 50_000, 10), ("Acrobot-v1", {}, 500_000, 50_000, 10)],
    "SAC": [
        (
            "Pendulum-v1",
            {
                "learning_rate": 1e-3,
                "hidden_sizes": (64, 64),
                "learning_starts": 1_000,
                "buffer_size": 8_000,
            },
            8_000,
            2_000,
            10,
        ),
        ("target_gym/Plane", OFF_POLICY_PLANE, 50_000, 5_000, 4),
    ],
    "TD3": [
        (
            "Pendulum-v1",
            {
                "learning_rate": 1e-3,
                "gamma": 0.98,
                "hidden_sizes": (64, 64),
                "learning_starts": 1_000,
                "buffer_size": 10_000,
            },
            10_000,
            2_500,
            10,
        ),
        ("target_gym/Plane", OFF_POLICY_PLANE, 50_000, 5_000, 4),
    ],
    "REDQ": [
        (
            "Pendulum-v1",
            {
                "hidden_sizes": (32, 32),
                "batch_size": 64,
                "learning_starts": 500,
                "buffer_size": 2_500,
            },
            2_500,
            625,
            10,
        )
    ],
    "ASAC": [
        ("Pendulum-v1", {"learning_starts": 1_000, "hidden_sizes": (64, 64)}, 20_000, 2_000, 10)
    ],
    "APO": [("Pendulum-v1", {}, 300_000, 100_000, 10)],
    "AVG": [
        ("Pendulum-v1", {"gamma": 0.9}, 100_000, 10_000, 10),
        ("target_gym/Plane", PLANE, 100_000, 10_000, 4),
    ],
    "APG": [("ajax/PendulumTracking-v0", {}, 200_000, 50_000, 20)],
    "UDRL": [("CartPole-v1", {}, 200_000, 25_000, 10)],
    "TDMPC2": [("Pendulum-v1", {"size": "cpu"}, 15_000, 1_000, 5)],
    "DreamerV3": [("CartPole-v1", {"size": "1m", "train_ratio": 32}, 100_000, 5_000, 5)],
}
#: Seeds per run: 10, and 5 for the world models, whose runs take hours each here.
SEEDS = {"TDMPC2": 5, "DreamerV3": 5}


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def plot(row: dict, path: Path) -> None:
    """The IQM over seeds along the curve, with its band, and each seed as a thin line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, returns = np.asarray(row["timesteps"]), np.asarray(row["returns"])
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for curve in returns:
        ax.plot(steps, curve, lw=0.6, alpha=0.3, color="C0")
    ax.plot(steps, row["curve_iqm"], lw=2.2, color="C0", label=f"IQM of {row['seeds']} seeds")
    ax.fill_between(steps, *row["curve_interval"], color="C0", alpha=0.2, label="95% interval")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("evaluation return")
    ax.set_title(f"{row['agent']} on {row['env']} ({row['commit']})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


#: The commit the report runs, read once at the start: the code is imported then, whatever
#: is committed while it runs.
COMMIT = commit()


def report(
    name: str,
    run: tuple,
    seeds: int,
    steps: int | None,
    out: str,
    plots: Path,
    run_dir: Path | None = None,
) -> None:
    env_id, settings, n_timesteps, every, episodes = run
    if steps is not None:
        n_timesteps, every = steps, max(steps // 4, 1)
    agent = ajax.AGENTS[name](env_id=env_id, **settings)
    with tempfile.TemporaryDirectory() as scratch:
        logging = ajax.LoggingConfig(
            log_frequency=every,
            log_dir=scratch if run_dir is None else run_dir,
            run_name=f"{name}_{env_id.replace('/', '-')}",
        )
        result, ledger = resumable(
            agent, seeds, n_timesteps, episodes, logging, run_dir is not None
        )
    returns = np.asarray(result.evaluations["episode_return"], np.float64)
    low, high = iqm_interval(returns[:, -1])
    curve_low, curve_high = iqm_interval(returns[:, None])
    row = {
        "agent": name,
        "env": env_id,
        "hyperparameters": agent.hyperparameters(),
        "n_envs": agent.n_envs,
        "seeds": seeds,
        "n_timesteps": result.n_timesteps,
        "evaluation_episodes": episodes,
        "timesteps": np.asarray(result.evaluations["timestep"]).tolist(),
        "returns": np.round(returns, 2).tolist(),
        "final_iqm": round(float(iqm(returns[:, -1])), 2),
        "final_interval": [round(float(low), 2), round(float(high), 2)],
        "final_mean": round(float(returns[:, -1].mean()), 2),
        "curve_iqm": np.round(iqm(returns), 2).tolist(),
        "curve_interval": [np.round(curve_low, 2).tolist(), np.round(curve_high, 2).tolist()],
        "diverged": result.diverged,
        "wall_s": round(ledger["wall_s"], 1),
        "compile_s": round(result.timings["compile_s"], 1),
        "commit": ledger["commits"][0],
        "date": datetime.date.today().isoformat(),
    }
    if len(ledger["commits"]) > 1:
        row["resumed_at"] = ledger["commits"][1:]
    plots.mkdir(parents=True, exist_ok=True)
    plot(row, plots / f"{name}_{env_id.replace('/', '_')}.png")
    emit(row, out)


def resumable(
    agent: object,
    seeds: int,
    n_timesteps: int,
    episodes: int,
    logging: ajax.LoggingConfig,
    checkpointed: bool,
) -> tuple[ajax.TrainResult, dict]:
    """Train, ``checkpointed`` at every evaluation, or continue from the latest checkpoint
    that a killed report left in the run's directory. Also returns the run's ledger, kept
    beside its logs: the commit of each part and the wall time summed over them, written
    after every segment so that a kill loses at most one segment's time."""
    directory = Path(logging.log_dir) / logging.run_name
    path = directory / "report_ledger.json"
    ledger = json.loads(path.read_text()) if path.exists() else {"commits": [], "wall_s": 0.0}
    ledger["commits"].append(COMMIT)
    spent, started = ledger["wall_s"], time.perf_counter()

    def record(*_: object) -> None:
        ledger["wall_s"] = spent + time.perf_counter() - started
        path.write_text(json.dumps(ledger))

    if checkpointed and has_checkpoint(directory):
        result = ajax.resume(directory, agent=agent, progress=record)
    else:
        # A report killed before its first checkpoint starts again in its directory (its
        # ledger keeps the time spent); the run it left has nothing to continue.
        (directory / "config.json").unlink(missing_ok=True)
        result = agent.train(
            seed=list(range(seeds)),
            n_timesteps=n_timesteps,
            num_episode_test=episodes,
            logging_config=logging,
            checkpoint=ajax.CheckpointConfig(every=1, keep=1) if checkpointed else None,
            progress=record,
        )
    record()
    return result, ledger


def has_checkpoint(directory: Path) -> bool:
    """Whether a run directory holds a complete checkpoint: none in a first part, or in one
    killed before its first evaluation."""
    try:
        latest_checkpoint(directory)
    except FileNotFoundError:
        return False
    return True


def newest_rows(path: str | Path) -> dict[tuple[str, str], dict]:
    """The newest row of each agent and task in ``path``, in the order they first appear."""
    import json

    newest: dict[tuple[str, str], dict] = {}
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        newest[(row["agent"], row["env"])] = row
    return newest


def table(path: str) -> str:
    """The newest row of each agent and task in ``path`` as a Markdown table: the table the
    agent pages and the report's summary show."""
    newest = newest_rows(path)
    lines = [
        "| agent | task | budget (steps) | seeds | final IQM [95% interval] | wall time | "
        "commit, date |",
        "| --- | --- | ---: | ---: | --- | ---: | --- |",
    ]
    for (agent, env), row in newest.items():
        low, high = row["final_interval"]
        lines.append(
            f"| {agent} | {env} | {row['n_timesteps']:,} | {row['seeds']} | "
            f"{row['final_iqm']:.1f} [{low:.1f}, {high:.1f}] | {row['wall_s']:.0f} s | "
            f"{row['commit']}, {row['date']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument(
        "--seeds", type=int, default=None, help="seeds per run (10; 5 for world models)"
    )
    parser.add_argument("--n-timesteps", type=int, default=None, help="steps per run, for a trial")
    parser.add_argument("--first-task-only", action="store_true", help="skip the second tasks")
    parser.add_argument("--out", default=str(TABLE))
    parser.add_argument(
        "--plots",
        type=Path,
        default=None,
        help="folder of the figures: docs/agents/learning for the committed table's rows, "
        "else beside --out",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="keep each run's logs and checkpoints here, and continue a killed run found there",
    )
    parser.add_argument(
        "--table", action="store_true", help="print the newest rows of --out as Markdown, and stop"
    )
    args = parser.parse_args()
    if args.table:
        print(table(args.out))
        return
    for name in args.agents:
        for run in RUNS[name][: 1 if args.first_task_only else None]:
            seeds = args.seeds or SEEDS.get(name, 10)
            plots = args.plots or figures_for(args.out)
            report(name, run, seeds, args.n_timesteps, args.out, plots, args.run_dir)


if __name__ == "__main__":
    sys.exit(main())
