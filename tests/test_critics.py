"""The maths SAC, TD3 and REDQ rest on: the critic ensemble, the REDQ subset minimum, the
temperature loss and the squashed Gaussian's log-density."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.critics import QEnsemble, subset_min, temperature_loss
from ajax.nn import TanhNormal


def test_ensemble_members_are_independent_networks():
    ensemble = QEnsemble((8,), "relu", n_critics=3)
    obs, action = jnp.ones((5, 2)), jnp.zeros((5, 1))
    params = ensemble.init(jax.random.key(0), obs, action)
    q = ensemble.apply(params, obs, action)
    assert q.shape == (3, 5)
    # Different initial weights per member, so different Q-values on the same input.
    assert len({round(float(v), 6) for v in q[:, 0]}) == 3


def test_subset_min_over_every_critic_is_the_plain_minimum():
    q = jnp.asarray([[3.0, -1.0], [2.0, 5.0]])
    np.testing.assert_array_equal(subset_min(None, q, 2), [2.0, -1.0])


def test_subset_min_takes_distinct_members_uniformly():
    # Critic i predicts i everywhere, so the subset minimum names the smaller member drawn.
    q = jnp.broadcast_to(jnp.arange(10.0)[:, None], (10, 4))
    keys = jax.random.split(jax.random.key(1), 20_000)
    mins = np.asarray(jax.vmap(lambda k: subset_min(k, q, 2))(keys))
    assert (mins == mins[:, :1]).all()  # one subset for the whole batch
    # P(min of 2 distinct draws from 0..9 equals m) = 2 (9 - m) / 90; never 9 (distinct).
    frequencies = np.bincount(mins[:, 0].astype(int), minlength=10) / len(keys)
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
