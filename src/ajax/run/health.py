"""The divergence guard: each seed's health record, the check of its training metrics at
every iteration, and of its parameters at every segment's end, after which a diverged seed
is frozen at the parameters of its last evaluation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: The environment's episode sums among an iteration's metrics: not checked, and summed
#: over warm-up iterations too.
EPISODE_SUMS = ("episode_return_sum", "episode_length_sum", "episode_count")


def watched_metrics(metric_names: Any) -> list[str]:
    """The names a divergence is reported under: the agent's training metrics (not the
    episode sums, which are the environment's), then ``params``."""
    return [*sorted(k for k in metric_names if k not in EPISODE_SUMS), "params"]


def initial_health(n_seeds: int) -> dict[str, np.ndarray]:
    """Each seed's divergence record: whether it diverged, at which iteration (-1 if not)
    and in which of :func:`watched_metrics` (-1 if not); host arrays, as :func:`seed_array`
    is."""
    return {
        "diverged": np.zeros(n_seeds, bool),
        "iteration": np.full(n_seeds, -1, np.int32),
        "metric": np.full(n_seeds, -1, np.int32),
    }


def _diverged(health: dict[str, jax.Array], bad: jax.Array, i: jax.Array) -> dict:
    """``health`` once the checks ``bad`` (one flag per name of :func:`watched_metrics`)
    were made at iteration ``i``: the first failure is recorded, later ones are not."""
    first = bad.any() & ~health["diverged"]
    return {
        "diverged": health["diverged"] | bad.any(),
        "iteration": jnp.where(first, i, health["iteration"]),
        "metric": jnp.where(first, jnp.argmax(bad).astype(jnp.int32), health["metric"]),
    }


def checked_iteration(iteration: Callable, names: list[str]) -> Callable:
    """``iteration(state, i) -> (state, metrics)`` (an agent's learning iteration ``i``) with its
    training metrics checked: the first that is NaN or infinite marks the seed diverged in
    its health, and a diverged seed's metrics read NaN.

    Only the metrics (scalars) are checked at every iteration, at no measurable cost; the
    parameters are checked, and a diverged seed's reset, once per segment (see
    :func:`segment_program`). A loss is computed from the parameters, so parameters gone
    NaN show in the next iteration's metrics."""

    def checked(i, state, health):
        state, metrics = iteration(state, i)
        bad = jnp.stack([~jnp.isfinite(metrics[k]).all() for k in names[:-1]] + [False])
        health = _diverged(health, bad, i)
        metrics = metrics | {
            k: jnp.where(health["diverged"], jnp.nan, metrics[k])
            for k in names[:-1]
            if jnp.issubdtype(metrics[k].dtype, jnp.inexact)
        }
        return state, metrics, health

    return checked


def frozen(
    agent: Any, state: Any, start_params: Any, health: dict, names: list[str], last: jax.Array
) -> tuple[Any, dict]:
    """The state and health at a segment's end: parameters that are not finite mark the
    seed diverged (at the segment's ``last`` iteration, under ``params``), and a diverged
    seed's parameters go back to ``start_params``, those it began the segment with: the
    parameters of its last evaluation before it diverged. Its updates are no-ops from then
    on, at the cost of one check and one select of the parameters per segment.

    The check is one sum of ``x * 0`` over every leaf, NaN exactly where some parameter is
    not finite (a sum of the parameters themselves could overflow): one reduction compiles
    and runs faster than a check leaf by leaf (PERFORMANCE_REPORT.md, "The divergence
    guard")."""
    params = [x for x in jax.tree.leaves(state.params) if jnp.issubdtype(x.dtype, jnp.inexact)]
    finite = jnp.isfinite(sum(jnp.sum(x * 0, dtype=jnp.float32) for x in params))
    health = _diverged(health, jnp.zeros(len(names), bool).at[-1].set(~finite), last)
    kept = jax.tree.map(
        lambda old, new: jnp.where(health["diverged"], old, new), start_params, state.params
    )
    return agent.with_params(state, kept), health
