"""Threefry rolled (JAX's CPU lowering) against unrolled (``ajax._xla.unrolled_threefry``):
each agent's two programs lowered and compiled both ways in one process, then executed once
over the whole budget, the order alternating round by round.

    JAX_PLATFORMS=cpu python benchmarks/threefry_ab.py --seeds 8 [--agents PPO DQN]
        [--rounds 2] [--out benchmarks/threefry_ab.jsonl]

The settings are the goals' against rejax (``agent_bench.py --goals``): 4 copies per seed,
rejax's networks and schedule where they differ from Ajax's defaults, rejax's default
replay buffer, the replay agents learning from step 1,000, PPO and PQN 100k steps per seed,
DQN, SAC and TD3 10k. The compile cache is off. Figures per side: lowering (tracing and
exporting both programs), the XLA compile of each, and the segment's execution.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from datetime import UTC, datetime
from unittest import mock

os.environ["AJAX_NO_COMPILE_CACHE"] = "1"

import jax
import jax.numpy as jnp
from agent_bench import goal_agent, goal_parser, lower_goal_run
from records import emit

from ajax._xla import compiler_options
from ajax.run import lowering

#: Ajax lowers its segment unrolled; the rolled side swaps that block for a no-op.
SIDES = {
    "rolled": lambda: mock.patch.object(lowering, "unrolled_threefry", contextlib.nullcontext),
    "unrolled": contextlib.nullcontext,
}


def trial(name: str, side: str, n_seeds: int) -> dict[str, float]:
    agent = goal_agent(name)
    start = time.perf_counter()
    with SIDES[side]():
        plan, programs = lower_goal_run(name, agent, n_seeds)
    lower_s = time.perf_counter() - start
    start = time.perf_counter()
    init = programs.init.compile(compiler_options(agent, runs_once=True))
    init_compile_s = time.perf_counter() - start
    start = time.perf_counter()
    segment = programs.segment.compile(compiler_options(agent))
    segment_compile_s = time.perf_counter() - start
    state = jax.block_until_ready(init(programs.seeds))
    start = time.perf_counter()
    args = (programs.health, programs.seeds, jnp.int32(0), jnp.int32(plan.n_iterations))
    jax.block_until_ready(segment(state, *args))
    execution_s = time.perf_counter() - start
    return {
        "lower_s": lower_s,
        "init_compile_s": init_compile_s,
        "segment_compile_s": segment_compile_s,
        "execution_s": execution_s,
    }


def main() -> None:
    parser = goal_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for name in args.agents:
        rows: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
        for round_ in range(args.rounds):
            for side in list(SIDES)[:: 1 if round_ % 2 == 0 else -1]:
                rows[side].append(trial(name, side, args.seeds))
        medians = {
            side: {k: statistics.median(r[k] for r in trials) for k in trials[0]}
            for side, trials in rows.items()
        }
        emit(
            {
                "date": datetime.now(UTC).strftime("%Y-%m-%d"),
                "agent": name,
                "seeds": args.seeds,
                "rounds": args.rounds,
                "jax": jax.__version__,
                **{f"{side}_{k}": v for side, m in medians.items() for k, v in m.items()},
                "trials": rows,
            },
            args.out,
        )


if __name__ == "__main__":
    main()
