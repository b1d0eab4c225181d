"""What an environment option costs inside a training run, A/B with trials alternating.

Each comparison times the same agent on the same task twice over, with and without one
option, alternating the two (A, B, A, B, ...) in one process so that the machine's drift
cancels. Each trial is agent_bench.py's: a fresh agent, one seed, 4 copies, the compile
cache off; execution steps/s, whole-run steps/s and compile seconds.

* ``action-map``: PPO, SAC and TD3 on Pendulum-v1 with the action map (the default: clip to
  ``[-1, 1]``, then the affine map onto the torque's ``[-2, 2]``), and with the agents'
  actions passed to the environment as they are.
* ``brax-differentiable-reset``: PPO on Brax's reacher with ``differentiable_reset=True``
  (a reset computed on every step, so gradients can flow through it) against the default.
* ``playground-fresh-reset``: SAC on Playground's CheetahRun with fresh resets (the
  default: a new initial state drawn at each episode end) against ``fresh_reset=False``
  (the first initial state kept and reused).

    JAX_PLATFORMS=cpu python benchmarks/option_costs.py action-map [--rounds 3]
        [--n-timesteps 8000] [--out benchmarks/results/option_costs.jsonl]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics

from agent_bench import N_TIMESTEPS, time_ajax
from records import emit

from ajax.envs.wrappers import ActionMap


@contextlib.contextmanager
def without_action_map():
    """The agents' actions reach the environment unchanged (no clip, no affine map)."""
    original = ActionMap.to_env
    ActionMap.to_env = lambda self, action: action
    try:
        yield
    finally:
        ActionMap.to_env = original


#: comparison -> [(agent, task, hyperparameters)], and the two arms: (name, task changes,
#: context).
COMPARISONS = {
    "action-map": (
        [
            ("PPO", ("Pendulum-v1", None), {}),
            ("SAC", ("Pendulum-v1", None), {"learning_starts": 1_000}),
            ("TD3", ("Pendulum-v1", None), {"learning_starts": 1_000}),
        ],
        [("with", {}, contextlib.nullcontext), ("without", {}, without_action_map)],
    ),
    "brax-differentiable-reset": (
        [("PPO", ("brax/reacher", {}), {})],
        [
            ("default", {}, contextlib.nullcontext),
            ("differentiable_reset", {"differentiable_reset": True}, contextlib.nullcontext),
        ],
    ),
    "playground-fresh-reset": (
        [("SAC", ("playground/CheetahRun", {}), {"learning_starts": 500})],
        [
            ("fresh_reset", {}, contextlib.nullcontext),
            ("cached reset", {"fresh_reset": False}, contextlib.nullcontext),
        ],
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("comparison", choices=sorted(COMPARISONS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n-timesteps", type=int, default=N_TIMESTEPS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    runs, arms = COMPARISONS[args.comparison]
    for agent, (env_id, env_params), hyperparameters in runs:
        trials: dict[str, list[dict]] = {name: [] for name, _, _ in arms}
        for round_ in range(args.rounds):
            for name, changes, context in arms:
                task = (env_id, None if env_params is None else env_params | changes)
                with context():
                    trial = time_ajax(
                        agent, hyperparameters, task=task, n_timesteps=args.n_timesteps
                    )
                trials[name].append(trial)
                print(f"round {round_ + 1} {agent} {env_id} {name}: {trial}", flush=True)
        summary = {"comparison": args.comparison, "agent": agent, "env_id": env_id}
        for name, rows in trials.items():
            for metric in ("execution_sps", "whole_run_sps", "compile_s"):
                summary[f"{name}/{metric}"] = statistics.median(r[metric] for r in rows)
        first, second = (name for name, _, _ in arms)
        summary["change_execution_sps"] = (
            summary[f"{second}/execution_sps"] / summary[f"{first}/execution_sps"] - 1
        )
        summary["change_compile_s"] = (
            summary[f"{second}/compile_s"] / summary[f"{first}/compile_s"] - 1
        )
        summary["rounds"] = args.rounds
        summary["n_timesteps"] = args.n_timesteps
        emit(summary, args.out)


if __name__ == "__main__":
    main()
