"""The minibatch shuffle against JAX's: ``ajax.minibatches.permutation`` and
``jax.random.permutation`` timed on the same keys, each inside one compiled loop per size
(so no dispatch is timed), both in turn at each size.

    JAX_PLATFORMS=cpu python benchmarks/archive/shuffle_bench.py [--sizes 128 512 4096] \\
        [--trials 5] [--out benchmarks/archive/shuffle.jsonl]

Both give the same permutation (``tests/test_minibatches.py``); JAX's sorts the indices
under random keys with a key-value sort, Ajax's with two sorts of one integer array each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

# Archived: records.py, which this script imports, is one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
from records import emit

from ajax._xla import unrolled_threefry
from ajax.minibatches import permutation

SHUFFLES: dict[str, Callable[[jax.Array, int], jax.Array]] = {
    "jax": jax.random.permutation,
    "ajax": permutation,
}


def microseconds(shuffle: Callable, n: int, trials: int) -> float:
    """The fastest of ``trials`` timings of one shuffle of ``n``, each over enough shuffles
    (a loop in one program, a new key each) to take a noticeable time."""
    calls = max(10, 100_000 // n)

    def body(i, total):
        return total + shuffle(jax.random.fold_in(jax.random.PRNGKey(0), i), n)

    with unrolled_threefry():  # as the agents' programs are lowered
        program = jax.jit(lambda t: jax.lax.fori_loop(0, calls, body, t)).lower(
            jnp.zeros(n, jnp.int32)
        )
    run = program.compile()
    jax.block_until_ready(run(jnp.zeros(n, jnp.int32)))
    best = float("inf")
    for _ in range(trials):
        start = time.perf_counter()
        jax.block_until_ready(run(jnp.zeros(n, jnp.int32)))
        best = min(best, time.perf_counter() - start)
    return best / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512, 1024, 4096])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    for n in args.sizes:
        times = {name: microseconds(shuffle, n, args.trials) for name, shuffle in SHUFFLES.items()}
        row = {
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "size": n,
            **{f"{name}_us": t for name, t in times.items()},
            "ajax_over_jax": times["ajax"] / times["jax"],
            "jax": jax.__version__,
        }
        emit(row, args.out)


if __name__ == "__main__":
    main()
