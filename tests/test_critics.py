"""The maths SAC, TD3 and REDQ rest on: the critic ensemble, the REDQ target subset, the
temperature loss and the squashed Gaussian's log-density."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.critics import QEnsemble, critic_subset, temperature_loss
from ajax.nn import TanhNormal


def _ensemble(n_critics=10):
    ensemble = QEnsemble((8,), "relu", n_critics=n_critics)
    obs, action = jnp.ones((5, 2)), jnp.zeros((5, 1))
    return ensemble, obs, action, ensemble.init(jax.random.key(0), obs, action)


def test_ensemble_members_are_independent_networks():
    ensemble, obs, action, params = _ensemble(n_critics=3)
    q = ensemble.apply(params, obs, action)
    assert q.shape == (3, 5)
    # Different initial weights per member, so different Q-values on the same input.
    assert len({round(float(v), 6) for v in q[:, 0]}) == 3


def test_subset_of_every_critic_is_the_whole_ensemble():
    _, _, _, params = _ensemble()
    assert critic_subset(None, params, 10) is params


def test_subset_evaluates_distinct_members_of_the_ensemble():
    ensemble, obs, action, params = _ensemble()
    q = ensemble.apply(params, obs, action)
    for key in jax.random.split(jax.random.key(3), 5):
        members = critic_subset(key, params, 2)
        q_members = ensemble.clone(n_critics=2).apply(members, obs, action)
        # Each member's Q-values are one critic's of the whole ensemble, and not the same one.
        rows = [int(np.argmin(np.abs(q - row).max(axis=1))) for row in q_members]
        np.testing.assert_allclose(q_members, q[np.asarray(rows)], rtol=1e-6)
        assert rows[0] != rows[1]


def test_subset_takes_distinct_members_uniformly():
    # Member i's only parameter is i, so the subset's minimum names the smaller member drawn.
    params = {"w": jnp.arange(10.0)}
    keys = jax.random.split(jax.random.key(1), 20_000)
    drawn = np.asarray(jax.vmap(lambda k: critic_subset(k, params, 2)["w"])(keys))
    assert (drawn[:, 0] != drawn[:, 1]).all()
    # P(min of 2 distinct draws from 0..9 equals m) = 2 (9 - m) / 90; never 9 (distinct).
    frequencies = np.bincount(drawn.min(axis=1).astype(int), minlength=10) / len(keys)
    expected = 2 * (9 - np.arange(10)) / 90
    np.testing.assert_allclose(frequencies, expected, atol=0.01)


@pytest.mark.parametrize("log_prob, raises", [(-2.0, False), (2.0, True)])
def test_temperature_rises_when_entropy_falls_below_target(log_prob, raises):
    # Target entropy -1. log_prob -2 means entropy 2 (above target): alpha should fall.
    grad = jax.grad(temperature_loss)(jnp.asarray(0.0), jnp.full((8,), log_prob), -1.0)
    assert (float(grad) < 0) == raises  # gradient descent raises alpha iff the gradient < 0


def test_squashed_gaussian_log_prob_is_the_change_of_variables():
    dist = TanhNormal(jnp.asarray([0.3, -1.2]), jnp.asarray([-0.5, 0.4]))
    action, log_prob = dist.sample_and_log_prob(jax.random.key(2))
    assert np.all(np.abs(action) < 1)
    # Density of a = tanh(u), u ~ N(mean, std): N(atanh a) / (1 - a^2), per dimension.
    u = np.arctanh(np.asarray(action, np.float64))
    std = np.exp(np.asarray(dist.log_std, np.float64))
    normal = np.exp(-0.5 * ((u - np.asarray(dist.mean)) / std) ** 2) / (std * np.sqrt(2 * np.pi))
    expected = np.sum(np.log(normal / (1 - np.asarray(action, np.float64) ** 2)))
    np.testing.assert_allclose(float(log_prob), expected, rtol=1e-4)
    np.testing.assert_allclose(dist.mode(), np.tanh([0.3, -1.2]), rtol=1e-6)


def test_squashed_gaussian_log_prob_stays_finite_at_saturation():
    dist = TanhNormal(jnp.asarray([30.0]), jnp.asarray([-5.0]))
    action, log_prob = dist.sample_and_log_prob(jax.random.key(3))
    assert np.isfinite(float(log_prob)) and float(action[0]) == pytest.approx(1.0)
