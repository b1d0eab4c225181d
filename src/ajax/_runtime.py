"""Runtime settings applied once at ``import ajax``, before JAX starts its CPU backend.

JAX's CPU backend dispatches computations asynchronously by default. With data-dependent
``while`` loops, which every Ajax run contains (the segment's iteration loop, evaluation
episodes), that mode can stall forever waiting for a result (jax-ml/jax#25861, open); it was
seen here on a 2-core machine, a few times in a hundred runs. Ajax fetches each segment's
outputs before dispatching the next anyway, so synchronous dispatch costs its runs nothing.
``AJAX_CPU_ASYNC_DISPATCH=1`` keeps JAX's default. The setting only takes effect if no JAX
computation ran before ``import ajax``.
"""

from __future__ import annotations

import os

import jax

ASYNC_ENV = "AJAX_CPU_ASYNC_DISPATCH"


def configure_cpu_dispatch() -> bool:
    """Turn JAX's asynchronous CPU dispatch off unless asked to keep it; returns its state."""
    keep = os.environ.get(ASYNC_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
    jax.config.update("jax_cpu_enable_async_dispatch", keep)
    return keep
