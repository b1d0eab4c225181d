"""Does running a segment through ``jax.export`` change its speed? The same agent's segment
program compiled both ways in one process, direct (``jax.jit`` of the vmapped segment, as
before the program cache) and exported (as ``train`` runs it now), each executed on a fresh
initial state in turn, the order alternating round by round. With ``--via-train``, whole
agent_bench trials instead (``train`` with its lowering switched between the two paths),
execution steps/s as the bench reads them.

    JAX_PLATFORMS=cpu python benchmarks/export_path_ab.py --agents DQN AVG --rounds 8 \\
        [--via-train] [--out benchmarks/export_path_ab.jsonl]

Uses agent_bench's protocol: 4 copies, 8,000 steps, one seed, the compile cache off.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime

os.environ["AJAX_NO_COMPILE_CACHE"] = "1"

import jax
import jax.numpy as jnp
from agent_bench import N_ENVS, N_TIMESTEPS, TASKS, time_ajax
from records import emit

import ajax
from ajax import loop
from ajax._xla import compiler_options
from ajax.envs.core import SEED_AXIS
from ajax.run import health as run_health
from ajax.run import lowering, program
from ajax.run import plan as run_plan


def direct_lower_run(agent, seeds, plan, num_episode_test, *, evaluate, compile_init=False):
    """``loop.lower_run`` as it was before the program cache: ``jax.jit`` of the programs
    (the init lowered and compiled on another thread, as there)."""
    train_env = agent.env_copies(agent.n_envs)
    eval_env = agent.env_copies(num_episode_test).for_evaluation() if evaluate else None
    init = program.init_program(agent, train_env, plan.n_iterations)
    run_seeds = run_plan.seed_array(seeds)
    segment = jax.jit(
        jax.vmap(
            program.segment_program(agent, train_env, eval_env),
            in_axes=(0, 0, 0, None, None),
            axis_name=SEED_AXIS,
        ),
        donate_argnums=0,
    )
    health = run_health.initial_health(len(seeds))
    args = (jax.eval_shape(init, run_seeds), health, run_seeds, jnp.int32(0), jnp.int32(0))
    segment_lowered = segment.lower(*args)
    init_lowering, init_compiled = lowering.lowered_init(
        lambda: init.lower(run_seeds), compiler_options(agent, runs_once=True), compile_init
    )
    return lowering.RunPrograms(
        run_seeds,
        health,
        run_health.watched_metrics(jax.eval_shape(segment, *args)[2]["sums"]),
        init_lowering,
        segment_lowered,
        init_compiled,
    )


def via_train(name: str, rounds: int) -> dict[str, list[float]]:
    """Execution steps/s of agent_bench trials, the lowering alternating between paths."""
    paths = {"direct": direct_lower_run, "exported": loop.lower_run}
    figures: dict[str, list[float]] = {side: [] for side in paths}
    for round_ in range(rounds):
        for side in list(paths) if round_ % 2 == 0 else list(reversed(paths)):
            loop.lower_run = paths[side]
            try:
                figures[side].append(time_ajax(name)["execution_sps"])
            finally:
                loop.lower_run = paths["exported"]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", nargs="+", default=["DQN", "AVG"], choices=sorted(TASKS))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--via-train", action="store_true", help="time whole bench trials")
    parser.add_argument("--out", default=None, help="JSON-lines file to append the rows to")
    args = parser.parse_args()
    for name in args.agents:
        if args.via_train:
            figures = via_train(name, args.rounds)
            medians = {side: statistics.median(f) for side, f in figures.items()}
            emit(
                {
                    "agent": name,
                    "date": datetime.now(UTC).date().isoformat(),
                    "via": "train",
                    "direct_execution_sps": round(medians["direct"], 1),
                    "exported_execution_sps": round(medians["exported"], 1),
                    "change": round(medians["exported"] / medians["direct"] - 1, 4),
                    "direct_trials": [round(f, 1) for f in figures["direct"]],
                    "exported_trials": [round(f, 1) for f in figures["exported"]],
                },
                args.out,
            )
            continue
        env_id, hyperparameters = TASKS[name]
        agent = ajax.AGENTS[name](env_id=env_id, n_envs=N_ENVS, **hyperparameters)
        plan = run_plan.plan_run(agent, N_TIMESTEPS, None)
        programs = loop.lower_run(agent, [0], plan, 10, evaluate=False)
        init = programs.init.compile()
        compiled = {
            "direct": direct_lower_run(agent, [0], plan, 10, evaluate=False).segment.compile(),
            "exported": programs.segment.compile(),
        }
        times: dict[str, list[float]] = {side: [] for side in compiled}
        for round_ in range(args.rounds):
            order = list(compiled) if round_ % 2 == 0 else list(reversed(compiled))
            for side in order:
                state = jax.block_until_ready(init(programs.seeds))
                started = time.perf_counter()
                jax.block_until_ready(
                    compiled[side](
                        state,
                        programs.health,
                        programs.seeds,
                        jnp.int32(0),
                        jnp.int32(plan.n_iterations),
                    )
                )
                times[side].append(time.perf_counter() - started)
        medians = {side: statistics.median(t) for side, t in times.items()}
        emit(
            {
                "agent": name,
                "date": datetime.now(UTC).date().isoformat(),
                "direct_median_s": round(medians["direct"], 4),
                "exported_median_s": round(medians["exported"], 4),
                "exported_over_direct": round(medians["exported"] / medians["direct"], 4),
                "direct_s": [round(t, 4) for t in times["direct"]],
                "exported_s": [round(t, 4) for t in times["exported"]],
            },
            args.out,
        )


if __name__ == "__main__":
    main()
