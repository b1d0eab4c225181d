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
    """Every place's initial state, from the seeds (:func:`seed_array`) and the swept values
    of each place (an empty dict without a sweep).

    The seeds are initialised one after another (``lax.map``), not vmapped. Under a vmap,
    flax's orthogonal initialiser becomes one batched QR factorisation per layer, which
    jaxlib's CPU LAPACK kernel splits into tasks on XLA's intra-op thread pool while blocking
    a pool thread until they finish: two such QRs (actor and critic) can hold both threads of
    a 2-thread pool, each waiting for tasks no free thread will run, and the run sleeps
    forever (``tests/test_hang_guard.py`` checks that no compiled program holds a batched
    LAPACK call). A batch of one runs inline, and the initialisation is a negligible part of
    a run. It also makes seed i's initial state bit-identical in any batch.
    """

    def one(place: tuple[jax.Array, dict[str, jax.Array]]) -> Any:
        seed, values = place
        if not values:
            return agent.init(seed_key(seed), env, n_iterations)
        # The copies too, so that their wrappers' values are the place's.
        own = agent.with_values(values)
        return own.init(seed_key(seed), own.env_copies(own.n_envs), n_iterations)

    return jax.jit(lambda seeds, values: jax.lax.map(one, (seeds, values)))


def segment_program(agent: Any, train_env: Any, num_episode_test: int | None) -> Callable:
    """The per-place segment: iterations ``first`` to ``first + n_iterations`` of the run,
    then an optional evaluation, with the place's swept values (an empty dict without a
    sweep).

    The iteration range is an argument, so one compiled program serves segments of any length
    and runs of any budget. Both are the same for every seed, so the split between the
    agent's warm-up iterations (collection alone, ``agent.warmup``) and its learning
    iterations is two loops, and a warm-up iteration computes no update: a per-seed
    condition would compute both branches under the vmap. An agent's once-only burst of
    updates (``agent.pretrain_updates``) is its first learning iteration's number of update
    calls, an argument of the one compiled iteration: a loop of its own compiled the update a
    second time.

    Divergence is checked (:func:`checked_iteration`, :func:`frozen`): a seed that diverged keeps
    the parameters of its last evaluation before, and its metrics and evaluations read NaN
    from then on.
    """

    def evaluation_copies(agent: Any) -> Any:
        if num_episode_test is None:
            return None
        return agent.env_copies(num_episode_test).for_evaluation()

    eval_env = evaluation_copies(agent)

    def segment(state: RunState, health, seed, values, first, n_iterations):
        agent_here, train_here, eval_here = agent, train_env, eval_env
        if values:  # a sweep: the place's agent and copies (see init_program)
            agent_here = agent.with_values(values)
            train_here = agent_here.env_copies(agent_here.n_envs)
            eval_here = evaluation_copies(agent_here)
        # Jitted, so that the trace that finds its metrics' shapes is the one the loop uses:
        # tracing an iteration twice cost PPO a tenth of its lowering.
        burst = agent_here.pretrain_updates

        def iterate(state, i):
            if not burst:
                return agent_here.iteration(state, train_here)
            # The iteration's index is the same for every seed: under the seeds' vmap the
            # count of update calls stays one number, not a per-seed loop.
            calls = jnp.where(i == agent_here.warmup_iterations, burst, 1)
            return agent_here.iteration(state, train_here, calls)

        iteration = jax.jit(iterate)
        _, metric_shapes = jax.eval_shape(iteration, state, first)
        zeros = jax.tree.map(jnp.zeros_like, metric_shapes)
        names = watched_metrics(metric_shapes)
        learn_step = checked_iteration(iteration, names)
        start_params = state.params

        def warm(_, carry):
            state, sums, health = carry
            state, metrics = agent_here.warmup(state, train_here)
            # Warm-up iterations add to the episode sums alone: the other metrics are means
            # over the learning iterations.
            metrics = zeros | {k: metrics[k] for k in EPISODE_SUMS}
            return state, jax.tree.map(jnp.add, sums, metrics), health

        def learn(i, carry):
            state, sums, health = carry
            state, metrics, health = learn_step(first + i, state, health)
            return state, jax.tree.map(jnp.add, sums, metrics), health

        carry, n_warmup = (state, zeros, health), jnp.int32(0)
        if agent_here.warmup_iterations:
            n_warmup = jnp.clip(agent_here.warmup_iterations - first, 0, n_iterations)
            carry = jax.lax.fori_loop(0, n_warmup, warm, carry)
        state, sums, health = jax.lax.fori_loop(n_warmup, n_iterations, learn, carry)
        state, health = frozen(
            agent_here, state, start_params, health, names, first + n_iterations - 1
        )
        outputs = {"sums": sums, "learning_iterations": n_iterations - n_warmup}
        if eval_here is not None:
            key = evaluation_key(seed, first + n_iterations)
            returns, lengths = run_episodes(
                agent_here, eval_here, state.params, key, state.cursor.env_state
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
