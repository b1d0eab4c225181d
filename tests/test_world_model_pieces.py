"""The pieces DreamerV3 and TD-MPC2 share (issue: the last two agents), pinned against their
papers' definitions written out independently: symlog, two-hot regression over both bin
layouts, the two return scales, SimNorm, Mish, MPPI planning, and the mask of a sampled
run's first episode."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.buffers import within_first_episode
from ajax.nn.mlp import ACTIVATIONS, simnorm
from ajax.nn.twohot import symexp, symexp_bins, symlog, symlog_bins
from ajax.planning import MPPI, shifted
from ajax.returns import PercentileScale, SpreadScale

VALUES = np.array([-3e5, -250.0, -1.0, -0.3, 0.0, 1e-4, 0.7, 2.0, 99.0, 4e4], np.float32)


def test_symlog_is_symexps_inverse_and_the_identity_near_zero():
    np.testing.assert_allclose(symexp(symlog(VALUES)), VALUES, rtol=1e-5)
    np.testing.assert_allclose(symlog(np.float32(1e-4)), 1e-4, rtol=1e-4)
    np.testing.assert_allclose(symlog(np.float32(np.e - 1)), 1.0, rtol=1e-6)
    np.testing.assert_allclose(symlog(-VALUES), -symlog(VALUES))


def test_dreamers_bins_are_symmetric_about_an_exact_zero():
    bins = np.asarray(symexp_bins().values)
    assert bins.shape == (255,) and bins[127] == 0.0
    np.testing.assert_array_equal(bins[:127], -bins[128:][::-1])
    np.testing.assert_allclose(bins[-1], np.expm1(20.0), rtol=1e-6)
    assert np.all(np.diff(bins) > 0)
    # Uniform probabilities over symmetric bins predict exactly zero.
    assert float(symexp_bins().decode(jnp.zeros(255))) == 0.0
    with pytest.raises(ValueError, match="odd"):
        symexp_bins(256)


@pytest.mark.parametrize("layout", [symexp_bins, symlog_bins])
def test_two_hot_weights_sum_to_one_and_decode_back(layout):
    bins = layout()
    weights = np.asarray(bins.encode(jnp.asarray(VALUES)))
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)
    assert ((weights > 0).sum(-1) <= 2).all() and (weights >= 0).all()
    # Logits whose softmax is the encoding predict the value back, within the bins' range
    # (TD-MPC2's ends at symexp(10), about 22,026).
    inside = np.abs(VALUES) < 2e4
    decoded = bins.decode(jnp.log(jnp.asarray(weights[inside]) + 1e-30))
    np.testing.assert_allclose(decoded, VALUES[inside], rtol=2e-3, atol=1e-3)


def test_tdmpc2s_encoding_is_the_references_floor_and_offset():
    bins = symlog_bins()
    x = np.clip(np.log1p(np.abs(VALUES)) * np.sign(VALUES), -10.0, 10.0)
    position = (x + 10.0) / 0.2  # (x - vmin) / bin_size, 101 bins over [-10, 10]
    index = np.floor(position).astype(int)
    offset = position - index
    want = np.zeros((len(VALUES), 101), np.float32)
    want[np.arange(len(VALUES)), index] = 1.0 - offset
    want[np.arange(len(VALUES)), (index + 1) % 101] += offset
    np.testing.assert_allclose(bins.encode(jnp.asarray(VALUES)), want, atol=2e-5)


def test_a_target_beyond_the_bins_sits_on_the_end_bin():
    bins = symlog_bins()
    weights = np.asarray(bins.encode(jnp.array([-1e30, 1e30])))
    assert weights[0, 0] == 1.0 and weights[1, -1] == 1.0


@pytest.mark.parametrize("layout", [symexp_bins, symlog_bins])
def test_the_loss_gradient_does_not_grow_with_the_target(layout):
    bins = layout()
    logits = jax.random.normal(jax.random.key(0), (len(bins.values),))
    for target in (1.0, 1e4):
        grad = jax.grad(bins.loss)(logits, jnp.float32(target))
        # d/dlogits of the cross-entropy: softmax minus the two-hot weights.
        want = jax.nn.softmax(logits) - bins.encode(jnp.float32(target))
        np.testing.assert_allclose(grad, want, atol=1e-6)
        assert float(jnp.linalg.norm(grad)) <= np.sqrt(2.0)


def test_dreamers_scale_averages_the_percentiles_and_never_divides_by_less_than_one():
    returns = jnp.asarray(np.random.default_rng(0).normal(size=4096) * 30.0, jnp.float32)
    once = PercentileScale.zeros().update(returns, rate=1.0)
    low, high = np.percentile(np.asarray(returns), [5, 95])
    np.testing.assert_allclose([once.low, once.high], [low, high], rtol=1e-5)
    np.testing.assert_allclose(once.scale, high - low, rtol=1e-5)
    slow = PercentileScale.zeros().update(returns)  # rate 0.01
    np.testing.assert_allclose([slow.low, slow.high], [0.01 * low, 0.01 * high], rtol=1e-5)
    assert float(PercentileScale.zeros().update(returns * 1e-3, rate=1.0).scale) == 1.0


def test_tdmpc2s_scale_starts_at_one_and_averages_the_floored_spread():
    q = jnp.asarray(np.random.default_rng(1).uniform(0.0, 50.0, size=2048), jnp.float32)
    low, high = np.percentile(np.asarray(q), [5, 95])
    scale = SpreadScale.ones()
    assert float(scale.scale) == 1.0
    np.testing.assert_allclose(scale.update(q).scale, 0.99 + 0.01 * (high - low), rtol=1e-5)
    assert float(scale.update(q * 1e-3).scale) == 1.0  # a spread below 1 counts as 1


def test_simnorm_groups_are_simplices():
    x = jax.random.normal(jax.random.key(2), (3, 5, 64)) * 10.0
    y = simnorm(x)
    groups = np.asarray(y).reshape(3, 5, 8, 8)
    np.testing.assert_allclose(groups.sum(-1), 1.0, rtol=1e-5)
    assert (groups >= 0).all() and y.shape == x.shape
    with pytest.raises(ValueError, match="divisible by 8"):
        simnorm(jnp.zeros(12))


def test_mish_is_x_tanh_softplus():
    x = np.array([-3.0, 0.0, 1.0, 4.0], np.float32)
    want = x * np.tanh(np.log1p(np.exp(x)))
    np.testing.assert_allclose(ACTIVATIONS["mish"](jnp.asarray(x)), want, rtol=1e-6)


def test_a_sampled_run_keeps_its_first_episode_through_its_end():
    done = jnp.array([[0, 0, 1, 0, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]], bool)
    want = [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]
    np.testing.assert_array_equal(within_first_episode(done), np.array(want, bool))


def _distance_to(target):
    """The value of action sequences [n, horizon, A]: minus their squared distance to
    ``target`` at every step."""
    return lambda actions: -((actions - target) ** 2).sum(axis=(1, 2))


def test_mppi_alone_converges_to_the_best_action():
    target = jnp.array([0.5, -0.3])
    planner = MPPI(policy_samples=0)
    plan = jax.jit(
        lambda key: planner.plan(
            _distance_to(target), jnp.zeros((3, 2)), jnp.zeros((0, 3, 2)), key, deterministic=True
        )
    )
    for seed in range(3):
        action, mean = plan(jax.random.key(seed))
        np.testing.assert_allclose(mean, jnp.broadcast_to(target, (3, 2)), atol=0.05)
        np.testing.assert_allclose(action, target, atol=0.1)
    # With its noise, the action stays in [-1, 1] and near the plan.
    noisy, _ = planner.plan(
        _distance_to(target), jnp.zeros((3, 2)), jnp.zeros((0, 3, 2)), jax.random.key(9)
    )
    assert noisy.shape == (2,) and bool(jnp.all(jnp.abs(noisy) <= 1.0))


def test_mppi_takes_the_policys_proposal_when_it_is_the_best():
    target = jnp.array([-0.9])
    proposals = jnp.broadcast_to(target, (24, 3, 1))
    planner = MPPI(iterations=1)
    action, _ = planner.plan(
        _distance_to(target), jnp.zeros((3, 1)), proposals, jax.random.key(0), deterministic=True
    )
    np.testing.assert_allclose(action, target, atol=1e-6)
    with pytest.raises(ValueError, match="policy_samples < samples"):
        MPPI(samples=16, policy_samples=16)


def test_the_plan_moves_one_step_on_and_restarts_with_an_episode():
    mean = jnp.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(shifted(mean, jnp.bool_(False)), [[2, 3], [4, 5], [0, 0]])
    np.testing.assert_array_equal(shifted(mean, jnp.bool_(True)), jnp.zeros((3, 2)))
