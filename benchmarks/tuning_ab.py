"""One or more of Ajax's CPU choices (``ajax._xla.CHOICES``), or extra XLA compile options,
A/B'd inside one process: each agent's run is lowered and compiled with the variant (A) and
as Ajax runs now (B); then the two segments are called in turn over the whole budget, the
order alternating call by call, each call from the same freshly initialised state.

    JAX_PLATFORMS=cpu python benchmarks/tuning_ab.py --without weight_gradients \\
        [--agents PPO PQN] [--seeds 1] [--defaults --n-timesteps 8000] [--calls 8] \\
        [--compiles 1] [--out benchmarks/results/tuning_ab.jsonl]
    JAX_PLATFORMS=cpu python benchmarks/tuning_ab.py --option xla_cpu_enable_fast_math=true

Variants (A):
  --without CHOICE...   the named choices off, through ``ajax._xla.without``:
                        products_by_width, weight_gradients, unrolled_threefry, init_at_o0,
                        flat_optimizer. ``--without all`` is ``AJAX_CPU_TUNING=0``.
  --option NAME=VALUE   the agent's compile options plus these (the segment only).

One process sees one phase of this noisy machine on both sides, so a few percent shows where
alternating processes (``ab.py``) need many rounds. The settings are the goals' against
rejax (``agent_bench.goal_agent``) at their budgets, or with ``--defaults`` each agent's
bench task at its defaults for ``--n-timesteps``. Each side reports its compile time, its
execution per iteration over the calls, and whether the two ended in the same state. The
compile and program caches are off.
"""

from __future__ import annotations

import ast
import contextlib
import os
import statistics
import time
from datetime import UTC, datetime

os.environ["AJAX_NO_COMPILE_CACHE"] = "1"

import jax
from agent_bench import N_ENVS, TASKS, goal_agent, goal_parser, lower_goal_run, timed_segment_call
from records import emit

import ajax
from ajax import _xla
from ajax._xla import compiler_options
from ajax.run.lowering import lower_run
from ajax.run.plan import plan_run


def variant(without: list[str]) -> contextlib.AbstractContextManager:
    """The block in which side A is built, lowered and compiled."""
    return _tuning_off() if "all" in without else _xla.without(*without)


@contextlib.contextmanager
def _tuning_off():
    _xla.set_cpu_tuning(False)
    try:
        yield
    finally:
        _xla.set_cpu_tuning(True)


def lowered(name: str, n_seeds: int, defaults: bool, n_timesteps: int) -> tuple:
    """The agent, its run's plan and its programs, lowered as ``train`` lowers them."""
    if not defaults:
        agent = goal_agent(name)
        return (agent, *lower_goal_run(name, agent, n_seeds))
    env_id, hyperparameters = TASKS[name]
    agent = ajax.AGENTS[name](env_id=env_id, n_envs=N_ENVS, **hyperparameters)
    plan = plan_run(agent, n_timesteps, None)
    return agent, plan, lower_run(agent, list(range(n_seeds)), plan, 1, evaluate=False)


def build(side: str, args, name: str) -> dict:
    """One side's compiled programs and its segment's compile time."""
    block = variant(args.without) if side == "A" and args.without else contextlib.nullcontext()
    with block:
        agent, plan, programs = lowered(name, args.seeds, args.defaults, args.n_timesteps)
        options = compiler_options(agent) or {}
        if side == "A":
            options |= args.option
        start = time.perf_counter()
        segment = programs.segment.compile(options or None)
        compile_s = time.perf_counter() - start
        init = programs.init.compile(compiler_options(agent, runs_once=True))
    return {
        "programs": programs,
        "init": init,
        "segment": segment,
        "compile_s": compile_s,
        "plan": plan,
    }


def compare(name: str, args) -> dict:
    compiles: dict[str, list[float]] = {"A": [], "B": []}
    sides: dict[str, dict] = {}
    for i in range(args.compiles):
        for side in ("A", "B") if i % 2 == 0 else ("B", "A"):
            sides[side] = build(side, args, name)
            compiles[side].append(sides[side]["compile_s"])
    iterations = sides["B"]["plan"].n_iterations

    def call(side: str) -> tuple[float, object]:
        s = sides[side]
        return timed_segment_call(s["init"], s["segment"], s["programs"], iterations)

    ends = {side: call(side)[1] for side in sides}
    same = all(
        bool((a == b).all())
        for a, b in zip(jax.tree.leaves(ends["A"]), jax.tree.leaves(ends["B"]), strict=True)
    )
    seconds: dict[str, list[float]] = {"A": [], "B": []}
    for i in range(args.calls):
        for side in ("A", "B") if i % 2 == 0 else ("B", "A"):
            seconds[side].append(call(side)[0])
    medians = {side: statistics.median(s) / iterations * 1e3 for side, s in seconds.items()}
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "agent": name,
        "a_without": args.without,
        "a_options": args.option,
        "settings": "defaults" if args.defaults else "goals",
        "seeds": args.seeds,
        "iterations": iterations,
        "calls": args.calls,
        "a_ms_per_iteration": medians["A"],
        "b_ms_per_iteration": medians["B"],
        "b_over_a": medians["B"] / medians["A"],
        "b_faster_calls": sum(b < a for a, b in zip(seconds["A"], seconds["B"], strict=True)),
        "same_end_state": same,
        "a_compile_s": statistics.median(compiles["A"]),
        "b_compile_s": statistics.median(compiles["B"]),
        "compiles": args.compiles,
        "jax": jax.__version__,
    }


def _option(text: str) -> tuple[str, object]:
    name, _, value = text.partition("=")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def main() -> None:
    parser = goal_parser(__doc__)
    parser.add_argument("--without", nargs="+", choices=[*_xla.CHOICES, "all"], default=[])
    parser.add_argument("--option", nargs="+", type=_option, default=[])
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--compiles", type=int, default=1)
    parser.add_argument("--defaults", action="store_true")
    parser.add_argument("--n-timesteps", type=int, default=8_000)
    args = parser.parse_args()
    args.option = dict(args.option)
    if not args.without and not args.option:
        parser.error("name a variant: --without CHOICE... or --option NAME=VALUE...")
    for name in args.agents:
        emit(compare(name, args), args.out)


if __name__ == "__main__":
    main()
