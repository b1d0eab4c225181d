"""The run: two compiled programs, vmapped over seeds, executed in segments.

``train`` validates its inputs, builds the environment copies, and compiles two programs once:
``init`` (every seed's initial state) and ``segment`` (a loop of agent iterations whose count
is an argument, then, with a logging config, an evaluation). One compiled segment serves every
segment of the run, the shorter last one too. Each segment's state is donated to the next.

With a logging config the run stops at every ``log_frequency`` boundary (rounded down to whole
iterations); the segment's evaluation and training metrics come back to Python and go to the
writer thread, which writes them while the next segment runs. No host callback is compiled
in, so a logged run is served by the compile cache like any other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ajax import _program_cache
from ajax._devices import seed_mesh
from ajax._version import __version__
from ajax._xla import compiler_options, unrolled_threefry, weight_gradients_for
from ajax.agent_registry import agent_from_config
from ajax.buffers import EpisodeStore, ReplayBuffer
from ajax.checkpoint import FORMAT as CHECKPOINT_FORMAT
from ajax.checkpoint import (
    Checkpoint,
    CheckpointConfig,
    Checkpointer,
    checkpoint_directory,
    latest_checkpoint,
)
from ajax.envs.core import SEED_AXIS
from ajax.evaluation import run_episodes
from ajax.logging import LoggingConfig, LogWriter, run_directory
from ajax.logging.sinks import wandb_mode
from ajax.memory import available_bytes, check_fits, human
from ajax.result import TrainResult, env_class, env_spaces, environment_for
from ajax.watchdog import CallInterrupted, Watchdog, call_watched, dump_stacks, hang_error

Progress = Callable[[int, int, dict[str, float]], None]
_EPISODE_SUMS = ("episode_return_sum", "episode_length_sum", "episode_count")


def _check_positive_int(name: str, value: Any, example: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}; e.g. {example}.")


def seeds_of(seed: int | Sequence[int]) -> list[int]:
    """The list of seeds, validated: ``seed`` is one int or a non-empty list of them."""
    seeds = [seed] if isinstance(seed, int | np.integer) else list(seed)
    if not seeds:
        raise ValueError("seed is an empty list; give an int or a list such as seed=[0, 1, 2].")
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int | np.integer) or not 0 <= s < 2**32:
            raise ValueError(f"seeds must be integers in [0, 2**32), got {s!r}.")
    return [int(s) for s in seeds]


def seed_array(seeds: list[int]) -> np.ndarray:
    """The seeds as the run's programs take them, one uint32 each, on the host: each program
    makes its seed's key itself (:func:`seed_key`). Keys made outside the programs cost a
    fresh process a handful of tiny eager programs, each compiled on its own (PERFORMANCE_
    REPORT.md, "Nothing compiled eagerly")."""
    return np.asarray(seeds, np.uint32)


def seed_key(seed: jax.Array) -> jax.Array:
    """Inside a program, the PRNG key of ``seed`` (a uint32 of :func:`seed_array`): the key
    ``jax.random.PRNGKey(seed)`` gives, so seed i's key, and its run, are the same in any
    batch."""
    return jax.random.PRNGKey(seed)


def evaluation_key(seed: jax.Array, iteration: jax.Array) -> jax.Array:
    """The key of ``seed``'s evaluation after ``iteration`` iterations: it depends on nothing
    else, so an evaluation at a given step draws the same episodes whatever the run's
    segments (its ``log_frequency``), and a resumed run draws what the uninterrupted one
    did."""
    return jax.random.fold_in(jax.random.fold_in(seed_key(seed), 1), iteration)


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """How a budget splits into iterations and segments."""

    steps_per_iteration: int
    n_iterations: int
    iterations_per_segment: int

    @property
    def segment_lengths(self) -> list[int]:
        full, rest = divmod(self.n_iterations, self.iterations_per_segment)
        return [self.iterations_per_segment] * full + ([rest] if rest else [])


def plan_run(agent: Any, n_timesteps: int, logging_config: LoggingConfig | None) -> RunPlan:
    _check_positive_int("n_timesteps", n_timesteps, "n_timesteps=100_000")
    per_iteration = agent.steps_per_iteration
    if n_timesteps < per_iteration:
        raise ValueError(
            f"n_timesteps={n_timesteps} is less than one iteration of {agent.name}, which takes "
            f"{per_iteration} steps (n_envs={agent.n_envs} copies x its rollout). Raise "
            f"n_timesteps to at least {per_iteration}, or lower n_envs or the rollout length."
        )
    n_iterations = n_timesteps // per_iteration
    per_segment = n_iterations
    if logging_config is not None:
        per_segment = max(1, min(n_iterations, logging_config.log_frequency // per_iteration))
    return RunPlan(per_iteration, n_iterations, per_segment)


def state_bytes(state_shape: Any) -> tuple[int, int]:
    """Bytes of a (shape-only) state, and of the stores (replay buffers, episode stores)
    within it."""
    nbytes = lambda tree: sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree))  # noqa: E731
    stores = (ReplayBuffer, EpisodeStore)
    buffers = [
        node
        for node in jax.tree.leaves(state_shape, is_leaf=lambda n: isinstance(n, stores))
        if isinstance(node, stores)
    ]
    return nbytes(state_shape), sum(nbytes(b) for b in buffers)


def check_memory(state_shape: Any, n_seeds: int, available: int | None = None) -> None:
    """Refuse, before compiling, a run whose state cannot fit the device's memory.

    The estimate is the whole training state of every seed (parameters, optimiser states,
    environment copies, replay buffers): the state is donated from one segment to the next,
    so it is held once.
    """
    total, buffers = state_bytes(state_shape)
    detail = f"{human(total / n_seeds)} per seed"
    if buffers:
        detail += f", of which {human(buffers / n_seeds)} replay buffer"
    check_fits(total, n_seeds, detail, available_bytes() if available is None else available)


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


def watched_metrics(metric_names: Any) -> list[str]:
    """The names a divergence is reported under: the agent's training metrics (not the
    episode sums, which are the environment's), then ``params``."""
    return [*sorted(k for k in metric_names if k not in _EPISODE_SUMS), "params"]


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


def _checked(iteration: Callable, names: list[str]) -> Callable:
    """``iteration(state) -> (state, metrics)`` (an agent's learning iteration) with its
    training metrics checked: the first that is NaN or infinite marks the seed diverged in
    its health, and a diverged seed's metrics read NaN.

    Only the metrics (scalars) are checked at every iteration, at no measurable cost; the
    parameters are checked, and a diverged seed's reset, once per segment (see
    :func:`_segment_program`). A loss is computed from the parameters, so parameters gone
    NaN show in the next iteration's metrics."""

    def checked(i, state, health):
        state, metrics = iteration(state)
        bad = jnp.stack([~jnp.isfinite(metrics[k]).all() for k in names[:-1]] + [False])
        health = _diverged(health, bad, i)
        metrics = metrics | {
            k: jnp.where(health["diverged"], jnp.nan, metrics[k])
            for k in names[:-1]
            if jnp.issubdtype(metrics[k].dtype, jnp.inexact)
        }
        return state, metrics, health

    return checked


def _frozen(
    agent: Any, state: Any, start_params: Any, health: dict, names: list[str], last: jax.Array
) -> tuple[Any, dict]:
    """The state and health at a segment's end: parameters that are not finite mark the
    seed diverged (at the segment's ``last`` iteration, under ``params``), and a diverged
    seed's parameters go back to ``start_params``, those it began the segment with: the
    parameters of its last evaluation before it diverged. Its updates are no-ops from then
    on, at the cost of one check and one select of the parameters per segment.

    The check is one sum of ``x * 0`` over every leaf, NaN exactly where some parameter is
    not finite (a sum of the parameters themselves could overflow). PPO's ``train`` compiled
    as fast with it as with a check over every parameter concatenated (4.92-6.27 s against
    4.98-6.13), which had taken 15% less CPU time to compile than ``isfinite(x).all()`` leaf
    by leaf; the concatenation ran AVG 8% slower (PERFORMANCE_REPORT.md, "One reduction for
    the parameters' check", and the fourth stop's section)."""
    params = [x for x in jax.tree.leaves(state.params) if jnp.issubdtype(x.dtype, jnp.inexact)]
    finite = jnp.isfinite(sum(jnp.sum(x * 0, dtype=jnp.float32) for x in params))
    health = _diverged(health, jnp.zeros(len(names), bool).at[-1].set(~finite), last)
    kept = jax.tree.map(
        lambda old, new: jnp.where(health["diverged"], old, new), start_params, state.params
    )
    return agent.with_params(state, kept), health


def _segment_program(agent: Any, train_env: Any, eval_env: Any | None) -> Callable:
    """The per-seed segment: iterations ``first`` to ``first + n_iterations`` of the run, then
    an optional evaluation.

    The iteration range is an argument, so one compiled program serves segments of any length
    and runs of any budget. (It was compiled in for a while, blamed for stalls that were the
    batched-QR deadlock of ``init_program``: 200 stress runs with the count as an argument
    and that deadlock removed finished, and the argument measured faster, see
    PERFORMANCE_REPORT.md.) Both are the same for every seed, so the split between the
    agent's warm-up iterations (collection alone, ``agent.warmup``) and its learning
    iterations is two loops, and a warm-up iteration computes no update: a per-seed
    condition would compute both branches under the vmap.

    Divergence is checked (:func:`_checked`, :func:`_frozen`): a seed that diverged keeps
    the parameters of its last evaluation before, and its metrics and evaluations read NaN
    from then on.
    """

    # Jitted, so that the trace that finds its metrics' shapes is the one the loop uses:
    # tracing an iteration twice cost PPO a tenth of its lowering.
    iteration = jax.jit(lambda state: agent.iteration(state, train_env))

    def segment(state, health, seed, first, n_iterations):
        _, metric_shapes = jax.eval_shape(iteration, state)
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), metric_shapes)
        names = watched_metrics(metric_shapes)
        learn_step = _checked(iteration, names)
        start_params = state.params

        def warm(_, carry):
            state, sums, health = carry
            state, metrics = agent.warmup(state, train_env)
            # Warm-up iterations add to the episode sums alone: the other metrics are means
            # over the learning iterations.
            metrics = zeros | {k: metrics[k] for k in _EPISODE_SUMS}
            return state, jax.tree.map(jnp.add, sums, metrics), health

        def learn(i, carry):
            state, sums, health = carry
            state, metrics, health = learn_step(first + i, state, health)
            return state, jax.tree.map(jnp.add, sums, metrics), health

        carry, n_warmup = (state, zeros, health), jnp.int32(0)
        if agent.warmup_iterations:
            n_warmup = jnp.clip(agent.warmup_iterations - first, 0, n_iterations)
            carry = jax.lax.fori_loop(0, n_warmup, warm, carry)
        state, sums, health = jax.lax.fori_loop(n_warmup, n_iterations, learn, carry)
        state, health = _frozen(agent, state, start_params, health, names, first + n_iterations - 1)
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


def _summaries(outputs: dict[str, Any]) -> dict[str, np.ndarray]:
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
        if key not in _EPISODE_SUMS:
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.asarray(value, np.float64) / learning
            summary[f"train/{key}"] = np.where(learning > 0, mean, np.nan)
    for key in ("episode_return", "episode_length"):
        if key in outputs:
            summary[key] = np.asarray(outputs[key], np.float64)
    return summary


@dataclasses.dataclass(frozen=True)
class RunPrograms:
    """The lowered programs of a run and the inputs they take."""

    #: The seeds (:func:`seed_array`), then copies of the first where they do not fill every
    #: device's share (:attr:`places`).
    seeds: np.ndarray
    #: Every seed's divergence record at the start (:func:`initial_health`).
    health: dict[str, np.ndarray]
    #: What a divergence is reported under (:func:`watched_metrics`).
    metric_names: list[str]
    #: The init program, lowered (:attr:`init`): on another thread when :func:`lower_run`
    #: compiles it there.
    init_lowering: Future
    #: ``segment(state, health, seeds, first, n_iterations) -> (state, health,
    #: outputs)``: iterations ``first`` to ``first + n_iterations``, any number of them.
    segment: jax.stages.Lowered
    #: ``init`` compiled (with the options of a program that runs once) on another thread,
    #: when :func:`lower_run` was asked to; else None.
    init_compiled: Future | None = None

    @property
    def init(self) -> jax.stages.Lowered:
        return self.init_lowering.result()

    @property
    def places(self) -> int:
        """The length of the programs' seed axis: the run's seeds, then copies of its first
        seed where they do not fill every device's share."""
        return len(self.seeds)


def _seeds_only(tree: Any, n_seeds: int) -> Any:
    """``tree`` (leaves with the programs' seed axis first) without the places after the
    run's ``n_seeds`` seeds."""
    return jax.tree.map(lambda x: x[:n_seeds], tree)


def _with_places(tree: Any, n_places: int) -> Any:
    """``tree`` (leaves with the run's seeds first) with the places after them filled by
    copies of its first seed, as :func:`lower_run` fills them."""
    n_seeds = len(jax.tree.leaves(tree)[0])
    rows = np.r_[np.arange(n_seeds), np.zeros(n_places - n_seeds, int)]
    return jax.tree.map(lambda x: x[rows], tree)


def lowered_init(
    lower: Callable[[], jax.stages.Lowered], options: Any, compile_init: bool
) -> tuple[Future, Future | None]:
    """The init program ``lower()`` gives, lowered in this thread; or, with ``compile_init``,
    lowered and then compiled with ``options`` on one thread of its own, meant to run while
    this one compiles the segment. Futures of the lowered and the compiled program (None
    without ``compile_init``)."""
    if not compile_init:
        lowering = Future()
        lowering.set_result(lower())
        return lowering, None
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ajax-compile")
    try:
        lowering = pool.submit(lower)
        # The pool's one thread takes its work in order: the lowering is done by then.
        return lowering, pool.submit(lambda: lowering.result().compile(options))
    finally:
        pool.shutdown(wait=False)


def lower_run(
    agent: Any,
    seeds: list[int],
    plan: RunPlan,
    num_episode_test: int,
    evaluate: bool,
    compile_init: bool = False,
) -> RunPrograms:
    """Lower the run's two programs, through ``jax.export`` (:mod:`ajax._program_cache`):
    a relaunch that finds them stored skips tracing. Refuses, before tracing the segment, a
    run whose state cannot fit in memory. The segment's Threefry is lowered unrolled
    (:func:`ajax._xla.unrolled_threefry`); the init's is not, since it runs once and is
    compiled for a short compile (JAX's rolled loop makes a third fewer instructions). The
    segment's layers take their weight gradients in the form of the library that computes the
    agent's products (:func:`ajax._xla.weight_gradients_for`).

    The seeds are split over the devices :func:`ajax._devices.seed_mesh` gives: the programs
    are exported for one device's share of them, and every device runs that program on its
    own share (``shard_map``), with nothing exchanged between devices. Where the seeds do not
    fill the devices' shares, the places left run copies of the first seed (the programs'
    seed axis is :attr:`RunPrograms.places` long; :func:`_run` drops the copies).

    The segment is lowered first, from the init's traced shapes. With ``compile_init``, the
    init is then lowered and compiled on another thread, meant to run while this one
    compiles the segment: lowering is Python, holding the interpreter's lock, and compiling
    is XLA's C++, which releases it. The init's lowering is the first of a process to meet a
    LAPACK call (the orthogonal initialisers' QR), whose set-up imports SciPy's LAPACK
    bindings: 0.3 s of a fresh process, now beside the segment's compile. The segment is
    compiled on the calling thread: compiled on the other, a fresh process's first run of
    TD3 executed 6% slower (PERFORMANCE_REPORT.md, "Nothing compiled eagerly")."""
    mesh, share = seed_mesh(len(seeds))
    places = share * (1 if mesh is None else mesh.size)
    run_seeds = _with_places(seed_array(seeds), places)
    key = _program_cache.run_key(agent, share, num_episode_test if evaluate else None)
    train_env = agent.env_copies(agent.n_envs)
    init_key = _program_cache.key_with(key, "init", plan.n_iterations)
    init = _program_cache.load(init_key)
    init_fn = init_program(agent, train_env, plan.n_iterations)
    share_shape = jax.eval_shape(init_fn, run_seeds[:share]) if init is None else init.out_shape
    # The devices of a CPU share its memory; an accelerator holds its own share.
    held = places if jax.default_backend() == "cpu" else share
    check_memory(_with_seeds(share_shape, held), held)

    def export_segment():
        eval_env = agent.env_copies(num_episode_test).for_evaluation() if evaluate else None
        segment = jax.vmap(
            _segment_program(agent, train_env, eval_env),
            in_axes=(0, 0, 0, None, None),
            axis_name=SEED_AXIS,
        )
        args = (share_shape, initial_health(share), run_seeds[:share], np.int32(0), np.int32(0))
        with unrolled_threefry(), weight_gradients_for(agent):
            return _program_cache.export(segment, *args)

    health = initial_health(places)
    segment = _program_cache.cached(key, export_segment)
    state_shape = _with_seeds(share_shape, places, mesh)
    segment_args = (state_shape, health, run_seeds, np.int32(0), np.int32(0))
    segment_lowered = _on_devices(segment, mesh, seeded=3, whole=2, donate_argnums=0).lower(
        *segment_args
    )

    def lower_init() -> jax.stages.Lowered:
        # After the segment's export, outside its unrolled-Threefry block: the init keeps
        # JAX's rolled loop.
        program = init
        if program is None:
            program = _program_cache.export(init_fn, run_seeds[:share])
            _program_cache.store(init_key, program)
        return _on_devices(program, mesh, seeded=1).lower(run_seeds)

    init_lowering, init_compiled = lowered_init(
        lower_init, compiler_options(agent, runs_once=True), compile_init
    )
    return RunPrograms(
        run_seeds,
        health,
        watched_metrics(segment.out_shape[2]["sums"]),
        init_lowering,
        segment_lowered,
        init_compiled,
    )


def _with_seeds(shapes: Any, n_seeds: int, mesh: Mesh | None = None) -> Any:
    """``shapes`` (leaves with a leading seed axis) for ``n_seeds`` seeds, split over
    ``mesh``'s devices along that axis if given."""
    sharding = None if mesh is None else NamedSharding(mesh, P(SEED_AXIS))
    return jax.tree.map(
        lambda s: jax.ShapeDtypeStruct((n_seeds, *s.shape[1:]), s.dtype, sharding=sharding),
        shapes,
    )


def _on_devices(
    program: Callable,
    mesh: Mesh | None,
    seeded: int,
    whole: int = 0,
    donate_argnums: int | tuple = (),
) -> Callable:
    """``program``, written for one device's share of the seeds, jitted over all of them:
    each device of ``mesh`` runs it on its share of the first ``seeded`` arguments (and of
    every output), and takes the ``whole`` arguments after them as they are; without a
    mesh, the program as it is.

    The outputs' sharding is stated, not left to JAX: it gives a zero-size output (MJX's
    empty ``Data`` fields) a replicated sharding otherwise, which the next program, compiled
    for its share of the seeds, refuses."""
    if mesh is None:
        return jax.jit(program, donate_argnums=donate_argnums)
    split, whole_spec = P(SEED_AXIS), P()
    specs = (split,) * seeded + (whole_spec,) * whole
    program = jax.shard_map(program, mesh=mesh, in_specs=specs, out_specs=split)
    return jax.jit(
        program,
        in_shardings=tuple(NamedSharding(mesh, spec) for spec in specs),
        out_shardings=NamedSharding(mesh, split),
        donate_argnums=donate_argnums,
    )


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM stopped a run. Every row it logged was written first; the
    message says how far it got and where the rows are. A ``KeyboardInterrupt``, so code
    that catches Ctrl-C catches it too."""


def _keyboard_interrupt(signal_name: str) -> KeyboardInterrupt:
    """The interrupt a signal raises: Ctrl-C's says nothing more, as Python's own; others
    name their signal."""
    return KeyboardInterrupt("" if signal_name == "SIGINT" else signal_name)


def _shown(interrupt: KeyboardInterrupt) -> str:
    """The signal an interrupt came from, as the run's messages name it."""
    return str(interrupt) or "Ctrl-C"


@contextlib.contextmanager
def _interrupts() -> Iterator[list[str]]:
    """Within the block, SIGTERM (a scheduler's pre-emption, ``kill``) interrupts the main
    thread as Ctrl-C does, so that the run's cleanup runs; elsewhere it is left alone.

    Both signals are also recorded in the list the block gets, which the run checks after
    every segment: a ``KeyboardInterrupt`` raised while the main thread is inside native
    code can be cleared there (a run under load once went on to its end after Ctrl-C), and
    the record still stops the run. SIGINT is taken over only from Python's default handler,
    so a handler of the user's, or SIGINT ignored, is kept.
    """
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    received: list[str] = []

    def interrupt(signum: int, frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        raise _keyboard_interrupt(received[-1])

    signals = [signal.SIGTERM]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signals.append(signal.SIGINT)
    previous = {s: signal.signal(s, interrupt) for s in signals}
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def train(
    agent: Any,
    seed: int | Sequence[int] = 0,
    n_timesteps: int = 100_000,
    num_episode_test: int = 10,
    logging_config: LoggingConfig | None = None,
    progress: Progress | None = None,
    watchdog: Watchdog | None = None,
    checkpoint: CheckpointConfig | None = None,
) -> TrainResult:
    """Train ``agent`` once per seed, all seeds in one vmapped program.

    Args:
        agent: an Ajax agent (its environment, copies and hyperparameters).
        seed: one seed or a list; results gain a leading seed axis either way.
        n_timesteps: environment steps per seed, over all copies (rounded down to whole
            iterations).
        num_episode_test: deterministic episodes per evaluation (with a logging config).
        logging_config: evaluate and log every ``log_frequency`` steps; None compiles no
            evaluation at all.
        progress: called after each segment with (timesteps done, total, latest summary).
        watchdog: how long a compiled program may run before the run is declared hung and
            stopped with :class:`ajax.RunHungError`; ``Watchdog()`` (20 times the median
            segment, at least 10 minutes) when None.
        checkpoint: save the whole training state every ``checkpoint.every`` segments, which
            :func:`ajax.resume` continues exactly (needs a logging config, whose
            ``log_frequency`` ends each segment).
    """
    seeds = seeds_of(seed)
    _check_positive_int("num_episode_test", num_episode_test, "num_episode_test=10")
    if logging_config is not None and not isinstance(logging_config, LoggingConfig):
        raise TypeError("logging_config must be an ajax.LoggingConfig or None.")
    _check_watchdog(watchdog)
    if checkpoint is not None and not isinstance(checkpoint, CheckpointConfig):
        raise TypeError("checkpoint must be an ajax.CheckpointConfig or None.")
    if checkpoint is not None and logging_config is None:
        raise ValueError(
            "Checkpoints are saved between segments, and without a logging config the whole "
            "run is one segment. Give a logging_config: its log_frequency ends each segment, "
            "and CheckpointConfig.every counts them."
        )
    plan = plan_run(agent, n_timesteps, logging_config)
    _check_wandb(logging_config)
    directory = None
    if logging_config is not None:
        directory = run_directory(logging_config, f"{agent.name}_{agent.env_id.replace('/', '-')}")
    run_config = {
        "agent": agent.name,
        "env_id": agent.env_id,
        "env_registered": agent.registered_env_id is not None,
        "env_class": env_class(agent.env),
        "env_spaces": env_spaces(agent.env),
        "env_params": agent.env_params,
        "n_envs": agent.n_envs,
        "hyperparameters": agent.hyperparameters(),
        "seeds": seeds,
        "n_timesteps": n_timesteps,
        "num_episode_test": num_episode_test,
        "logging": None if logging_config is None else dataclasses.asdict(logging_config),
        "log_dir": None if directory is None else str(directory.absolute()),
        "checkpoint": None,
    }
    if checkpoint is not None:
        checkpoint_dir = checkpoint_directory(checkpoint, directory)
        run_config["checkpoint"] = {"every": checkpoint.every, "keep": checkpoint.keep}
        run_config["checkpoint"]["dir"] = str(checkpoint_dir)
    return _run(agent, plan, _comparable(run_config), progress, watchdog, None)


def _check_wandb(logging_config: LoggingConfig | None) -> None:
    """Refuses, before anything compiles, a W&B run that could not start (see
    :func:`ajax.logging.sinks.wandb_mode`)."""
    if logging_config is not None and logging_config.wandb:
        wandb_mode(logging_config)


def _check_watchdog(watchdog: Any) -> None:
    if watchdog is not None and not isinstance(watchdog, Watchdog):
        raise TypeError("watchdog must be an ajax.Watchdog or None.")


def _comparable(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value, default=str))


def resume(
    path: str | Path,
    agent: Any | None = None,
    progress: Progress | None = None,
    watchdog: Watchdog | None = None,
    env: Any | None = None,
) -> TrainResult:
    """Continue a run from its latest complete checkpoint, and return what ``train`` would
    have: the final state is the uninterrupted run's, bit for bit, and the run directory's
    logs are rewritten from the checkpoint, then continued, with no row missing or twice.

    Args:
        path: the run directory, or the checkpoint directory (``CheckpointConfig.dir``).
        agent: the agent, if given; it must be the checkpointed run's (name, environment,
            copies, hyperparameters). By default the agent is rebuilt from the checkpoint.
        progress: as for :func:`train`.
        watchdog: as for :func:`train`.
        env: the environment, needed only for a run on an environment object rather than a
            registered id (as for :func:`ajax.load`); its spaces must be those of the run.

    Refuses a checkpoint written by another version of Ajax, or that does not fit ``agent``.
    """
    _check_watchdog(watchdog)
    if agent is not None and env is not None:
        raise ValueError("Pass resume() an agent or an env, not both: the agent has its env.")
    found = latest_checkpoint(path)
    meta = found.meta
    written_by = meta.get("ajax_version")
    if meta.get("format") != CHECKPOINT_FORMAT or written_by != __version__:
        raise ValueError(
            f"The checkpoint in {found.directory} was written by Ajax {written_by} in "
            f"checkpoint format {meta.get('format')}; this is Ajax {__version__}, which reads "
            f"format {CHECKPOINT_FORMAT} and whose programs may compute differently, so it "
            "cannot continue the run exactly. Resume it with the Ajax that wrote it (version "
            f"{written_by}, checkpoint format {meta.get('format')})."
        )
    config = meta["run_config"]
    if agent is None:
        how = f"ajax.resume({str(path)!r}, env=...)"
        agent = agent_from_config(config, environment_for(config, env, found.directory, how))
    mine = {
        "agent": agent.name,
        "env_id": agent.env_id,
        "env_params": agent.env_params,
        "n_envs": agent.n_envs,
        "hyperparameters": agent.hyperparameters(),
    }
    differ = [k for k, v in mine.items() if _comparable(v) != _comparable(config[k])]
    if differ:
        detail = "; ".join(f"{k}: checkpoint {config[k]!r}, given {mine[k]!r}" for k in differ)
        raise ValueError(
            f"The checkpoint in {found.directory} is of another run ({detail}). Resume it "
            "with its own agent, or leave agent out to rebuild it from the checkpoint."
        )
    config = config | {"checkpoint": config["checkpoint"] | {"dir": str(found.directory)}}
    logging_config = LoggingConfig(**config["logging"])
    plan = plan_run(agent, config["n_timesteps"], logging_config)
    _check_wandb(logging_config)
    return _run(agent, plan, config, progress, watchdog, found)


def _divergences(
    health: dict[str, np.ndarray], seeds: list[int], names: list[str], plan: RunPlan
) -> list[dict[str, Any]]:
    """The seeds that diverged: each with the step of the iteration that diverged (its last
    step) and the first metric that was not finite there (``params`` for the parameters)."""
    return [
        {
            "seed": seed,
            "timestep": int(health["iteration"][i] + 1) * plan.steps_per_iteration,
            "metric": names[int(health["metric"][i])],
        }
        for i, seed in enumerate(seeds)
        if health["diverged"][i]
    ]


def _run(
    agent: Any,
    plan: RunPlan,
    run_config: dict[str, Any],
    progress: Progress | None,
    watchdog: Watchdog | None,
    start: Checkpoint | None,
) -> TrainResult:
    """The run ``run_config`` describes, from its start or from checkpoint ``start``."""
    seeds, num_episode_test = run_config["seeds"], run_config["num_episode_test"]
    logging = run_config["logging"]
    watchdog = watchdog or Watchdog()
    history: list[tuple[int, dict[str, np.ndarray]]] = []
    if start is not None:
        history = [
            (t, {k: np.asarray(v, np.float64) for k, v in summary.items()})
            for t, summary in start.meta["history"]
        ]
    rows = lambda timestep, summary: [  # noqa: E731
        {"timestep": timestep, "seed": s} | {k: float(v[i]) for k, v in summary.items()}
        for i, s in enumerate(seeds)
    ]

    checkpointer = None
    if run_config["checkpoint"] is not None:
        checkpointer = Checkpointer(
            Path(run_config["checkpoint"]["dir"]),
            CheckpointConfig(run_config["checkpoint"]["every"], run_config["checkpoint"]["keep"]),
            fresh=start is None,
        )
    writer = None
    if logging is not None:
        # Before compiling: a log directory that cannot be written fails the run at once. A
        # resumed run's logs are rewritten from the checkpoint's summaries.
        try:
            writer = LogWriter(
                LoggingConfig(**logging),
                Path(run_config["log_dir"]),
                run_config,
                [row for t, summary in history for row in rows(t, summary)],
            )
        except BaseException:
            if checkpointer is not None:
                checkpointer.close()
            raise

    total = plan.n_iterations * plan.steps_per_iteration

    def record(timestep: int, outputs: Any) -> None:
        """Keep a finished segment's summary, hand its rows to the writer, report progress."""
        summary = _summaries(_seeds_only(jax.device_get(outputs), len(seeds)))
        history.append((timestep, summary))
        if writer is not None:
            writer.write(rows(timestep, summary))
            writer.check()  # a sink that has failed stops the run; its rows are kept
        if progress is not None:
            with warnings.catch_warnings():
                # A metric with no value yet (every seed NaN) is reported as NaN.
                warnings.simplefilter("ignore", RuntimeWarning)
                means = {k: float(np.nanmean(v)) for k, v in summary.items()}
            progress(timestep, total, means)

    def save(segments_done: int, state: Any) -> None:
        checkpointer.save(
            segments_done,
            _seeds_only(jax.device_get(state), len(seeds)),
            {
                "run_config": run_config,
                "history": [[t, {k: v.tolist() for k, v in s.items()}] for t, s in history],
            },
        )

    def watched(program: Callable, args: tuple, what: str, durations: list[float]) -> Any:
        """``program(*args)``, computed, its time appended to ``durations`` (the earlier
        programs of its kind, which set its limit); stops the run if it hangs (see
        ajax.watchdog)."""
        limit_s = watchdog.limit_s(durations)
        started = time.perf_counter()
        finished, result = call_watched(program, *args, limit_s=limit_s)
        if not finished:
            stacks = dump_stacks(None if writer is None else writer.directory)
            raise hang_error(what, time.perf_counter() - started, limit_s, stacks)
        durations.append(time.perf_counter() - started)
        return result

    def finish(interrupt: CallInterrupted, what: str, durations: list[float]) -> Any:
        """The result of the call ``interrupt`` arrived in, once it finishes. XLA cannot stop
        a program, and one left running that finished while the interpreter exited aborted
        the process ("FATAL: exception not rethrown": its thread was unwound on its way back
        into Python; docs/reliability.md). A second interrupt abandons it."""
        sys.stderr.write(
            f"Ajax: {_shown(interrupt)}: stopping once {what} finishes; "
            "a second Ctrl-C abandons it.\n"
        )
        finished, result = interrupt.call.wait(watchdog.limit_s(durations))
        if not finished:
            raise interrupt
        return result

    lengths = plan.segment_lengths
    segments_done = 0 if start is None else start.step
    saved = segments_done
    with _interrupts() as received:
        try:
            start_s = time.perf_counter()
            # A resumed run starts from its checkpoint, and compiles no initialisation.
            programs = lower_run(
                agent, seeds, plan, num_episode_test, logging is not None, start is None
            )
            segment = programs.segment.compile(compiler_options(agent))
            init = None if start is not None else programs.init_compiled.result()
            compile_s = time.perf_counter() - start_s

            run_start = time.perf_counter()
            if start is None:
                what = "the seeds' initialisation"
                try:
                    state = watched(init, (programs.seeds,), what, [])
                except CallInterrupted as interrupt:
                    finish(interrupt, what, [])
                    raise
                health = programs.health
            else:
                template = (
                    _with_seeds(programs.init.out_info, len(seeds)),
                    _seeds_only(programs.health, len(seeds)),
                )
                state, health = _with_places(start.state(template), programs.places)
                state, health = jax.device_put((state, health))
            durations: list[float] = []
            for index in range(segments_done, len(lengths)):
                iterations_done = sum(lengths[:index])
                first = iterations_done * plan.steps_per_iteration
                last = (iterations_done + lengths[index]) * plan.steps_per_iteration
                what = f"segment {index + 1} of {len(lengths)} (timesteps {first} to {last})"
                args = (
                    state,
                    health,
                    programs.seeds,
                    np.int32(iterations_done),
                    np.int32(lengths[index]),
                )
                try:
                    state, health, outputs = watched(segment, args, what, durations)
                except CallInterrupted as interrupt:
                    # The segment in flight finishes, and its rows are written and it is
                    # checkpointed before the run stops.
                    state, health, outputs = finish(interrupt, what, durations)
                    record(last, outputs)
                    if checkpointer is not None:
                        save(index + 1, (state, health))
                        saved = index + 1
                    raise
                # One segment in flight at a time: its few scalars are fetched before the next
                # is dispatched (the rows are written by the writer thread). Overlapping
                # segments gained nothing measurable on a CPU, and with both queued on XLA's
                # CPU thread pool a run was once seen to stall on a 2-core machine.
                record(last, outputs)
                segments_done = index + 1
                if checkpointer is not None and segments_done % checkpointer.every == 0:
                    save(segments_done, (state, health))
                    saved = segments_done
                if received:  # an interrupt whose exception native code swallowed
                    raise _keyboard_interrupt(received[0])
        except KeyboardInterrupt as interrupt:
            done = history[-1][0] if history else 0
            where = f"its rows are in {writer.directory}" if writer else "it logged nothing"
            if checkpointer is not None and saved:
                steps = sum(lengths[:saved]) * plan.steps_per_iteration
                where += (
                    f"; its checkpoint after {steps:,} steps continues it: "
                    f"ajax.resume({str(checkpointer.directory)!r})"
                )
            raise RunInterrupted(
                f"The run was interrupted ({_shown(interrupt)}) after {done:,} of {total:,} "
                f"steps per seed; {where}."
            ) from None
        finally:
            # On normal end, on an error and on Ctrl-C alike, every row recorded so far is
            # written (to the log directory, or a fallback file if that failed) before the
            # writer closes, and every checkpoint started is finished.
            if checkpointer is not None:
                checkpointer.close()
            if writer is not None:
                writer.close()
    run_s = time.perf_counter() - run_start

    if programs.places > len(seeds):
        # Without the first seed's copies, gathered on one device: a slice of the sharded
        # state would be replicated on every device.
        state = _seeds_only(jax.device_put(state, jax.local_devices()[0]), len(seeds))
    return TrainResult.from_history(
        agent=agent,
        state=state,
        seeds=seeds,
        n_timesteps=total,
        history=history,
        diverged=_divergences(jax.device_get(health), seeds, programs.metric_names, plan),
        timings={"compile_s": compile_s, "run_s": run_s, "total_s": compile_s + run_s},
        log_dir=None if writer is None else str(writer.directory),
    )
