"""How often a run's work moves between the threads of XLA's CPU pool: each agent's segment at
the goals' settings, run over its whole goal budget from a fresh state, with the voluntary
context switches of the pool's threads counted during the timed calls (Linux only: read
from ``/proc/self/task``).

    JAX_PLATFORMS=cpu python benchmarks/archive/thread_hops.py [--agents PPO PQN] [--seeds 1]
        [--calls 5] [--out benchmarks/archive/thread_hops.jsonl]

XLA's CPU runtime hands half of the kernels that are ready at the same moment to another
pool thread once more than eight are ready. On a small machine each hand-over wakes a thread
on another core, tens of microseconds, so a loop body that ends or starts with many
independent kernels (one per parameter leaf, say) hops cores on every pass. A count near the
number of minibatch or gradient steps per iteration points at such a body;
docs/developer-performance.md, "Kernels ready at once", shows how the graph is read to find
it. The compile cache is off.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

# Archived: records.py and agent_bench.py, which this script imports, are one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ["AJAX_NO_COMPILE_CACHE"] = "1"

import jax
from agent_bench import goal_agent, goal_parser, lower_goal_run, timed_segment_call
from records import emit

import ajax
from ajax._xla import compiler_options

#: The name XLA gives its CPU pool's threads (``tf_XLAEigen``).
POOL_THREAD = "XLAEigen"


def pool_switches() -> int:
    """The voluntary context switches of the pool's threads so far."""
    total = 0
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        if POOL_THREAD not in (task / "comm").read_text():
            continue
        for line in (task / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                total += int(line.split(":")[1])
    return total


def ajax_commit() -> str:
    """The commit of the checkout the imported ``ajax`` comes from."""
    where = Path(ajax.__file__).parent
    found = subprocess.run(
        ["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return found.stdout.strip() or "unknown"


def measure(name: str, n_seeds: int, calls: int) -> dict:
    agent = goal_agent(name)
    plan, programs = lower_goal_run(name, agent, n_seeds)
    init = programs.init.compile(compiler_options(agent, runs_once=True))
    segment = programs.segment.compile(compiler_options(agent))
    iterations = plan.n_iterations

    def call() -> float:
        return timed_segment_call(init, segment, programs, iterations)[0]

    call()
    before = pool_switches()
    seconds = [call() for _ in range(calls)]
    switches = pool_switches() - before
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "agent": name,
        "commit": ajax_commit(),
        "seeds": n_seeds,
        "devices": jax.device_count(),
        "iterations_per_call": iterations,
        "calls": calls,
        "median_ms_per_iteration": statistics.median(seconds) / iterations * 1e3,
        "pool_switches_per_iteration": switches / (calls * iterations),
        "jax": jax.__version__,
    }


def main() -> None:
    parser = goal_parser(__doc__)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    for name in args.agents:
        emit(measure(name, args.seeds, args.calls), args.out)


if __name__ == "__main__":
    main()
