"""An XLA compile option A/B'd inside one process: each agent's segment program is lowered
once and compiled twice, with the agent's own options and with those plus the ones given,
then the two executables are called in turn, the order alternating call by call, each call
from the same freshly initialised state.

    JAX_PLATFORMS=cpu python benchmarks/xla_option_ab.py \\
        --option xla_disable_hlo_passes=tree_reduction_rewriter [--agents PPO PQN] \\
        [--seeds 1] [--iterations 100] [--calls 20] [--out benchmarks/xla_option_ab.jsonl]

One process sees one phase of this noisy machine on both sides, so a few percent shows
where alternating processes (``ab.py``) need many rounds. The settings are the goals'
against rejax (``agent_bench.goal_agent``); the compile cache is off. Each side reports its
compile time, the kernels in its compiled program (fusions, products and library calls, as
the program's text counts them) and its execution per iteration over the calls.
"""

from __future__ import annotations

import ast
import os
import re
import statistics
import time
from datetime import UTC, datetime

os.environ["AJAX_NO_COMPILE_CACHE"] = "1"

import jax
from agent_bench import goal_agent, goal_parser, lower_goal_run, timed_segment_call
from records import emit

from ajax._xla import compiler_options

#: An instruction XLA's CPU runtime launches on its own: a fusion, a product, a library call.
KERNEL = re.compile(r"= \S+ (fusion|dot|custom-call|convolution)\(")


def parse_option(text: str) -> tuple[str, object]:
    """``name=value``, the value read as a Python literal where it is one (``true`` and
    ``false`` as booleans), else kept as a string."""
    name, _, value = text.partition("=")
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return name, lowered == "true"
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def compare(name: str, extra: dict, n_seeds: int, iterations: int, calls: int) -> dict:
    agent = goal_agent(name)
    _, programs = lower_goal_run(name, agent, n_seeds)
    init = programs.init.compile(compiler_options(agent, runs_once=True))
    sides = {"default": compiler_options(agent) or {}}
    sides["option"] = sides["default"] | extra
    executables, figures = {}, {}
    for side, options in sides.items():
        start = time.perf_counter()
        executables[side] = programs.segment.compile(options)
        compile_s = time.perf_counter() - start
        kernels = len(KERNEL.findall(executables[side].as_text()))
        figures[side] = {"compile_s": compile_s, "kernels": kernels, "ms_per_iteration": []}
    for call in range(calls):
        for side in list(sides)[:: 1 if call % 2 == 0 else -1]:
            seconds, _ = timed_segment_call(init, executables[side], programs, iterations)
            figures[side]["ms_per_iteration"].append(seconds / iterations * 1e3)
    per_call = zip(*(figures[side]["ms_per_iteration"] for side in sides), strict=True)
    option_faster = sum(option < default for default, option in per_call)
    medians = {side: statistics.median(f["ms_per_iteration"]) for side, f in figures.items()}
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "agent": name,
        "seeds": n_seeds,
        "devices": jax.device_count(),
        "option": extra,
        "iterations_per_call": iterations,
        "calls": calls,
        **{f"{side}_median_ms": m for side, m in medians.items()},
        "option_over_default": medians["option"] / medians["default"],
        "option_faster_calls": option_faster,
        "jax": jax.__version__,
        "sides": figures,
    }


def main() -> None:
    parser = goal_parser(__doc__)
    parser.add_argument("--option", action="append", required=True, help="name=value")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    extra = dict(map(parse_option, args.option))
    for name in args.agents:
        emit(compare(name, extra, args.seeds, args.iterations, args.calls), args.out)


if __name__ == "__main__":
    main()
