"""A hyperparameter grid as one batched run (``train(..., sweep=...)``) against one run per
configuration, each side in a fresh process with the compile cache off: compile, execution
and wall time. Writes one JSON line per side to ``benchmarks/results/sweep.jsonl``.

    JAX_PLATFORMS=cpu python benchmarks/sweep_bench.py            # PPO, 16 configurations
    JAX_PLATFORMS=cpu python benchmarks/sweep_bench.py --agent SAC
    JAX_PLATFORMS=cpu python benchmarks/sweep_bench.py --agent TDMPC2
    JAX_PLATFORMS=cpu python benchmarks/sweep_bench.py --study    # ajax sweep, --batch 4 vs 1

PPO: 16 configurations (4 learning rates x 4 entropy coefficients) x 4 seeds on CartPole-v1,
100k steps each. SAC: 4 configurations (learning rates) x 4 seeds on Pendulum-v1, 3,000
steps (2,000 updates of its 256-unit networks: SAC's execution, not its compile, is the cost
on a CPU), learning from step 1,000, its default buffer of 10^6 per place (the memory check
counts every configuration's). TDMPC2: 4 configurations (learning rates) x 4 seeds on
Pendulum-v1 at its default size ("cpu"), 1,500 steps: the burst of 1,000 updates at step
1,000, then 500 steps of planning and an update each, so that its long compile shows beside
its execution. Goal (issue 45): the batched grid in at most a third of the separate
runs' wall time.

``--study``: an ``ajax sweep`` of 8 PPO CartPole trials (4 seeds, 100k steps, learning rate
and entropy weight searched), each worker a fresh process on a fresh SQLite study with the
caches off, asking 4 trials at a time (trained as grids) against one at a time.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from records import emit  # noqa: E402

GRIDS = {
    "PPO": (
        "CartPole-v1",
        {},
        {"learning_rate": [1e-4, 2.5e-4, 5e-4, 1e-3], "ent_coef": [0.0, 0.003, 0.01, 0.03]},
        100_000,
    ),
    "SAC": (
        "Pendulum-v1",
        {"learning_starts": 1_000},
        {"learning_rate": [1e-4, 3e-4, 1e-3, 3e-3]},
        3_000,
    ),
    "TDMPC2": (
        "Pendulum-v1",
        {"learning_starts": 1_000},
        {"learning_rate": [1e-4, 3e-4, 1e-3, 3e-3]},
        1_500,
    ),
}
SEEDS = [0, 1, 2, 3]

#: One side, run in a fresh process so that neither side finds the other's programs in
#: memory: its timings as one JSON line.
SIDE = """
import itertools, json, sys, time
started = time.perf_counter()
import ajax
agent_name, env_id, fixed, grid, steps, seeds, batched = json.loads(sys.argv[1])
cls = ajax.AGENTS[agent_name]
compile_s = run_s = 0.0
if batched:
    result = cls(env_id=env_id, **fixed).train(seed=seeds, n_timesteps=steps, sweep=grid)
    compile_s, run_s, runs = result.timings["compile_s"], result.timings["run_s"], 1
else:
    points = list(itertools.product(*grid.values()))
    for point in points:
        result = cls(env_id=env_id, **fixed, **dict(zip(grid, point))).train(
            seed=seeds, n_timesteps=steps)
        compile_s += result.timings["compile_s"]
        run_s += result.timings["run_s"]
    runs = len(points)
print(json.dumps({"compile_s": compile_s, "run_s": run_s, "wall_s": time.perf_counter() - started,
                  "runs": runs}))
"""


def side(agent: str, batched: bool) -> dict:
    env_id, fixed, grid, steps = GRIDS[agent]
    argument = json.dumps([agent, env_id, fixed, grid, steps, SEEDS, batched])
    env = os.environ | {"JAX_PLATFORMS": "cpu", "AJAX_NO_COMPILE_CACHE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", SIDE, argument], capture_output=True, text=True, env=env
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


STUDY_SPACE = {
    "learning_rate": {"low": 1e-4, "high": 3e-3, "log": True},
    "ent_coef": {"low": 0.0, "high": 0.02},
}


def study(batch: int, directory: Path) -> float:
    """Wall seconds of one ``ajax sweep`` worker running 8 trials, asking ``batch`` at once."""
    space = directory / "space.json"
    space.write_text(json.dumps(STUDY_SPACE))
    argv = ["sweep", "PPO", "--env", "CartPole-v1", "--space", str(space), "--n-trials", "8"]
    argv += ["--seeds", "4", "--n-timesteps", "100000", "--batch", str(batch)]
    argv += ["--storage", f"sqlite:///{directory / 'study.db'}", "--study", f"batch{batch}"]
    argv += ["--log-dir", str(directory / "runs")]
    env = os.environ | {"JAX_PLATFORMS": "cpu", "AJAX_NO_COMPILE_CACHE": "1"}
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "ajax.cli", *argv], capture_output=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stdout.decode()[-3000:])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", choices=sorted(GRIDS), default="PPO")
    parser.add_argument("--study", action="store_true", help="time ajax sweep's batching")
    parser.add_argument("--out", default=str(HERE / "results" / "sweep.jsonl"))
    args = parser.parse_args()
    env_id, _, grid, steps = GRIDS[args.agent]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if args.study:
        walls = {}
        for batch in (4, 1):
            with tempfile.TemporaryDirectory() as directory:
                walls[batch] = study(batch, Path(directory))
            row = {"agent": "PPO", "env": "CartPole-v1", "side": f"ajax sweep --batch {batch}"}
            row |= {"trials": 8, "seeds": 4, "n_timesteps": 100_000}
            row |= {"wall_s": round(walls[batch], 2), "commit": commit}
            emit(row | {"date": datetime.date.today().isoformat()}, args.out)
        print(f"--batch 4 / --batch 1 wall time: {walls[4] / walls[1]:.3f}")
        return
    rows = {}
    for batched in (True, False):
        started = time.perf_counter()
        timings = side(args.agent, batched)
        rows[batched] = {
            "agent": args.agent,
            "env": env_id,
            "grid": grid,
            "seeds": len(SEEDS),
            "n_timesteps": steps,
            "side": "batched" if batched else "separate",
            **{k: round(v, 2) if isinstance(v, float) else v for k, v in timings.items()},
            "process_s": round(time.perf_counter() - started, 2),
            "commit": commit,
            "date": datetime.date.today().isoformat(),
        }
        emit(rows[batched], args.out)
    ratio = rows[True]["wall_s"] / rows[False]["wall_s"]
    print(f"batched / separate wall time: {ratio:.3f} (goal <= 0.333)")


if __name__ == "__main__":
    sys.exit(main())
