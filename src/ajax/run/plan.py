"""A run's plan: its seeds and their keys, how a budget splits into iterations and
segments, the warning of a budget that never updates, and the check that the run's state
fits in memory, all before compiling."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from ajax._values import as_whole
from ajax.buffers import EpisodeStore, ReplayBuffer
from ajax.logging import LoggingConfig
from ajax.memory import available_bytes, check_fits, human


def positive_int(name: str, value: Any, example: str) -> int:
    """``value`` as a positive int (a whole float such as ``1e6`` too: :func:`as_whole`);
    else ValueError naming ``name``, with ``example``."""
    whole = as_whole(value)
    if whole is None or whole <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}; e.g. {example}.")
    return whole


def seeds_of(seed: int | Sequence[int]) -> list[int]:
    """The list of seeds, validated: ``seed`` is one int or a non-empty sequence of them (a
    list, a range, a NumPy array)."""
    seeds = list(seed) if isinstance(seed, Sequence | np.ndarray) else [seed]
    if not seeds:
        raise ValueError("seed is an empty list; give an int or a list such as seed=[0, 1, 2].")
    for s in seeds:
        if as_whole(s) is None or not 0 <= s < 2**32:
            raise ValueError(f"seeds must be integers in [0, 2**32), got {s!r}.")
    seeds = [as_whole(s) for s in seeds]
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ValueError(
            f"seed {', '.join(map(str, twice))} is given twice: a seed's run is the same run "
            "each time, and would count twice in the statistics over seeds. Give distinct "
            "seeds, e.g. seed=list(range(4))."
        )
    return seeds


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

    def timesteps_after(self, segments: int) -> int:
        """Steps per seed once the first ``segments`` segments have run."""
        return sum(self.segment_lengths[:segments]) * self.steps_per_iteration


def plan_run(agent: Any, n_timesteps: int, logging_config: LoggingConfig | None) -> RunPlan:
    n_timesteps = positive_int("n_timesteps", n_timesteps, "n_timesteps=100_000")
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


def warn_if_only_warmup(agent: Any, n_timesteps: int, plan: RunPlan) -> None:
    """Warn where a run's budget ends within the agent's warm-up (``learning_starts``), so
    that it would compute no update: legal, but almost always a mistake, as where a default
    warm-up scales with the task's episodes (TD-MPC2's five episodes). The warning points at
    the caller of ``agent.train``."""
    if plan.n_iterations <= agent.warmup_iterations:
        warnings.warn(
            f"n_timesteps={n_timesteps} ends within {agent.name}'s warm-up "
            f"(learning_starts={agent.config.learning_starts}): every step of the run is "
            f"random and no update is computed. Raise n_timesteps to at least "
            f"{(agent.warmup_iterations + 1) * plan.steps_per_iteration}, or lower "
            f"learning_starts.",
            stacklevel=4,
        )


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


def check_memory(
    state_shape: Any,
    n_seeds: int,
    available: int | None = None,
    unit: str = "seeds",
    host_copies: int = 0,
) -> None:
    """Refuse, before compiling, a run whose state cannot fit the device's memory.

    The estimate is the whole training state of every seed (parameters, optimiser states,
    environment copies, replay buffers): the state is donated from one segment to the next,
    so it is held once. A run that checkpoints holds ``host_copies`` more copies of it in
    host memory while a checkpoint is made, which on a CPU is the devices' memory too.
    """
    total, buffers = state_bytes(state_shape)
    detail = f"{human(total / n_seeds)} per seed"
    if buffers:
        detail += f", of which {human(buffers / n_seeds)} replay buffer"
    if host_copies and jax.default_backend() == "cpu":
        detail += f", held {1 + host_copies} times while a checkpoint is made"
        total *= 1 + host_copies
    available = available_bytes() if available is None else available
    check_fits(total, n_seeds, detail, available, unit)
