"""The three products of a critic ensemble's update in each operand order Eigen can be given,
timed inside one process with the forms alternating round by round.

    JAX_PLATFORMS=cpu python benchmarks/archive/product_forms.py [--members 10] [--size 256]
        [--rounds 7] [--out benchmarks/archive/product_forms.jsonl]

A layer's forward product is ``x [B, in] @ W [in, out]`` (``NN``: each operand contracted
over the axis the other's order expects); its input gradient ``g [B, out] @ W.T`` contracts
the kernel over its last axis (``NT``); its weight gradient ``x.T @ g`` contracts both over
the batch (``TN``). ``NT-copy`` and ``TN-copy`` transpose the odd operand into a buffer of its
own first (``lax.optimization_barrier`` keeps XLA from folding it back), so that the product
itself is ``NN``. Each form runs as a loop of products whose operands change every
iteration, so that no copy is hoisted out of it, compiled as Ajax compiles wide networks'
products (to Eigen, ``ajax._xla.YNN_FUSIONS`` empty). Figures: ms per product, median and
minimum over the rounds. The batch and the layer's widths are one ``--size``, as in REDQ's
updates (batches of 256 through 256-unit layers), so that every form takes the same operands.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

# Archived: records.py, which this script imports, is one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax
import jax.numpy as jnp
from jax import lax
from records import emit

from ajax._xla import YNN_FUSIONS

#: Batched over the ensemble's first axis; contracting (lhs axis, rhs axis).
BATCH = ((0,), (0,))
NN = ((2,), (1,))


def _copied(x: jax.Array) -> jax.Array:
    """``x`` with its last two axes swapped, in a buffer of its own."""
    return lax.optimization_barrier(jnp.swapaxes(x, 1, 2))


FORMS: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "NN": lambda a, b: lax.dot_general(a, b, (NN, BATCH)),
    "NT": lambda a, b: lax.dot_general(a, b, (((2,), (2,)), BATCH)),
    "TN": lambda a, b: lax.dot_general(a, b, (((1,), (1,)), BATCH)),
    "NT-copy": lambda a, b: lax.dot_general(a, _copied(b), (NN, BATCH)),
    "TN-copy": lambda a, b: lax.dot_general(_copied(a), b, (NN, BATCH)),
}


def compiled_loop(form: Callable, a: jax.Array, b: jax.Array, length: int) -> Callable:
    """``length`` products in ``form``, each from operands the previous one changed."""

    def body(carry, _):
        a, b = carry
        return (a * 0.999 + 1e-3 * b, form(a, b) * 1e-3 + b), None

    run = jax.jit(lambda a, b: lax.scan(body, (a, b), None, length=length)[0][1])
    return run.lower(a, b).compile({YNN_FUSIONS: ""})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--length", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    shape = (args.members, args.size, args.size)
    a_key, b_key = jax.random.split(jax.random.key(0))
    a, b = jax.random.normal(a_key, shape), jax.random.normal(b_key, shape)
    runs = {name: compiled_loop(form, a, b, args.length) for name, form in FORMS.items()}
    for run in runs.values():
        jax.block_until_ready(run(a, b))
    ms: dict[str, list[float]] = {name: [] for name in runs}
    for i in range(args.rounds):
        for name in list(runs) if i % 2 == 0 else reversed(runs):
            start = time.perf_counter()
            jax.block_until_ready(runs[name](a, b))
            ms[name].append((time.perf_counter() - start) / args.length * 1e3)
    emit(
        {
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "shape": list(shape),
            "rounds": args.rounds,
            "ms_median": {name: statistics.median(v) for name, v in ms.items()},
            "ms_min": {name: min(v) for name, v in ms.items()},
            "jax": jax.__version__,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
