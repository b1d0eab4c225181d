"""What a relaunch costs: the same script run in a cold process (empty caches), then again
in fresh processes, reading each run's compile-and-warm-up time (``timings["compile_s"]``)
and the process's wall time.

The script is PPO on CartPole-v1 with its defaults, one seed, 100k steps, no logging.
Revisions are checked out into temporary worktrees (as ``ab.py`` does) and take turns, round
by round, each round with an empty cache directory per revision; ``.`` is the working tree.

    JAX_PLATFORMS=cpu python benchmarks/relaunch_bench.py [REV ...] --rounds 3 \\
        [--out benchmarks/results/relaunch.jsonl]

Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from ab import ROOT, worktree
from records import emit

SCRIPT = (
    "import json, ajax\n"
    "result = ajax.PPO(env_id='CartPole-v1').train(seed=0, n_timesteps=100_000)\n"
    "print(json.dumps(result.timings))\n"
)
RELAUNCHES = 2


def launch(tree: Path, cache: Path) -> dict[str, float]:
    env = dict(
        os.environ,
        PYTHONPATH=str(tree / "src"),
        JAX_PLATFORMS="cpu",
        AJAX_JAX_COMPILE_CACHE_DIR=str(cache),
    )
    env.pop("AJAX_NO_COMPILE_CACHE", None)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    timings = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"compile_s": timings["compile_s"], "process_s": time.perf_counter() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revs", nargs="*", default=["."])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None, help="JSON-lines file to append the rows to")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {
            rev: ROOT if rev == "." else worktree(rev, Path(tmp) / "trees") for rev in args.revs
        }
        runs: dict[str, dict[str, list[float]]] = {
            rev: {"cold": [], "relaunch": [], "cold_process": [], "relaunch_process": []}
            for rev in args.revs
        }
        try:
            for round_ in range(args.rounds):
                for rev, tree in trees.items():
                    cache = Path(tmp) / f"cache-{round_}-{rev.replace('/', '_')}"
                    cold = launch(tree, cache)
                    runs[rev]["cold"].append(cold["compile_s"])
                    runs[rev]["cold_process"].append(cold["process_s"])
                    for _ in range(RELAUNCHES):
                        again = launch(tree, cache)
                        runs[rev]["relaunch"].append(again["compile_s"])
                        runs[rev]["relaunch_process"].append(again["process_s"])
        finally:
            for tree in trees.values():
                if tree != ROOT:
                    subprocess.run(
                        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                        check=False,
                    )
    date = datetime.now(UTC).date().isoformat()
    for rev, figures in runs.items():
        emit(
            {
                "rev": rev,
                "date": date,
                "script": "PPO CartPole-v1, 1 seed, 100k steps",
                **{f"{k}_median_s": round(statistics.median(v), 3) for k, v in figures.items()},
                **{f"{k}_s": [round(x, 3) for x in v] for k, v in figures.items()},
            },
            args.out,
        )


if __name__ == "__main__":
    main()
