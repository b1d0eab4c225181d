"""How a run's time grows with its number of seeds: 1, 4, 16 and 32 seeds in one program.

Workloads (4 environment copies per seed, the compile cache off, one trial per point):

* SAC on Pendulum-v1 and on target_gym/Plane3DCircle: 5,000 steps per seed, learning from
  step 1,000, a 10,000-transition buffer per seed, 64x64 networks (rejax's SAC sizes);
* PPO on CartPole-v1: 100,000 steps per seed, Ajax's defaults (rejax's PPO matched to them).

PPO and SAC on the gymnax tasks are also run with rejax at the same seed counts (its train
vmapped over seed keys, the settings of ``agent_bench.py --peer rejax``). Compile and
execution are reported apart, with the throughput (steps over all seeds per second of
execution) as a multiple of one seed's.

    JAX_PLATFORMS=cpu python benchmarks/seed_scaling.py --out benchmarks/results/seed_scaling.jsonl

Nothing else should run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from agent_bench import PEERS, time_ajax
from records import emit

SEEDS = (1, 4, 16, 32)
SAC_SETTINGS = {"buffer_size": 10_000, "learning_starts": 1_000, "hidden_sizes": (64, 64)}
#: name -> (agent, environment id, steps per seed, Ajax settings, rejax's or None).
WORKLOADS = {
    "SAC Pendulum-v1": ("SAC", "Pendulum-v1", 5_000, SAC_SETTINGS, "rejax"),
    "SAC target_gym/Plane3DCircle": (
        "SAC",
        "target_gym/Plane3DCircle",
        5_000,
        SAC_SETTINGS,
        None,
    ),
    "PPO CartPole-v1": ("PPO", "CartPole-v1", 100_000, {}, "rejax"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--no-peer", action="store_true", help="leave rejax out")
    parser.add_argument("--out", default=None, help="JSON-lines file to append the rows to")
    args = parser.parse_args()
    date = datetime.now(UTC).date().isoformat()
    print(f"{'workload':<30}{'impl':<7}{'seeds':>6}{'compile s':>11}{'exec s':>9}{'x one':>8}")
    for workload in args.workloads:
        agent, env_id, steps, settings, peer = WORKLOADS[workload]
        sides = ["ajax"] + ([peer] if peer and not args.no_peer else [])
        for side in sides:
            single = None
            for seeds in args.seeds:
                if side == "ajax":
                    figures = time_ajax(
                        agent, settings, task=(env_id, None), n_timesteps=steps, seeds=seeds
                    )
                else:
                    figures = PEERS[side][agent].trial(
                        env_id, steps, seeds, **({"buffer_size": 10_000} if agent == "SAC" else {})
                    )
                execution_s = figures["steps"] / figures["execution_sps"]
                single = single or figures["execution_sps"]
                multiple = figures["execution_sps"] / single
                print(
                    f"{workload:<30}{side:<7}{seeds:>6}{figures['compile_s']:>11.2f}"
                    f"{execution_s:>9.2f}{multiple:>8.1f}"
                )
                emit(
                    {
                        "workload": workload,
                        "implementation": side,
                        "seeds": seeds,
                        "steps_per_seed": steps,
                        "compile_s": round(figures["compile_s"], 3),
                        "execution_s": round(execution_s, 3),
                        "wall_s": round(figures["compile_s"] + execution_s, 3),
                        "execution_sps": round(figures["execution_sps"], 1),
                        "throughput_vs_one_seed": round(multiple, 2),
                        "date": date,
                    },
                    args.out,
                )


if __name__ == "__main__":
    main()
