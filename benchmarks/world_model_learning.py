"""The world-model agents' learning runs, too slow for CI on 2 cores: each agent on its
documented task, budget and preset, several seeds in one vmapped run, evaluated along the
way. Writes one JSON line per run (the curve per seed, the final statistic against its bar,
wall and compile time, commit) to ``benchmarks/results/world_models.jsonl``.

    JAX_PLATFORMS=cpu python benchmarks/world_model_learning.py --agent TDMPC2
    JAX_PLATFORMS=cpu python benchmarks/world_model_learning.py --agent DreamerV3 \\
        --n-timesteps 20000   # a pilot

Bars (issue 42): TD-MPC2 at ``size="cpu"`` on Pendulum-v1, final mean at least -300 within
15k steps; DreamerV3 at ``size="1m"`` on CartPole-v1, ``train_ratio`` 32, mean of the last 3
evaluations at least 150 at 100k steps.
"""

from __future__ import annotations

import argparse
import datetime
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

HERE = Path(__file__).resolve().parent

#: agent -> (task, hyperparameters, steps, evaluation every, the bar, evaluations averaged)
RUNS = {
    "TDMPC2": ("Pendulum-v1", {"size": "cpu"}, 15_000, 1_000, -300.0, 1),
    "DreamerV3": ("CartPole-v1", {"size": "1m", "train_ratio": 32}, 100_000, 5_000, 150.0, 3),
}


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", choices=sorted(RUNS), required=True)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--n-timesteps", type=int, default=None)
    parser.add_argument("--out", default=str(HERE / "results" / "world_models.jsonl"))
    args = parser.parse_args()
    env_id, hyperparameters, steps, every, bar, last = RUNS[args.agent]
    steps = args.n_timesteps or steps
    agent = ajax.AGENTS[args.agent](env_id=env_id, **hyperparameters)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as log_dir:
        result = agent.train(
            seed=list(range(args.seeds)),
            n_timesteps=steps,
            logging_config=ajax.LoggingConfig(log_frequency=every, log_dir=log_dir),
            num_episode_test=5,
        )
    wall = time.perf_counter() - started
    returns = np.asarray(result.evaluations["episode_return"])
    final = float(returns[:, -last:].mean())
    emit(
        {
            "agent": args.agent,
            "env": env_id,
            "hyperparameters": agent.hyperparameters(),
            "seeds": args.seeds,
            "n_timesteps": steps,
            "timesteps": np.asarray(result.evaluations["timestep"]).tolist(),
            "returns": np.round(returns, 1).tolist(),
            "final": round(final, 1),
            "final_evaluations": last,
            "bar": bar,
            "reached": final >= bar,
            "wall_s": round(wall, 1),
            "compile_s": round(result.timings["compile_s"], 1),
            "commit": commit(),
            "date": datetime.date.today().isoformat(),
        },
        args.out,
    )


if __name__ == "__main__":
    sys.exit(main())
