"""How Ajax lowers and compiles an agent's programs for XLA.

**Matrix products.** On the CPU, the XLA of jaxlib 0.10 hands matrix products (and some
element-wise and reduction fusions) to YNNPACK by default, and the rest to Eigen and its own
code generator. For the batched products of updates through 256-unit layers (and ten such
critics at once for REDQ) Eigen measured faster on a 2-core AVX2 machine: REDQ's 20 critic
updates took a quarter less time, and DQN executed 55% faster, TD3 17%, PQN 9%, SAC 6%
(PERFORMANCE_REPORT.md, "YNNPACK against Eigen"). Through 64-unit layers YNNPACK was the
faster, by 7-20% for PPO and PQN; and for one-sample updates (AVG: a batch of one, so every
product is a vector-matrix product) AVG ran a third slower without it. So an agent's
products go to YNNPACK when its networks are narrow (:attr:`ajax.agents.base.Agent.ynnpack`)
and its programs are compiled with that. The option is per compile, so nothing else in the
process changes. It is left alone where the user's ``XLA_FLAGS`` names it already, off the
CPU, and where this jaxlib does not know it.

**The initialisation runs once.** The seeds' initial states are computed by a program that
runs once per run, in milliseconds, and whose compile took a fifth of a run's
compile-and-warm-up (PERFORMANCE_REPORT.md, "Where PPO's compile goes"). It is compiled
with XLA's backend optimisation off (:func:`compiler_options` with ``runs_once``), which
halves its compile: the code it makes runs a few times slower, on work that takes
milliseconds.

**Threefry unrolled.** Every ``jax.random`` call hashes with Threefry-2x32, whose 20 rounds
JAX lowers on the CPU as a loop of 5 iterations (to compile large programs faster), and
unrolled elsewhere. Inside the agents' programs, whose random calls are many and small, the
loop costs more than it saves: each iteration is a few tiny kernels plus copies of the loop's
carry (under the seeds' vmap, about 240 copies per environment step of PPO), where the
unrolled rounds fuse. Lowered unrolled, the segment programs compiled 2-17% faster for PPO,
PQN, DQN, SAC and TD3 at 1 and 8 seeds, and agent_bench's compile fell 9-21% for every agent;
execution moved from 21% faster (DQN) to level or 5-8% slower for PQN on 64-unit layers at
one seed (PERFORMANCE_REPORT.md, "Threefry unrolled, the initialisation at O0, YNNPACK by
width", and "One trace per iteration", where the 15-30% first read did not reproduce).
The hash is the same, so every random number is too. :func:`unrolled_threefry` scopes this
to the blocks Ajax lowers its programs in, so the user's own programs keep JAX's lowering.
The seeds' initialisation keeps the loop as well: it runs once, and rolled it is a third
fewer instructions, which shortened its compile (on another thread, alongside the segment's
trace) by 0.1-0.2 s for PPO and SAC (PERFORMANCE_REPORT.md, "The initialisation's Threefry").
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.interpreters import mlir
from jax.extend.random import threefry2x32_p

#: The option's name; the empty list turns every YNNPACK fusion off.
YNN_FUSIONS = "xla_cpu_experimental_ynn_fusion_type"
#: XLA's backend (LLVM) optimisation level, 0-3; 2 by default.
BACKEND_OPT_LEVEL = "xla_backend_optimization_level"


@functools.cache
def _understood(option: str, value: Any) -> bool:
    """Whether this jaxlib's CPU compiler takes ``option`` (some are marked experimental)."""
    try:
        jax.jit(jnp.negative).lower(np.zeros(1, np.float32)).compile(
            compiler_options={option: value}
        )
    except jax.errors.JaxRuntimeError:
        return False
    return True


def compiler_options(agent: Any, runs_once: bool = False) -> dict[str, Any] | None:
    """The options to compile ``agent``'s programs with, or None for XLA's defaults;
    ``runs_once`` for a program that runs once per run (the seeds' initialisation)."""
    if jax.default_backend() != "cpu":
        return None
    flags = os.environ.get("XLA_FLAGS", "")
    options: dict[str, Any] = {}
    if not agent.ynnpack and YNN_FUSIONS not in flags and _understood(YNN_FUSIONS, ""):
        options[YNN_FUSIONS] = ""
    if runs_once and BACKEND_OPT_LEVEL not in flags and _understood(BACKEND_OPT_LEVEL, 0):
        options[BACKEND_OPT_LEVEL] = 0
    return options or None


@contextlib.contextmanager
def unrolled_threefry() -> Iterator[None]:
    """Within the block, JAX lowers Threefry for the CPU unrolled, as for other platforms.

    JAX registers the unrolled lowering for every platform and the rolled loop as the CPU's
    own; the block takes the CPU's away, so the common rule applies, and puts it back after.
    """
    cpu_rules = mlir._platform_specific_lowerings["cpu"]
    rolled = cpu_rules.pop(threefry2x32_p, None)
    try:
        yield
    finally:
        if rolled is not None:
            cpu_rules[threefry2x32_p] = rolled
