"""Environment speed benchmark: how fast each environment family steps on its own.

An agent can go no faster than its environment, so this is the ceiling to read
``agent_bench.py``'s figures against. Protocol: ``--n-envs`` copies (default 16) behind the
same auto-reset and vectorisation the agents train through, uniformly random actions, one
compiled ``lax.scan`` of ``--steps`` steps per copy (default 1,000), the compile cache off, on
the CPU. The program is compiled once per environment and run ``TRIALS`` times; reported:

* env steps/s: steps over all copies per second of execution, median of the trials;
* compile s: tracing, lowering and compiling the scan.

Two rows measure options against their defaults on the same task: Brax with
``differentiable_reset=True`` (a reset computed every step) and Playground with
``fresh_reset=False`` (a cached initial state). Both tasks run without early termination, so
with ``--steps`` at twice ``--episode-length`` every copy resets exactly once, at the same step.

    JAX_PLATFORMS=cpu python benchmarks/env_bench.py [--envs gymnax/CartPole-v1 ...]
        [--n-envs 16] [--steps 1000] [--out benchmarks/results/env_latest.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["AJAX_NO_COMPILE_CACHE"] = "1"

import jax

import ajax
from ajax.envs import make_env
from ajax.envs.wrappers import AutoReset, VectorEnv

HERE = Path(__file__).resolve().parent
TRIALS = 3

#: label -> (env id, its options). One task per family, and the two reset options.
TASKS: dict[str, tuple[str, dict]] = {
    "gymnax/CartPole-v1": ("gymnax/CartPole-v1", {}),
    "gymnax/Pendulum-v1": ("gymnax/Pendulum-v1", {}),
    "brax/reacher": ("brax/reacher", {}),
    "brax/reacher differentiable_reset": ("brax/reacher", {"differentiable_reset": True}),
    "playground/CheetahRun": ("playground/CheetahRun", {}),
    "playground/CheetahRun cached reset": ("playground/CheetahRun", {"fresh_reset": False}),
    "target_gym/Plane": ("target_gym/Plane", {}),
    "ajax/PendulumTracking-v0": ("ajax/PendulumTracking-v0", {}),
}


def random_rollout(env_id: str, options: dict, n_envs: int, n_steps: int):
    """The compiled scan of ``n_steps`` random-action steps of ``n_envs`` copies, and its
    compile time."""
    env = make_env(env_id, **options)
    batch = AutoReset(VectorEnv(env, n_envs))
    space = env.action_space

    def run(key):
        state, _ = batch.reset(key)

        def step(state, step_key):
            action_key, env_key = jax.random.split(step_key)
            actions = jax.vmap(space.sample)(jax.random.split(action_key, n_envs))
            state, obs, reward, *_ = batch.step(env_key, state, actions)
            return state, reward.sum() + obs.sum()

        # The observations and the final state are outputs, so that the compiler cannot drop
        # the dynamics of a task whose reward is constant (Brax's inverted pendulum).
        state, sums = jax.lax.scan(step, state, jax.random.split(key, n_steps))
        return state, sums.sum()

    key = jax.random.key(0)
    start = time.perf_counter()
    compiled = jax.jit(run).lower(key).compile()
    return compiled, time.perf_counter() - start


def time_env(env_id: str, options: dict, n_envs: int, n_steps: int) -> dict[str, float]:
    compiled, compile_s = random_rollout(env_id, options, n_envs, n_steps)
    rates = []
    for trial in range(TRIALS):
        key = jax.random.key(trial + 1)
        start = time.perf_counter()
        jax.block_until_ready(compiled(key))
        rates.append(n_envs * n_steps / (time.perf_counter() - start))
    return {"env_sps": statistics.median(rates), "compile_s": compile_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--n-envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=1_000)
    parser.add_argument(
        "--episode-length", type=int, default=500, help="for the Brax and Playground tasks"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results" / "env_latest.jsonl")
    args = parser.parse_args(argv)

    machine = {
        "date": time.strftime("%Y-%m-%d"),
        "cpu": ajax._compile_cache.cpu_model(),
        "cores": os.cpu_count(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
    }
    protocol = {"n_envs": args.n_envs, "steps_per_copy": args.steps, "trials": TRIALS}
    rows = []
    print(f"{'environment':<46}{'env steps/s':>14}{'compile s':>11}")
    for label in args.envs:
        env_id, options = TASKS[label]
        if env_id.startswith(("brax/", "playground/")):
            options = options | {"episode_length": args.episode_length}
        stats = time_env(env_id, options, args.n_envs, args.steps)
        rows.append(
            {"env": label, "env_id": env_id, "options": options} | stats | protocol | machine
        )
        print(f"{label:<46}{stats['env_sps']:>14,.0f}{stats['compile_s']:>11.2f}", flush=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
