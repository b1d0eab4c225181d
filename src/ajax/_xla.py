"""The XLA options Ajax compiles an agent's programs with.

On the CPU, the XLA of jaxlib 0.10 hands matrix products (and some element-wise and reduction
fusions) to YNNPACK by default, and the rest to Eigen and its own code generator. For the
batched products of the agents' updates (a minibatch through a 256x256 layer, ten critics at
once for REDQ) Eigen measured faster on a 2-core AVX2 machine: REDQ's 20 critic updates took
a quarter less time, and DQN executed 55% faster, PPO 35%, TD3 17%, PQN 9%, SAC 6%
(PERFORMANCE_REPORT.md, "YNNPACK against Eigen"). For one-sample updates (AVG: a batch of
one, so every product is a vector-matrix product) AVG ran a third slower without YNNPACK. So
each agent says whether its products go to YNNPACK (:attr:`ajax.agents.base.Agent.ynnpack`,
off by default) and its programs are compiled with that.

The option is per compile, so nothing else in the process changes. It is left alone where
the user's ``XLA_FLAGS`` names it already, off the CPU, and where this jaxlib does not know it.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import jax
import jax.numpy as jnp

#: The option's name; the empty list turns every YNNPACK fusion off.
YNN_FUSIONS = "xla_cpu_experimental_ynn_fusion_type"


@functools.cache
def _understood() -> bool:
    """Whether this jaxlib's CPU compiler takes the option (it is marked experimental)."""
    try:
        jax.jit(jnp.negative).lower(jnp.zeros(1)).compile(compiler_options={YNN_FUSIONS: ""})
    except jax.errors.JaxRuntimeError:
        return False
    return True


def compiler_options(agent: Any) -> dict[str, str] | None:
    """The options to compile ``agent``'s programs with, or None for XLA's defaults."""
    if (
        agent.ynnpack
        or jax.default_backend() != "cpu"
        or YNN_FUSIONS in os.environ.get("XLA_FLAGS", "")
        or not _understood()
    ):
        return None
    return {YNN_FUSIONS: ""}
