"""Statistics over seeds as Agarwal et al. (2021, "Deep Reinforcement Learning at the Edge
of the Statistical Precipice") recommend and their library rliable computes them: the
interquartile mean (IQM) and its percentile interval from a stratified bootstrap."""

from __future__ import annotations

import numpy as np

#: Bootstrap resamples per interval. rliable's figures use 50,000; 2,000 moves the ends of a
#: 95% interval by well under its width, at a cost a summary printed after every run can pay.
BOOTSTRAP_REPS = 2_000


def iqm(scores: np.ndarray, axis: int = 0) -> np.ndarray:
    """The mean of the middle half of ``scores`` along ``axis``: ``floor(n / 4)`` values are
    dropped at each end (scipy's ``trim_mean(scores, 0.25)``, which rliable uses). Below 4
    values nothing is dropped, so it is the mean."""
    scores = np.sort(np.asarray(scores, np.float64), axis=axis)
    n = scores.shape[axis]
    cut = n // 4
    return np.take(scores, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def iqm_interval(
    scores: np.ndarray, confidence: float = 0.95, reps: int = BOOTSTRAP_REPS, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval of the IQM over runs (axis 0 of ``scores``).

    ``scores`` is ``[runs]``, ``[runs, tasks]`` or ``[runs, tasks, points]``; the IQM is taken
    over runs and tasks together, as rliable's aggregate IQM is, for each trailing point (a
    curve's evaluations). The bootstrap is stratified by task: each resample draws ``runs``
    runs with replacement within every task. Returns the lower and upper ends, each shaped as
    the trailing points (a scalar for one point).
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}.")
    scores = np.asarray(scores, np.float64)
    if scores.ndim == 1:
        scores = scores[:, None]
    runs, tasks = scores.shape[:2]
    draws = np.random.default_rng(seed).integers(0, runs, size=(reps, runs, tasks))
    resampled = np.take_along_axis(
        scores[None], draws.reshape(reps, runs, tasks, *(1,) * (scores.ndim - 2)), axis=1
    )
    statistics = iqm(resampled.reshape(reps, runs * tasks, *scores.shape[2:]), axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(statistics, [tail, 100 - tail], axis=0)
    return low, high
