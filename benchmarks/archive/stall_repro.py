"""Hang stress check: many logged multi-seed runs of PPO, DQN and SAC, counting the runs that
never finish.

A hang in XLA's CPU runtime shows up in a fraction of runs only (docs/performance.md, "Runs
that never hang"), so one run proves nothing and a count over many does. The runs cycle
through three workloads, each a logged run over 2 or 3 seeds with evaluation. They execute in
worker processes, one run after another; a worker reports each finished run on its standard
output. When a run reports nothing for ``--run-timeout`` seconds it is counted as a hang: the
native stacks of the worker's threads are taken with gdb (when installed) and kept under
``--stacks-dir``, the worker is killed, and a fresh worker carries on with the next run.

    JAX_PLATFORMS=cpu python benchmarks/archive/stall_repro.py [--runs 200] [--run-timeout 120]
        [--out benchmarks/archive/stall_results.jsonl]

``--mode bars`` runs instead the determinism check of the "Runs never hang" issue as many
times: PPO on CartPole over seeds [3, 7], logged, then seed 7 alone, then the pair again,
asserting that the pair's runs are identical and that seed 7 alone acts as it does in the
pair. Any mismatch ends the check with an error.

The compile cache is on (a private directory per invocation), so after each workload's first
run a run costs its tracing and execution, which is where a hang can strike.
"""

from __future__ import annotations

import argparse
import os
import platform
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Archived: records.py, which this script imports, is one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from records import emit

HERE = Path(__file__).resolve().parent

#: name -> (agent, env id, agent kwargs, seeds, n_timesteps, log_frequency)
WORKLOADS = {
    "PPO": ("PPO", "CartPole-v1", {"n_envs": 4}, [3, 7], 20_480, 10_240),
    "DQN": (
        "DQN",
        "CartPole-v1",
        {"learning_starts": 500, "buffer_size": 10_000},
        [0, 1, 2],
        4_096,
        2_048,
    ),
    "SAC": (
        "SAC",
        "Pendulum-v1",
        {"learning_starts": 256, "buffer_size": 10_000, "hidden_sizes": (64, 64)},
        [0, 1],
        1_024,
        512,
    ),
}


def _train(name: str, log_dir: str, seed=None):
    import ajax

    agent_name, env_id, kwargs, seeds, n_timesteps, log_frequency = WORKLOADS[name]
    kwargs = dict(kwargs)
    n_envs = kwargs.pop("n_envs", None)
    agent = ajax.AGENTS[agent_name](env_id=env_id, n_envs=n_envs, **kwargs)
    return agent.train(
        seed=seeds if seed is None else seed,
        n_timesteps=n_timesteps,
        logging_config=ajax.LoggingConfig(log_frequency=log_frequency, log_dir=log_dir),
    )


def _check_bars(log_dir: str) -> None:
    import jax
    import numpy as np

    pair = _train("PPO", log_dir)
    alone = _train("PPO", log_dir, seed=7)
    again = _train("PPO", log_dir)
    np.testing.assert_array_equal(
        pair.evaluations["episode_return"], again.evaluations["episode_return"]
    )
    for a, b in zip(jax.tree.leaves(pair.state), jax.tree.leaves(again.state), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(
        pair.evaluations["episode_return"][1], alone.evaluations["episode_return"][0]
    )
    for key in ("train/episode_return", "train/episode_length"):
        np.testing.assert_array_equal(pair.train_metrics[key][1], alone.train_metrics[key][0])


def worker(mode: str, first: int, last: int) -> None:
    """Run runs ``first`` .. ``last - 1``, printing ``done <index> <seconds>`` after each."""
    names = list(WORKLOADS)
    with tempfile.TemporaryDirectory() as log_dir:
        for index in range(first, last):
            start = time.perf_counter()
            if mode == "bars":
                _check_bars(log_dir)
            else:
                _train(names[index % len(names)], log_dir)
            print(f"done {index} {time.perf_counter() - start:.2f}", flush=True)


def _native_stacks(pid: int) -> str:
    if shutil.which("gdb") is None:
        return "gdb is not installed: no native stacks"
    taken = subprocess.run(
        ["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return taken.stdout + taken.stderr


def supervise(args: argparse.Namespace) -> dict:
    """Run ``args.runs`` runs in workers, replacing a worker whenever one hangs."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["AJAX_JAX_COMPILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="ajax-stall-cache-")
    stacks_dir = Path(args.stacks_dir)
    hangs: list[dict] = []
    durations: list[float] = []
    next_run, start = 0, time.perf_counter()
    while next_run < args.runs:
        command = [sys.executable, __file__, "--worker", args.mode, str(next_run), str(args.runs)]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, env=env, text=True)
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        # The first run of a worker also imports and compiles: give it extra time.
        deadline = time.monotonic() + args.run_timeout + 120
        while True:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                stacks = _native_stacks(proc.pid)
                stacks_dir.mkdir(parents=True, exist_ok=True)
                path = stacks_dir / f"{args.mode}_run{next_run}_{int(time.time())}.txt"
                path.write_text(stacks)
                hangs.append({"run": next_run, "mode": args.mode, "stacks": str(path)})
                print(f"run {next_run} hung; native stacks in {path}", flush=True)
                proc.kill()
                proc.wait()
                next_run += 1
                break
            line = proc.stdout.readline()
            if not line:  # the worker ended: all its runs are done, or it crashed
                if proc.wait() != 0:
                    raise SystemExit(f"worker failed at run {next_run} (exit {proc.returncode})")
                next_run = args.runs
                break
            _, index, seconds = line.split()
            durations.append(float(seconds))
            next_run = int(index) + 1
            if next_run % 20 == 0:
                print(f"{next_run} runs, {len(hangs)} hangs", flush=True)
            deadline = time.monotonic() + args.run_timeout
        selector.close()
    return {
        "mode": args.mode,
        "runs": args.runs,
        "hangs": len(hangs),
        "hang_runs": [h["run"] for h in hangs],
        "median_run_s": sorted(durations)[len(durations) // 2] if durations else None,
        "wall_s": round(time.perf_counter() - start, 1),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "machine": platform.node(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--mode", choices=("stress", "bars"), default="stress")
    parser.add_argument("--run-timeout", type=float, default=120.0)
    parser.add_argument("--stacks-dir", default=str(HERE.parent / "hang_stacks"))
    parser.add_argument("--out", default=None, help="append the summary to this JSON-lines file")
    parser.add_argument("--label", default="", help="a note stored with the summary")
    parser.add_argument("--worker", nargs=3, metavar=("MODE", "FIRST", "LAST"))
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], int(args.worker[1]), int(args.worker[2]))
        return
    summary = supervise(args) | {"label": args.label}
    emit(summary, args.out)


if __name__ == "__main__":
    main()
