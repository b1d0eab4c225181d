"""Ajax's replay buffer against flashbax's, as the replay agents use them, trials alternating.

Each workload is what one agent iteration asks of its buffer, run for ``--steps`` iterations in
one compiled ``lax.scan`` and vmapped over ``--seeds`` seeds, exactly as inside a run:

* ``rows`` (SAC, TD3, REDQ): add one transition per copy, sample 256 rows uniformly.
* ``sequences`` (DQN with 5-step returns; the world models): add one transition per copy,
  sample 128 runs of 5 consecutive steps of one copy.

Ajax's buffer is :class:`ajax.buffers.ReplayBuffer`; flashbax's (0.1.x) is its flat buffer
for rows and its trajectory buffer for runs. Both are filled to the same size first, so the
timed part samples from a buffer of ``--filled`` transitions per seed. The trials alternate
(Ajax, flashbax, Ajax, ...) in one process, so the machine's drift cancels.

    JAX_PLATFORMS=cpu python benchmarks/archive/storage_bench.py [--rounds 5] \\
        [--out benchmarks/archive/storage.jsonl]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

# Archived: records.py, which this script imports, is one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import flashbax as fbx
import jax
import jax.numpy as jnp
from records import emit

from ajax.buffers import ReplayBuffer

OBS_DIM = 17  # HalfCheetah's observation
BATCH = {"rows": 256, "sequences": 128}
LENGTH = 5


def _transition(key: jax.Array, n_envs: int) -> dict[str, jax.Array]:
    obs = jax.random.normal(key, (n_envs, OBS_DIM))
    return {
        "obs": obs,
        "action": jnp.zeros((n_envs, 6)),
        "reward": jnp.ones(n_envs),
        "terminated": jnp.zeros(n_envs),
        "next_obs": obs + 1.0,
    }


class AjaxStore:
    name = "ajax"

    def __init__(self, workload: str, capacity: int, n_envs: int):
        self.workload, self.capacity, self.n_envs = workload, capacity, n_envs

    def init(self) -> ReplayBuffer:
        example = jax.tree.map(lambda x: x[0], _transition(jax.random.key(0), 1))
        return ReplayBuffer.create(example, self.capacity)

    def add(self, buffer: ReplayBuffer, batch) -> ReplayBuffer:
        return buffer.add(batch)

    def sample(self, buffer: ReplayBuffer, key: jax.Array):
        if self.workload == "rows":
            return buffer.sample(key, BATCH["rows"])
        return buffer.sample_sequences(key, BATCH["sequences"], LENGTH, self.n_envs)


class FlashbaxStore:
    name = "flashbax"

    def __init__(self, workload: str, capacity: int, n_envs: int):
        self.n_envs = n_envs
        if workload == "rows":
            self.buffer = fbx.make_flat_buffer(
                max_length=capacity,
                min_length=1,
                sample_batch_size=BATCH["rows"],
                add_batch_size=n_envs,
            )
        else:
            self.buffer = fbx.make_trajectory_buffer(
                add_batch_size=n_envs,
                sample_batch_size=BATCH["sequences"],
                sample_sequence_length=LENGTH,
                period=1,
                min_length_time_axis=LENGTH,
                max_size=capacity,
            )
        self.workload = workload

    def init(self):
        example = jax.tree.map(lambda x: x[0], _transition(jax.random.key(0), 1))
        return self.buffer.init(example)

    def add(self, state, batch):
        if self.workload == "rows":
            return self.buffer.add(state, batch)
        return self.buffer.add(state, jax.tree.map(lambda x: x[:, None], batch))

    def sample(self, state, key: jax.Array):
        experience = self.buffer.sample(state, key).experience
        # The flat buffer samples (first, second) pairs of consecutive items: take the item.
        return experience.first if self.workload == "rows" else experience


def program(store, n_steps: int, filled: int):
    """``n_steps`` of add-then-sample from a filled buffer, vmapped over seeds; returns a
    checksum of the samples so that nothing is optimised away."""

    def one_seed(key):
        fill_key, run_key = jax.random.split(key)
        state = store.init()

        def fill(state, k):
            return store.add(state, _transition(k, store.n_envs)), None

        state, _ = jax.lax.scan(fill, state, jax.random.split(fill_key, filled // store.n_envs))

        def step(carry, k):
            state, total = carry
            add_key, sample_key = jax.random.split(k)
            state = store.add(state, _transition(add_key, store.n_envs))
            sample = store.sample(state, sample_key)
            return (state, total + sample["reward"].sum() + sample["obs"].sum()), None

        (_, total), _ = jax.lax.scan(step, (state, 0.0), jax.random.split(run_key, n_steps))
        return total

    return jax.jit(jax.vmap(one_seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5_000)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--n-envs", type=int, default=1)
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--filled", type=int, default=50_000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    keys = jax.random.split(jax.random.key(0), args.seeds)
    for workload in ("rows", "sequences"):
        stores = [cls(workload, args.capacity, args.n_envs) for cls in (AjaxStore, FlashbaxStore)]
        compiled = {}
        for store in stores:
            start = time.perf_counter()
            compiled[store.name] = program(store, args.steps, args.filled).lower(keys).compile()
            print(f"{workload} {store.name}: compiled in {time.perf_counter() - start:.1f} s")
        seconds = {store.name: [] for store in stores}
        for round_ in range(args.rounds):
            for store in stores:
                start = time.perf_counter()
                compiled[store.name](keys).block_until_ready()
                seconds[store.name].append(time.perf_counter() - start)
                print(
                    f"round {round_ + 1} {workload} {store.name}: {seconds[store.name][-1]:.3f} s"
                )
        median = {name: statistics.median(s) for name, s in seconds.items()}
        row = {
            "workload": workload,
            "seeds": args.seeds,
            "n_envs": args.n_envs,
            "steps": args.steps,
            "capacity": args.capacity,
            "filled": args.filled,
            "rounds": args.rounds,
            **{f"{name}/median_s": s for name, s in median.items()},
            "flashbax_change": median["flashbax"] / median["ajax"] - 1.0,
        }
        emit(row, args.out)


if __name__ == "__main__":
    main()
