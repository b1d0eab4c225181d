"""The check that a sweep reads every batchable hyperparameter inside its program. An agent's
run is a grid of two configurations, its own batchable values and every one of them moved;
the agent built with the moved values trains the same grid again. A value the program took
from the agent's construction rather than from the sweep would differ between the two
programs, and so between their runs. The program cache keys swept fields by name alone, so it
relies on this never happening."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np

from ajax.agents.base import batchable_fields, validate_config
from ajax.run import lowering


def moved_sweep(agent: Any) -> list[dict[str, float]]:
    """``agent``'s batchable values, and each moved off its value, inside its range."""
    own = {name: getattr(agent.config, name) for name in batchable_fields(type(agent.config))}
    moved = {name: 0.8 * value if value > 0 else 0.05 for name, value in own.items()}
    validate_config(dataclasses.replace(agent.config, **moved))
    return [own, moved]


@contextlib.contextmanager
def segments_traced() -> Iterator[list[int]]:
    """A list that gains an entry for each segment program traced inside the block."""
    traced: list[int] = []
    original = lowering.segment_program

    def counted(*args, **kwargs):
        traced.append(1)
        return original(*args, **kwargs)

    lowering.segment_program = counted
    try:
        yield traced
    finally:
        lowering.segment_program = original


def assert_read_inside(agent: Any, grid: Any, monkeypatch: Any, **train: Any) -> None:
    """``grid``, ``agent`` trained over :func:`moved_sweep` with ``train``'s arguments, is
    the same, bit for bit, as the grid the agent built with the moved values trains. That
    grid is traced anew, since the program cache would hand back the first grid's program;
    the compile cache serves its compile when the two programs are the same."""
    monkeypatch.setattr("ajax._program_cache.load", lambda key: None)
    with segments_traced() as traced:
        again = agent.with_values(grid.configs[1]).train(sweep=grid.configs, **train)
    assert traced, "the second grid was not traced: the check compared a program with itself"
    for c in range(2):
        first, second = (jax.tree.leaves(g.result(c).state) for g in (grid, again))
        for x, y in zip(first, second, strict=True):
            np.testing.assert_array_equal(x, y)
    own, moved = (jax.tree.leaves(grid.result(c).state.params) for c in range(2))
    differ = [not np.array_equal(x, y) for x, y in zip(own, moved, strict=True)]
    assert any(differ), "the moved values changed nothing: the check could not see a stale one"
