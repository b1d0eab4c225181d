"""A choice in how Ajax traces its training programs, A/B'd inside one process: each agent's
run is lowered and compiled once without the choice (A, as before it) and once with it (B,
as Ajax runs now), then the two segments are called in turn over the whole budget, the
order alternating call by call, each call from the same freshly initialised state.

    JAX_PLATFORMS=cpu python benchmarks/trace_ab.py --choice weight-gradients \\
        [--agents PPO PQN] [--seeds 1] [--defaults --n-timesteps 8000] [--calls 8] \\
        [--out benchmarks/trace_ab.jsonl]

Choices:
  weight-gradients  the layers' weight gradients in the form YNNPACK takes
                    (``ajax._xla.YNNPACK_FORM``); A is autodiff's own.
  kernel-order      the layers' weight gradients written in the kernel's order where the
                    products go to Eigen (``ajax._xla.KERNEL_ORDER``); A is autodiff's own.
  shuffle           the epochs' shuffle by sorts of one integer array
                    (``ajax.minibatches.permutation``); A is ``jax.random.permutation``.
  width-one         layers of one output keep autodiff's weight gradient
                    (``ajax._xla._ynnpack_takes_gradient``); A transposes their inputs too.
  avx512            wide networks' products to YNNPACK on an AVX-512 CPU, for the agents
                    that allow it (``Agent.ynnpack_max_width_avx512``); A is the limit
                    without AVX-512 (Eigen above 64 units).

The settings are the goals' against rejax (``agent_bench.goal_agent``) at their budgets, or
with ``--defaults`` each agent's bench task at its defaults for ``--n-timesteps``. Each side
reports its compile time, its execution per iteration over the calls, and whether the two
ended in the same state. The compile cache is off.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from unittest import mock

os.environ["AJAX_NO_COMPILE_CACHE"] = "1"

import jax
from agent_bench import (
    N_ENVS,
    TASKS,
    goal_agent,
    goal_parser,
    lower_goal_run,
    timed_segment_call,
)
from records import emit

import ajax
from ajax import _xla, minibatches
from ajax._xla import compiler_options
from ajax.agents import base as agents_base
from ajax.run.lowering import lower_run
from ajax.run.plan import plan_run


def _autodiff_for(form: str) -> contextlib.AbstractContextManager:
    """Agents whose layers would take their weight gradients in ``form`` take autodiff's."""
    chosen = _xla.weight_gradient_form
    return mock.patch.object(
        _xla, "weight_gradient_form", lambda a: None if chosen(a) == form else chosen(a)
    )


#: choice -> what puts the tracing back as it was before the choice (side A).
WITHOUT: dict[str, Callable[[], contextlib.AbstractContextManager]] = {
    "weight-gradients": lambda: _autodiff_for(_xla.YNNPACK_FORM),
    "kernel-order": lambda: _autodiff_for(_xla.KERNEL_ORDER),
    "shuffle": lambda: mock.patch.object(minibatches, "permutation", jax.random.permutation),
    "width-one": lambda: mock.patch.object(_xla, "_ynnpack_takes_gradient", lambda kernel: True),
    "avx512": lambda: mock.patch.object(agents_base, "cpu_has_avx512", lambda: False),
}


def lowered(name: str, n_seeds: int, defaults: bool, n_timesteps: int) -> tuple:
    """The agent, its run's plan and its programs, lowered as ``train`` lowers them."""
    if not defaults:
        agent = goal_agent(name)
        return (agent, *lower_goal_run(name, agent, n_seeds))
    env_id, hyperparameters = TASKS[name]
    agent = ajax.AGENTS[name](env_id=env_id, n_envs=N_ENVS, **hyperparameters)
    plan = plan_run(agent, n_timesteps, None)
    return agent, plan, lower_run(agent, list(range(n_seeds)), plan, 1, evaluate=False)


def compare(
    name: str,
    choices: list[str],
    n_seeds: int,
    calls: int,
    compiles: int,
    defaults: bool,
    steps: int,
) -> dict:
    sides: dict[str, dict] = {"A": {"compile_s": []}, "B": {"compile_s": []}}
    for i in range(compiles):
        for side in ("A", "B") if i % 2 == 0 else ("B", "A"):
            with contextlib.ExitStack() as without:
                for choice in choices if side == "A" else ():
                    without.enter_context(WITHOUT[choice]())
                agent, plan, programs = lowered(name, n_seeds, defaults, steps)
                start = time.perf_counter()
                segment = programs.segment.compile(compiler_options(agent))
                sides[side]["compile_s"].append(time.perf_counter() - start)
            init = programs.init.compile(compiler_options(agent, runs_once=True))
            sides[side] |= {"programs": programs, "init": init, "segment": segment}
    iterations = plan.n_iterations

    def call(side: str) -> tuple[float, object]:
        s = sides[side]
        return timed_segment_call(s["init"], s["segment"], s["programs"], iterations)

    ends = {side: call(side)[1] for side in sides}
    same = all(
        bool((a == b).all())
        for a, b in zip(jax.tree.leaves(ends["A"]), jax.tree.leaves(ends["B"]), strict=True)
    )
    seconds = {"A": [], "B": []}
    for i in range(calls):
        for side in ("A", "B") if i % 2 == 0 else ("B", "A"):
            seconds[side].append(call(side)[0])
    medians = {side: statistics.median(s) / iterations * 1e3 for side, s in seconds.items()}
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "agent": name,
        "choices": choices,
        "settings": "defaults" if defaults else "goals",
        "seeds": n_seeds,
        "iterations": iterations,
        "calls": calls,
        "ynnpack": _xla.products_go_to_ynnpack(agent),
        "a_ms_per_iteration": medians["A"],
        "b_ms_per_iteration": medians["B"],
        "b_over_a": medians["B"] / medians["A"],
        "b_faster_calls": sum(b < a for a, b in zip(seconds["A"], seconds["B"], strict=True)),
        "same_end_state": same,
        "a_compile_s": statistics.median(sides["A"]["compile_s"]),
        "b_compile_s": statistics.median(sides["B"]["compile_s"]),
        "b_faster_compiles": sum(
            b < a for a, b in zip(sides["A"]["compile_s"], sides["B"]["compile_s"], strict=True)
        ),
        "compiles": compiles,
        "jax": jax.__version__,
    }


def main() -> None:
    parser = goal_parser(__doc__)
    parser.add_argument("--choices", nargs="+", choices=sorted(WITHOUT), required=True)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--compiles", type=int, default=1)
    parser.add_argument("--defaults", action="store_true")
    parser.add_argument("--n-timesteps", type=int, default=8_000)
    args = parser.parse_args()
    for name in args.agents:
        row = compare(
            name,
            args.choices,
            args.seeds,
            args.calls,
            args.compiles,
            args.defaults,
            args.n_timesteps,
        )
        emit(row, args.out)


if __name__ == "__main__":
    main()
