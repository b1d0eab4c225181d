"""What one call of a trained policy costs in a user's Python loop: ``TrainResult.policy_fn``
(compiled once) against ``TrainResult.act``, for one seed and for every seed, on agents with
an MLP policy and one with an acting carry. Training is a few hundred steps: a policy's
speed does not depend on how well it was trained.

    JAX_PLATFORMS=cpu python benchmarks/policy_bench.py --out benchmarks/results/policy.jsonl
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
from records import emit

import ajax

#: agent -> (task, hyperparameters): PPO's and SAC's default MLPs (64x64 and 256x256), and
#: UDRL, whose carry (the command) the policy keeps between calls.
AGENTS = {
    "PPO": ("CartPole-v1", {}),
    "SAC": ("Pendulum-v1", {"learning_starts": 64}),
    "UDRL": ("CartPole-v1", {}),
}
SEEDS = [0, 1, 2, 3]


def per_call(fn, obs, calls: int) -> float:
    """Median over 5 rounds of the mean seconds per call, after one warm call."""
    fn(obs)
    rounds = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn(obs)
        rounds.append((time.perf_counter() - start) / calls)
    return float(np.median(rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=list(AGENTS))
    parser.add_argument("--calls", type=int, default=2_000, help="calls per round")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    for name in args.agents:
        env_id, settings = AGENTS[name]
        agent = ajax.AGENTS[name](env_id=env_id, n_envs=4, **settings)
        result = agent.train(seed=SEEDS, n_timesteps=512)
        obs = np.zeros(agent.env.observation_space.shape, np.float32)
        carried = bool(jax.tree.leaves(result.initial_carry()))
        start = time.perf_counter()
        one_seed = result.policy_fn(seed_index=0)
        build_s = time.perf_counter() - start
        every_seed = result.policy_fn()
        if carried:  # UDRL's command spends each step's reward: a user's loop passes it.
            one_seed, every_seed = (lambda o, f=f: f(o, reward=1.0) for f in (one_seed, every_seed))
        row = {
            "agent": name,
            "env": env_id,
            "seeds": len(SEEDS),
            "policy_fn_build_s": round(build_s, 3),
            "policy_fn_one_seed_us": round(1e6 * per_call(one_seed, obs, args.calls), 1),
            "policy_fn_every_seed_us": round(1e6 * per_call(every_seed, obs, args.calls), 1),
        }
        if not carried:
            row["act_every_seed_us"] = round(1e6 * per_call(result.act, obs, args.calls // 20), 1)
        emit(
            row
            | {
                "commit": commit.stdout.strip(),
                "date": datetime.date.today().isoformat(),
                "cpu": platform.processor() or platform.machine(),
                "cores": os.cpu_count(),
            },
            args.out,
        )


if __name__ == "__main__":
    sys.exit(main())
