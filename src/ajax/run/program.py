"""The run's two programs as pure JAX, for one seed: the initial states, and a segment of
iterations followed by an optional evaluation; and the per-seed summaries of a segment's
outputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from ajax.acting import EnvCursor
from ajax.evaluation import run_episodes
from ajax.run.health import EPISODE_SUMS, checked_iteration, frozen, watched_metrics
from ajax.run.plan import evaluation_key, seed_key


@runtime_checkable
class RunState(Protocol):
    """What the run reads of an agent's state, whatever else it holds: the parameters (which
    evaluation acts with and the divergence guard checks) and the training copies' cursor
    (whose environment state evaluation starts its normalisation statistics from)."""

    params: Any
    cursor: EnvCursor


def init_program(agent: Any, env: Any, n_iterations: int) -> Callable:
    """Every seed's initial state, from the seeds (:func:`seed_array`).

    The seeds are initialised one after another (``lax.map``), not vmapped. Under a vmap,
    flax's orthogonal initialiser becomes one batched QR factorisation per layer, which
    jaxlib's CPU LAPACK kernel splits into tasks on XLA's intra-op thread pool while blocking
    a pool thread until they finish: two such QRs (actor and critic) can hold both threads of
    a 2-thread pool, each waiting for tasks no free thread will run, and the run sleeps
    forever (``tests/test_hang_guard.py`` checks that no compiled program holds a batched
    LAPACK call). A batch of one runs inline, and the initialisation is a negligible part of
    a run. It also makes seed i's initial state bit-identical in any batch.
    """
    return jax.jit(
        lambda seeds: jax.lax.map(lambda s: agent.init(seed_key(s), env, n_iterations), seeds)
    )


def segment_program(agent: Any, train_env: Any, eval_env: Any | None) -> Callable:
    """The per-seed segment: iterations ``first`` to ``first + n_iterations`` of the run, then
    an optional evaluation.

    The iteration range is an argument, so one compiled program serves segments of any length
    and runs of any budget. Both are the same for every seed, so the split between the
    agent's warm-up iterations (collection alone, ``agent.warmup``) and its learning
    iterations is two loops, and a warm-up iteration computes no update: a per-seed
    condition would compute both branches under the vmap. An agent's once-only burst of
    updates (``agent.pretrain``) runs between them, in the segment that holds the first
    learning iteration.

    Divergence is checked (:func:`checked_iteration`, :func:`frozen`): a seed that diverged keeps
    the parameters of its last evaluation before, and its metrics and evaluations read NaN
    from then on.
    """

    # Jitted, so that the trace that finds its metrics' shapes is the one the loop uses:
    # tracing an iteration twice cost PPO a tenth of its lowering.
    iteration = jax.jit(lambda state: agent.iteration(state, train_env))

    def segment(state: RunState, health, seed, first, n_iterations):
        _, metric_shapes = jax.eval_shape(iteration, state)
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metric_shapes)
        names = watched_metrics(metric_shapes)
        learn_step = checked_iteration(iteration, names)
        start_params = state.params

        def warm(_, carry):
            state, sums, health = carry
            state, metrics = agent.warmup(state, train_env)
            # Warm-up iterations add to the episode sums alone: the other metrics are means
            # over the learning iterations.
            metrics = zeros | {k: metrics[k] for k in EPISODE_SUMS}
            return state, jax.tree.map(jnp.add, sums, metrics), health

        def learn(i, carry):
            state, sums, health = carry
            state, metrics, health = learn_step(first + i, state, health)
            return state, jax.tree.map(jnp.add, sums, metrics), health

        carry, n_warmup = (state, zeros, health), jnp.int32(0)
        if agent.warmup_iterations:
            n_warmup = jnp.clip(agent.warmup_iterations - first, 0, n_iterations)
            carry = jax.lax.fori_loop(0, n_warmup, warm, carry)
        if agent.pretrain_updates:
            # The same for every seed, so under the seeds' vmap this stays a branch.
            due = (first + n_warmup == agent.warmup_iterations) & (n_warmup < n_iterations)
            state = jax.lax.cond(due, lambda s: agent.pretrain(s, train_env), lambda s: s, carry[0])
            carry = (state, *carry[1:])
        state, sums, health = jax.lax.fori_loop(n_warmup, n_iterations, learn, carry)
        state, health = frozen(agent, state, start_params, health, names, first + n_iterations - 1)
        outputs = {"sums": sums, "learning_iterations": n_iterations - n_warmup}
        if eval_env is not None:
            key = evaluation_key(seed, first + n_iterations)
            returns, lengths = run_episodes(
                agent, eval_env, state.params, key, state.cursor.env_state
            )
            nan_if_diverged = lambda x: jnp.where(health["diverged"], jnp.nan, x.mean())  # noqa: E731
            outputs["episode_return"] = nan_if_diverged(returns)
            outputs["episode_length"] = nan_if_diverged(lengths)
        return state, health, outputs

    return segment


def summaries(outputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Per-seed scalars of one segment: evaluation means, training-metric means over its
    learning iterations (NaN if it had none), and the mean return of training episodes that
    ended in the segment (NaN if none did)."""
    sums = outputs["sums"]
    count = np.asarray(sums["episode_count"], np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        summary = {
            "train/episode_return": np.where(count > 0, sums["episode_return_sum"] / count, np.nan),
            "train/episode_length": np.where(count > 0, sums["episode_length_sum"] / count, np.nan),
        }
    learning = np.asarray(outputs["learning_iterations"], np.float64)
    for key, value in sums.items():
        if key not in EPISODE_SUMS:
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.asarray(value, np.float64) / learning
            summary[f"train/{key}"] = np.where(learning > 0, mean, np.nan)
    for key in ("episode_return", "episode_length"):
        if key in outputs:
            summary[key] = np.asarray(outputs[key], np.float64)
    return summary
