"""The interquartile mean and its stratified-bootstrap interval, on inputs worked by hand and
against SciPy's trimmed mean and bootstrap; the summary a run of 5 or more seeds gives."""

import numpy as np
import pytest
from scipy import stats as scipy_stats

from ajax.result import TrainResult
from ajax.stats import iqm, iqm_interval


def test_iqm_drops_a_quarter_at_each_end():
    # 8 values: 2 dropped at each end, mean of 3, 4, 5, 6.
    assert iqm([100.0, 1, 2, 3, 4, 5, 6, 7]) == 4.5
    # 5 values: 1 dropped at each end, mean of 2, 4, 7.
    np.testing.assert_allclose(iqm([10.0, 1, 4, 7, 2]), 13 / 3)
    # Under 4 values nothing is dropped.
    assert iqm([1.0, 2, 9]) == 4.0


@pytest.mark.parametrize("n", [4, 5, 7, 10, 33])
def test_iqm_is_scipys_quarter_trimmed_mean(n):
    scores = np.random.default_rng(n).normal(size=(n, 3))
    np.testing.assert_allclose(iqm(scores, axis=0), scipy_stats.trim_mean(scores, 0.25, axis=0))


def test_the_interval_of_two_runs_by_enumeration():
    # Resampling [0, 1] twice gives a mean of 0, 0.5 or 1 with chances 1/4, 1/2, 1/4: the
    # 2.5th and 97.5th percentiles are 0 and 1.
    assert iqm_interval(np.array([0.0, 1.0])) == (0.0, 1.0)
    assert iqm_interval(np.full(6, 3.0)) == (3.0, 3.0)


def test_the_bootstrap_is_stratified_by_task():
    # Four runs of two tasks, one always 0 and one always 1: every stratified resample holds
    # four of each, so the IQM is 0.5 every time. Pooled, resamples would vary.
    scores = np.stack([np.zeros(4), np.ones(4)], axis=1)
    assert iqm_interval(scores) == (0.5, 0.5)


def test_the_interval_agrees_with_scipys_percentile_bootstrap():
    scores = np.random.default_rng(7).gamma(2.0, 50.0, size=10)
    low, high = iqm_interval(scores, reps=20_000)
    reference = scipy_stats.bootstrap(
        (scores,),
        lambda x, axis: scipy_stats.trim_mean(x, 0.25, axis=axis),
        method="percentile",
        n_resamples=20_000,
        random_state=np.random.default_rng(1),
    ).confidence_interval
    width = reference.high - reference.low
    assert abs(low - reference.low) < 0.05 * width
    assert abs(high - reference.high) < 0.05 * width
    assert low < iqm(scores) < high


def test_a_curve_gets_one_interval_per_evaluation():
    curve = np.random.default_rng(3).normal(size=(6, 1, 5))
    low, high = iqm_interval(curve)
    assert low.shape == high.shape == (5,)
    for k in range(5):
        assert (low[k], high[k]) == iqm_interval(curve[..., k])


def test_bad_confidence_is_refused():
    with pytest.raises(ValueError, match=r"confidence must lie in \(0, 1\), got 95"):
        iqm_interval(np.ones(5), confidence=95)


def _result(n_seeds):
    returns = np.arange(n_seeds * 2, dtype=float).reshape(n_seeds, 2)
    evaluations = {"timestep": np.array([10, 20]), "episode_return": returns}
    return TrainResult(None, None, list(range(n_seeds)), 20, evaluations)


def test_a_summary_of_five_seeds_or_more_gives_the_iqm_and_its_interval():
    summary = _result(5).summary()
    # Final returns 1, 3, 5, 7, 9: mean 5, IQM of 3, 5, 7.
    assert summary["final"] == 5.0 and summary["best"] == 5.0
    assert summary["final_iqm"] == 5.0
    low, high = summary["final_iqm_interval"]
    assert 1.0 <= low < 5.0 < high <= 9.0
    assert "final_iqm" not in _result(4).summary()
