"""A/B of two commits on agent_bench.py, trials alternating, on a noisy machine.

A speed figure from another moment of a shared or throttled machine is no comparison: the
machine's own drift can exceed the change being measured. This script checks both commits out
into temporary worktrees and runs one agent_bench trial of each in turn, ``--rounds`` times
(A, B, A, B, ...), each in a fresh process importing that commit's ``ajax``. It prints every
trial and, per agent, the medians and B's change over A in execution steps/s, whole-run
steps/s and compile time.

    JAX_PLATFORMS=cpu python benchmarks/ab.py REV_A REV_B [--agents PPO DQN] [--rounds 4]
        [--log-frequency 2000] [--n-timesteps 20000] [--set learning_starts=10_000]
        [--seeds 8] [--process-per-agent] [--out benchmarks/results/ab.jsonl]

By default one process runs every agent of a trial, so only the first agent's compile pays
what a fresh process pays once (JAX's first lowering, the eager operations' programs);
``--process-per-agent`` gives each agent a process of its own, so that every compile time is
a fresh process's, as a user's ``ajax train`` is.

Nothing else should run on the machine meanwhile. The bench script itself is taken from the
working tree, so both commits are timed under the same protocol.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from records import emit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
METRICS = ("execution_sps", "whole_run_sps", "compile_s")


def worktree(rev: str, into: Path) -> Path:
    path = into / rev.replace("/", "_")
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
        check=True,
        capture_output=True,
    )
    return path


def trial(tree: Path, agents: list[str], out: Path, extra: list[str]) -> dict[str, dict]:
    """One trial of each agent with ``tree``'s ajax; agent -> figures."""
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), JAX_PLATFORMS="cpu")
    command = [sys.executable, str(HERE / "agent_bench.py"), "--agents", *agents]
    command += ["--trials", "1", "--out", str(out), "--baseline", str(out.with_suffix(".none"))]
    command += extra
    subprocess.run(command, check=True, env=env, capture_output=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    return {r["agent"]: r for r in rows if r["implementation"] == "ajax"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev_a")
    parser.add_argument("rev_b")
    parser.add_argument("--agents", nargs="+", default=["PPO", "DQN"])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None, help="append the summary (JSON lines)")
    parser.add_argument(
        "--log-frequency", type=int, default=None, help="passed on to agent_bench.py"
    )
    parser.add_argument("--n-timesteps", type=int, default=None, help="passed on to agent_bench.py")
    parser.add_argument("--set", nargs="+", default=[], help="passed on to agent_bench.py")
    parser.add_argument("--seeds", type=int, default=None, help="passed on to agent_bench.py")
    parser.add_argument("--process-per-agent", action="store_true")
    args = parser.parse_args()
    groups = [[a] for a in args.agents] if args.process_per_agent else [args.agents]
    extra = [] if args.log_frequency is None else ["--log-frequency", str(args.log_frequency)]
    extra += [] if args.n_timesteps is None else ["--n-timesteps", str(args.n_timesteps)]
    extra += ["--set", *args.set] if args.set else []
    extra += [] if args.seeds is None else ["--seeds", str(args.seeds)]
    with tempfile.TemporaryDirectory() as tmp:
        trees = {rev: worktree(rev, Path(tmp)) for rev in (args.rev_a, args.rev_b)}
        figures: dict[str, dict[str, list[dict]]] = {rev: {} for rev in trees}
        try:
            for round_ in range(args.rounds):
                for rev, tree in trees.items():
                    rows = {}
                    for group in groups:
                        rows |= trial(tree, group, Path(tmp) / "trial.jsonl", extra)
                    for agent, row in rows.items():
                        figures[rev].setdefault(agent, []).append(row)
                        print(
                            f"round {round_ + 1} {rev:<12} {agent:<6} "
                            + " ".join(f"{m}={row[m]:,.2f}" for m in METRICS),
                            flush=True,
                        )
        finally:
            for tree in trees.values():
                subprocess.run(
                    ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                    capture_output=True,
                )
    for agent in args.agents:
        medians = {
            rev: {m: statistics.median(r[m] for r in figures[rev][agent]) for m in METRICS}
            for rev in trees
        }
        a, b = medians[args.rev_a], medians[args.rev_b]
        summary = {"agent": agent, "a": args.rev_a, "b": args.rev_b, "rounds": args.rounds}
        summary["log_frequency"] = args.log_frequency
        summary["process_per_agent"] = args.process_per_agent
        summary |= {"n_timesteps": args.n_timesteps, "set": args.set, "seeds": args.seeds}
        summary |= {f"a_{m}": a[m] for m in METRICS} | {f"b_{m}": b[m] for m in METRICS}
        summary |= {f"change_{m}": b[m] / a[m] - 1 for m in METRICS}
        emit(summary, args.out)


if __name__ == "__main__":
    main()
