"""What checkpoints cost: a 1M-step PPO run on CartPole-v1 (its defaults, one seed) with an
evaluation every 10k steps, with and without a checkpoint every 10 segments, trials
alternating in one process. Reports the run's execution time each way, the overhead, and
the time each save holds the run (copying the state to host memory and handing it to
Orbax) and the time to finish the last save at the end.

    JAX_PLATFORMS=cpu python benchmarks/checkpoint_bench.py --trials 3 \\
        [--out benchmarks/results/checkpoint.jsonl]

Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime

import jax
from records import emit

import ajax
from ajax import checkpoint

N_TIMESTEPS, LOG_FREQUENCY, EVERY = 1_000_000, 10_000, 10


def timed_saves() -> tuple[list[float], list[float]]:
    """Wraps the checkpointer's ``save`` and ``close`` to record how long each holds the
    run."""
    saves: list[float] = []
    closes: list[float] = []
    for name, times in (("save", saves), ("close", closes)):
        original = getattr(checkpoint.Checkpointer, name)

        def wrapper(self, *args, _original=original, _times=times):
            started = time.perf_counter()
            _original(self, *args)
            _times.append(time.perf_counter() - started)

        setattr(checkpoint.Checkpointer, name, wrapper)
    return saves, closes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--out", default=None, help="JSON-lines file to append the row to")
    args = parser.parse_args()
    agent = ajax.PPO(env_id="CartPole-v1")
    saves, closes = timed_saves()
    runs: dict[str, list[float]] = {"off": [], "on": []}
    n_checkpoints = 0
    for trial in range(args.trials + 1):  # the first round compiles, and is not counted
        for side in ("off", "on"):
            with tempfile.TemporaryDirectory() as root:
                logging_config = ajax.LoggingConfig(log_frequency=LOG_FREQUENCY, log_dir=root)
                config = ajax.CheckpointConfig(every=EVERY) if side == "on" else None
                before = len(saves)
                result = agent.train(
                    seed=0,
                    n_timesteps=N_TIMESTEPS,
                    logging_config=logging_config,
                    checkpoint=config,
                )
                if trial:
                    runs[side].append(result.timings["run_s"])
                    n_checkpoints = len(saves) - before
                print(side, trial, f"{result.timings['run_s']:.2f} s", flush=True)
    off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
    state_bytes = sum(x.nbytes for x in jax.tree.leaves(result.state))
    emit(
        {
            "benchmark": "checkpoint_overhead",
            "agent": "PPO",
            "task": "CartPole-v1",
            "n_timesteps": N_TIMESTEPS,
            "log_frequency": LOG_FREQUENCY,
            "checkpoint_every_segments": EVERY,
            "checkpoints_per_run": n_checkpoints,
            "state_bytes": state_bytes,
            "run_s_without": round(off, 3),
            "run_s_with": round(on, 3),
            "overhead": round(on / off - 1, 4),
            "save_call_s_median": round(statistics.median(saves), 4),
            "final_wait_s_median": round(statistics.median(closes), 4),
            "trials": args.trials,
            "date": datetime.now(UTC).date().isoformat(),
            "machine": platform.processor() or platform.machine(),
            "jax": jax.__version__,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
