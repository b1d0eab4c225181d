"""Lowering a run: its programs exported through the program cache, the seeds split over
the devices (padded with copies of the first seed where they do not fill them), and the
init compiled beside the segment."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ajax import _program_cache
from ajax._devices import seed_mesh
from ajax._xla import compiler_options, unrolled_threefry, weight_gradients_for
from ajax.distributed import local_places
from ajax.envs.core import SEED_AXIS
from ajax.run.health import initial_health, watched_metrics
from ajax.run.plan import RunPlan, check_memory, seed_array
from ajax.run.program import init_program, segment_program


@dataclasses.dataclass(frozen=True)
class RunPrograms:
    """The lowered programs of a run and the inputs they take."""

    #: The seeds (:func:`seed_array`), then copies of the first where they do not fill every
    #: device's share (:attr:`places`).
    seeds: np.ndarray
    #: Each place's swept values (:mod:`ajax.sweep`), padded as the seeds; empty without a
    #: sweep.
    values: dict[str, np.ndarray]
    #: Every seed's divergence record at the start (:func:`initial_health`).
    health: dict[str, np.ndarray]
    #: What a divergence is reported under (:func:`watched_metrics`).
    metric_names: list[str]
    #: The init program, lowered (:attr:`init`): on another thread when :func:`lower_run`
    #: compiles it there.
    init_lowering: Future
    #: ``segment(state, health, seeds, values, first, n_iterations) -> (state, health,
    #: outputs)``: iterations ``first`` to ``first + n_iterations``, any number of them.
    segment: jax.stages.Lowered
    #: The devices the places are split over (None: one device runs them all).
    mesh: Mesh | None
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


def seeds_only(tree: Any, n_seeds: int) -> Any:
    """``tree`` (leaves with the programs' seed axis first) without the places after the
    run's ``n_seeds`` seeds."""
    return jax.tree.map(lambda x: x[:n_seeds], tree)


def with_places(tree: Any, n_places: int) -> Any:
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
    *,
    evaluate: bool,
    compile_init: bool = False,
    values: dict[str, np.ndarray] | None = None,
    host_copies: int = 0,
) -> RunPrograms:
    """Lower the run's two programs, through ``jax.export`` (:mod:`ajax._program_cache`):
    a relaunch that finds them stored skips tracing. Refuses, before tracing the segment, a
    run whose state cannot fit in memory, with ``host_copies`` more copies of it where the
    run checkpoints (:data:`ajax.checkpoint.HOST_COPIES`). The segment's Threefry is lowered
    unrolled (:func:`ajax._xla.unrolled_threefry`); the init's is not, since it runs once and
    is compiled for a short compile (JAX's rolled loop makes a third fewer instructions). The
    segment's layers take their weight gradients in the form of the library that computes the
    agent's products (:func:`ajax._xla.weight_gradients_for`).

    The seeds are split over the devices :func:`ajax._devices.seed_mesh` gives: the programs
    are exported for one device's share of them, and every device runs that program on its
    own share (``shard_map``), with nothing exchanged between devices. Where the seeds do not
    fill the devices' shares, the places left run copies of the first seed (the programs'
    seed axis is :attr:`RunPrograms.places` long; :func:`ajax.loop.train` drops the copies).
    A sweep's places are its configurations times its seeds: each place's swept ``values``
    are an argument of both programs, and the program cache's key names the swept fields
    rather than their values, so a grid of the same shape is the same program.

    The segment is lowered first, from the init's traced shapes. With ``compile_init``, the
    init is then lowered and compiled on another thread, meant to run while this one
    compiles the segment: lowering is Python, holding the interpreter's lock, and compiling
    is XLA's C++, which releases it. The segment is compiled on the calling thread, where a
    fresh process's first run executed faster (docs/developer-performance.md,
    "Compiling a run")."""
    mesh, share = seed_mesh(len(seeds))
    places = share * (1 if mesh is None else mesh.size)
    run_seeds = with_places(seed_array(seeds), places)
    run_values = with_places(values, places) if values else {}
    share_values = {name: v[:share] for name, v in run_values.items()}
    key = _program_cache.run_key(
        agent, share, num_episode_test if evaluate else None, swept=tuple(run_values)
    )
    train_env = agent.env_copies(agent.n_envs)
    init_key = _program_cache.key_with(key, "init", plan.n_iterations)
    init = _program_cache.load(init_key)
    init_fn = init_program(agent, train_env, plan.n_iterations)
    share_shape = (
        jax.eval_shape(init_fn, run_seeds[:share], share_values) if init is None else init.out_shape
    )
    # The devices of a CPU share its memory; an accelerator holds its own share.
    held = local_places(mesh, share) if jax.default_backend() == "cpu" else share
    unit = "runs (configurations x seeds)" if run_values else "seeds"
    check_memory(with_seeds(share_shape, held), held, unit=unit, host_copies=host_copies)

    def export_segment():
        segment = jax.vmap(
            segment_program(agent, train_env, num_episode_test if evaluate else None),
            in_axes=(0, 0, 0, 0, None, None),
            axis_name=SEED_AXIS,
        )
        args = (share_shape, initial_health(share), run_seeds[:share], share_values)
        args += (np.int32(0), np.int32(0))
        with unrolled_threefry(agent), weight_gradients_for(agent):
            return _program_cache.export(segment, *args)

    health = initial_health(places)
    segment = _program_cache.cached(key, export_segment)
    state_shape = with_seeds(share_shape, places, mesh)
    # Shapes, not the host's values: across processes, JAX takes no host array as a split
    # program's argument (ajax.distributed.placed makes them device arrays when called).
    inputs = with_seeds((health, run_seeds, run_values), places, mesh)
    segment_args = (state_shape, *inputs, np.int32(0), np.int32(0))
    segment_lowered = on_devices(segment, mesh, seeded=4, whole=2, donate_argnums=0).lower(
        *segment_args
    )

    def lower_init() -> jax.stages.Lowered:
        # After the segment's export, outside its unrolled-Threefry block: the init keeps
        # JAX's rolled loop.
        program = init
        if program is None:
            program = _program_cache.export(init_fn, run_seeds[:share], share_values)
            _program_cache.store(init_key, program)
        return on_devices(program, mesh, seeded=2).lower(*inputs[1:])

    init_lowering, init_compiled = lowered_init(
        lower_init, compiler_options(agent, runs_once=True), compile_init
    )
    return RunPrograms(
        run_seeds,
        run_values,
        health,
        watched_metrics(segment.out_shape[2]["sums"]),
        init_lowering,
        segment_lowered,
        mesh,
        init_compiled,
    )


def with_seeds(shapes: Any, n_seeds: int, mesh: Mesh | None = None) -> Any:
    """``shapes`` (leaves with a leading seed axis) for ``n_seeds`` seeds, split over
    ``mesh``'s devices along that axis if given."""
    sharding = None if mesh is None else NamedSharding(mesh, P(SEED_AXIS))
    return jax.tree.map(
        lambda s: jax.ShapeDtypeStruct((n_seeds, *s.shape[1:]), s.dtype, sharding=sharding),
        shapes,
    )


def on_devices(
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
