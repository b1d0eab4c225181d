"""The pieces DreamerV3 and TD-MPC2 share (issue: the last two agents), pinned against their
papers' definitions written out independently: symlog, two-hot regression over both bin
layouts, the two return scales, SimNorm, Mish, LaProp, the block GRU, the categorical
latents' KL balancing with free bits, TD-MPC2's discount, MPPI planning, and the mask of a
sampled run's first episode.

What runs, runs jitted: op by op, JAX compiles each operation on its own, and on a 2-core
machine those compiles wait behind the other test worker's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.buffers import within_first_episode
from ajax.nn.latents import balanced_kl, categorical_kl, straight_through_sample, unimix_logits
from ajax.nn.mlp import ACTIVATIONS, simnorm
from ajax.nn.recurrent import BlockGRU, BlockLinear
from ajax.nn.twohot import symexp, symexp_bins, symlog, symlog_bins
from ajax.planning import MPPI, shifted
from ajax.returns import PercentileScale, SpreadScale, discount_for_episodes
from ajax.updates import clip_by_agc, laprop, optimizer_step

VALUES = np.array([-3e5, -250.0, -1.0, -0.3, 0.0, 1e-4, 0.7, 2.0, 99.0, 4e4], np.float32)


def test_symlog_is_symexps_inverse_and_the_identity_near_zero():
    np.testing.assert_allclose(symexp(symlog(VALUES)), VALUES, rtol=1e-5)
    np.testing.assert_allclose(symlog(np.float32(1e-4)), 1e-4, rtol=1e-4)
    np.testing.assert_allclose(symlog(np.float32(np.e - 1)), 1.0, rtol=1e-6)
    np.testing.assert_allclose(symlog(-VALUES), -symlog(VALUES))


def test_dreamers_bins_span_symexp_of_twenty():
    bins = np.asarray(symexp_bins().values)
    assert bins.shape == (255,)
    np.testing.assert_allclose(bins[-1], np.expm1(20.0), rtol=1e-6)


@pytest.mark.parametrize(("layout", "n"), [(symexp_bins, 255), (symlog_bins, 101)])
def test_bins_are_symmetric_about_an_exact_zero_and_decode_their_mean(layout, n):
    bins = layout()
    values = np.asarray(bins.values)
    half = n // 2
    assert values.shape == (n,) and values[half] == 0.0 and np.all(np.diff(values) > 0)
    np.testing.assert_array_equal(values[:half], -values[half + 1 :][::-1])
    # Uniform probabilities (the first row) over symmetric bins predict exactly zero; the
    # folded product is the mean of the bins under the softmax.
    logits = np.random.default_rng(3).normal(size=(7, n)).astype(np.float32) * 3.0
    logits[0] = 0.0
    decoded = np.asarray(jax.jit(bins.decode)(logits))
    assert decoded[0] == 0.0
    probs = np.exp(np.float64(logits) - logits.max(-1, keepdims=True))
    mean = (probs / probs.sum(-1, keepdims=True) * values).sum(-1)
    want = np.sign(mean) * np.expm1(np.abs(mean)) if bins.symlog_targets else mean
    np.testing.assert_allclose(decoded, want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="odd"):
        layout(n + 1)


@pytest.mark.parametrize("layout", [symexp_bins, symlog_bins])
def test_two_hot_weights_sum_to_one_and_decode_back(layout):
    bins = layout()

    # Logits whose softmax is the encoding predict the value back, within the bins' range
    # (TD-MPC2's ends at symexp(10), about 22,026).
    @jax.jit
    def round_trip(x):
        weights = bins.encode(x)
        return weights, bins.decode(jnp.log(weights + 1e-30))

    weights, decoded = round_trip(VALUES)
    weights = np.asarray(weights)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)
    assert ((weights > 0).sum(-1) <= 2).all() and (weights >= 0).all()
    inside = np.abs(VALUES) < 2e4
    np.testing.assert_allclose(np.asarray(decoded)[inside], VALUES[inside], rtol=2e-3, atol=1e-3)


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
    weights = np.asarray(jax.jit(bins.encode)(jnp.array([-1e30, 1e30])))
    assert weights[0, 0] == 1.0 and weights[1, -1] == 1.0


@pytest.mark.parametrize("layout", [symexp_bins, symlog_bins])
def test_the_loss_gradient_does_not_grow_with_the_target(layout):
    bins = layout()
    logits = jax.random.normal(jax.random.key(0), (len(bins.values),))

    @jax.jit
    def loss_and_gradient(target):
        # The cross-entropy to the two-hot encoding, without forming it.
        cross_entropy = -(bins.encode(target) * jax.nn.log_softmax(logits)).sum()
        # d/dlogits of the cross-entropy: softmax minus the two-hot weights.
        want = jax.nn.softmax(logits) - bins.encode(target)
        return bins.loss(logits, target), cross_entropy, jax.grad(bins.loss)(logits, target), want

    for target in (1.0, 1e4):
        loss, cross_entropy, grad, want = loss_and_gradient(jnp.float32(target))
        np.testing.assert_allclose(loss, cross_entropy, rtol=1e-5)
        np.testing.assert_allclose(grad, want, atol=1e-6)
        assert np.linalg.norm(np.asarray(grad, np.float64)) <= np.sqrt(2.0)


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
    y = jax.jit(simnorm)(x)
    groups = np.asarray(y).reshape(3, 5, 8, 8)
    np.testing.assert_allclose(groups.sum(-1), 1.0, rtol=1e-5)
    assert (groups >= 0).all() and y.shape == x.shape
    with pytest.raises(ValueError, match="divisible by 8"):
        simnorm(jnp.zeros(12))


def test_mish_is_x_tanh_softplus():
    """The one-exponential form against the definition, in float64, from far below 0 to
    far past the cap (no overflow, no NaN), values and gradients."""
    x = np.concatenate([np.linspace(-60.0, 60.0, 2001), [-1e4, 1e4]]).astype(np.float32)
    x64 = x.astype(np.float64)
    want = x64 * np.tanh(np.logaddexp(0.0, x64))
    got = np.asarray(jax.jit(ACTIVATIONS["mish"])(x))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30)
    grad = np.asarray(jax.jit(jax.vmap(jax.grad(ACTIVATIONS["mish"])))(x))
    t, sig = np.tanh(np.logaddexp(0.0, x64)), 0.5 * (1.0 + np.tanh(0.5 * x64))
    np.testing.assert_allclose(grad, t + x64 * (1.0 - t**2) * sig, rtol=1e-5, atol=1e-6)


def test_a_sampled_run_keeps_its_first_episode_through_its_end():
    done = jnp.array([[0, 0, 1, 0, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]], bool)
    want = [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]
    np.testing.assert_array_equal(within_first_episode(done), np.array(want, bool))


def _distance_to(target):
    """The value of action sequences [n, horizon, A]: minus their squared distance to
    ``target`` at every step."""
    return lambda actions, key: -((actions - target) ** 2).sum(axis=(1, 2))


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
    noisy, _ = jax.jit(
        lambda key: planner.plan(_distance_to(target), jnp.zeros((3, 2)), jnp.zeros((0, 3, 2)), key)
    )(jax.random.key(9))
    assert noisy.shape == (2,) and bool(jnp.all(jnp.abs(noisy) <= 1.0))


def test_mppi_takes_the_policys_proposal_when_it_is_the_best():
    target = jnp.array([-0.9])
    proposals = jnp.broadcast_to(target, (24, 3, 1))
    planner = MPPI(iterations=1)
    action, _ = jax.jit(
        lambda key: planner.plan(
            _distance_to(target), jnp.zeros((3, 1)), proposals, key, deterministic=True
        )
    )(jax.random.key(0))
    np.testing.assert_allclose(action, target, atol=1e-6)
    with pytest.raises(ValueError, match="policy_samples < samples"):
        MPPI(samples=16, policy_samples=16)


def test_every_refit_scores_with_a_fresh_key():
    # TD-MPC2's value of a sequence is stochastic (the prior's last action, the Q pair); its
    # reference draws it afresh at each refit, so one key reused would bias every refit alike.
    seen = []

    def value_of(actions, key):
        jax.debug.callback(lambda k: seen.append(tuple(np.asarray(k))), jax.random.key_data(key))
        return -(actions**2).sum(axis=(1, 2))

    planner = MPPI(samples=16, policy_samples=0, elites=4, iterations=4)
    plan = jax.jit(lambda key: planner.plan(value_of, jnp.zeros((3, 1)), jnp.zeros((0, 3, 1)), key))
    jax.block_until_ready(plan(jax.random.key(0)))
    assert len(seen) == 4 and len(set(seen)) == 4


def test_the_plan_moves_one_step_on_and_restarts_with_an_episode():
    mean = jnp.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(shifted(mean, jnp.bool_(False)), [[2, 3], [4, 5], [0, 0]])
    np.testing.assert_array_equal(shifted(mean, jnp.bool_(True)), jnp.zeros((3, 2)))


def _numpy_laprop(params, grads_per_step, lr, beta1, beta2, eps, agc, warmup):
    """The reference's optimiser written out: AGC per tensor, RMS scaling with bias
    correction, then bias-corrected momentum, the step ramped from 0 over ``warmup``."""
    nu = {k: np.zeros_like(v) for k, v in params.items()}
    mu = {k: np.zeros_like(v) for k, v in params.items()}
    params = {k: v.copy() for k, v in params.items()}
    for t, grads in enumerate(grads_per_step, start=1):
        rate = lr * min(1.0, (t - 1) / warmup)
        for k in params:
            g = grads[k]
            limit = agc * max(1e-3, np.linalg.norm(params[k]))
            g = g / max(1.0, np.linalg.norm(g) / limit)
            nu[k] = beta2 * nu[k] + (1 - beta2) * g * g
            scaled = g / (np.sqrt(nu[k] / (1 - beta2**t)) + eps)
            mu[k] = beta1 * mu[k] + (1 - beta1) * scaled
            params[k] = params[k] - rate * mu[k] / (1 - beta1**t)
    return params


def test_laprop_is_the_references_optimiser():
    rng = np.random.default_rng(3)
    params = {"w": rng.normal(size=(4, 3)).astype(np.float32), "b": np.full(3, 0.1, np.float32)}
    # Large gradients, so that the clipping acts on some steps.
    grads = [
        {k: (rng.normal(size=v.shape) * s).astype(np.float32) for k, v in params.items()}
        for s in (0.1, 5.0, 1.0, 20.0)
    ]
    optimizer = laprop(learning_rate=1e-2, warmup=2)
    state = optimizer.init(params)
    got = {k: jnp.asarray(v) for k, v in params.items()}
    step = jax.jit(lambda g, s, p: optimizer_step(optimizer, g, s, p))
    for g in grads:
        got, state = step(g, state, got)
    want = _numpy_laprop(params, grads, 1e-2, 0.9, 0.999, 1e-20, 0.3, 2)
    for k in params:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-7)
        assert not np.allclose(want[k], params[k]), "the premise: the parameters moved"


def test_agc_clips_each_tensor_as_a_whole():
    params = {"w": jnp.ones((2, 2)), "tiny": jnp.zeros(3)}
    updates = {"w": jnp.full((2, 2), 10.0), "tiny": jnp.ones(3)}
    clipped, _ = clip_by_agc(0.3).update(updates, (), params)
    np.testing.assert_allclose(jnp.linalg.norm(clipped["w"]), 0.3 * 2.0, rtol=1e-6)
    np.testing.assert_allclose(jnp.linalg.norm(clipped["tiny"]), 0.3 * 1e-3, rtol=1e-5)
    small = {"w": jnp.full((2, 2), 0.01), "tiny": jnp.zeros(3)}
    np.testing.assert_array_equal(clip_by_agc(0.3).update(small, (), params)[0]["w"], small["w"])


def test_the_block_gru_is_a_gru_and_each_block_sees_its_own_state_alone():
    deter, inputs = jax.random.normal(jax.random.key(4), (2, 3, 16)), jnp.ones((2, 3, 5))
    d, x = jax.random.normal(jax.random.key(6), (6,)), jax.random.normal(jax.random.key(7), (3,))
    cell = BlockGRU(deter=16, blocks=4)
    # Without the hidden layers (whose normalisation spans the state), d new / d old is
    # block-diagonal: four blocks of 4 units.
    gates_only = BlockGRU(deter=16, blocks=4, layers=0)
    # One block, no hidden layer: the GRU equations, from the kernel by hand.
    plain = BlockGRU(deter=6, blocks=1, layers=0)

    @jax.jit
    def outputs():
        out = cell.apply(cell.init(jax.random.key(5), deter, inputs), deter, inputs)
        params = gates_only.init(jax.random.key(5), deter, inputs)
        step = lambda state: gates_only.apply(params, state, inputs[0, 0])  # noqa: E731
        p = plain.init(jax.random.key(8), d, x)
        return out, jax.jacobian(step)(deter[0, 0]), p, plain.apply(p, d, x)

    out, jacobian, p, plain_out = outputs()
    assert out.shape == deter.shape
    blocks = np.kron(np.eye(4), np.ones((4, 4))).astype(bool)
    assert np.all(np.asarray(jacobian)[~blocks] == 0) and np.any(np.asarray(jacobian)[blocks] != 0)
    layer = jax.tree.map(np.asarray, p["params"]["BlockLinear_0"])
    gates = np.concatenate([d, x]) @ layer["kernel"][0] + layer["bias"]
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    r, c, u = sigmoid(gates[:6]), gates[6:12], sigmoid(gates[12:] - 1.0)
    want = u * np.tanh(r * c) + (1 - u) * np.asarray(d)
    np.testing.assert_allclose(plain_out, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="divide evenly"):
        BlockGRU(deter=10, blocks=4).init(jax.random.key(0), jnp.zeros(10), jnp.zeros(2))


def test_a_block_layer_gives_each_group_its_own_inputs_and_the_shared_ones():
    x, shared = (
        jax.random.normal(jax.random.key(1), (2, 6)),
        jax.random.normal(jax.random.key(2), (2, 4)),
    )
    x, shared = np.asarray(x), np.asarray(shared)
    layer = BlockLinear(units=9, blocks=3)
    p = jax.jit(layer.init)(jax.random.key(3), x, shared)
    kernel = np.asarray(p["params"]["kernel"])
    assert kernel.shape == (3, 2 + 4, 3)
    p = {"params": {"kernel": kernel, "bias": np.arange(9.0, dtype=np.float32)}}
    want = np.concatenate(
        [np.concatenate([x[:, 2 * k : 2 * k + 2], shared], -1) @ kernel[k] for k in range(3)], -1
    )
    (out,) = jax.jit(layer.apply)(p, x, shared)
    np.testing.assert_allclose(out, want + np.arange(9.0), rtol=1e-5)
    alone = {"params": {"kernel": kernel[:, :2], "bias": np.zeros(9, np.float32)}}
    (out,) = jax.jit(layer.apply)(alone, x)
    np.testing.assert_allclose(
        out,
        np.concatenate([x[:, 2 * k : 2 * k + 2] @ kernel[k, :2] for k in range(3)], -1),
        rtol=1e-5,
    )
    # In three parts: piece i of each group's three units, the groups in order.
    pieces = jax.jit(BlockLinear(units=9, blocks=3, parts=3).apply)(p, x, shared)
    for i, piece in enumerate(pieces):
        np.testing.assert_allclose(piece, (want + np.arange(9.0))[:, i::3], rtol=1e-5)
    with pytest.raises(ValueError, match="divide evenly"):
        BlockLinear(units=9, blocks=3, parts=2).init(jax.random.key(3), x, shared)


def test_a_block_layers_gradients_are_those_of_its_dense_form():
    """The bias's gradient, summed by a product, and every other gradient equal those of
    the same layer written densely, over a batch of two axes; forward mode works too."""
    x, shared = jax.random.normal(jax.random.key(1), (2, 5, 6)), jnp.ones((2, 5, 4))
    weights = jax.random.normal(jax.random.key(2), (3, 2, 5, 3))
    layer = BlockLinear(units=9, blocks=3, parts=3)
    p = jax.jit(layer.init)(jax.random.key(3), x, shared)

    def dense_form(p, x, shared):
        kernel, bias = p["params"]["kernel"], p["params"]["bias"]
        groups = [jnp.concatenate([x[..., 2 * k : 2 * k + 2], shared], -1) for k in range(3)]
        out = jnp.concatenate([g @ kernel[k] for k, g in enumerate(groups)], -1) + bias
        return tuple(out[..., i::3] for i in range(3))

    def weighted(apply):
        return lambda *a: sum(jnp.sum(w * o) for w, o in zip(weights, apply(*a), strict=True))

    got = jax.jit(jax.grad(weighted(layer.apply), argnums=(0, 1, 2)))(p, x, shared)
    want = jax.jit(jax.grad(weighted(dense_form), argnums=(0, 1, 2)))(p, x, shared)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    bias_grad = np.zeros((2, 5, 9))
    for i in range(3):
        bias_grad[..., i::3] = weights[i]
    np.testing.assert_allclose(got[0]["params"]["bias"], bias_grad.sum((0, 1)), rtol=1e-5)
    # Forward mode too: the bias's Jacobian, column by column, is the reverse mode's.
    first = lambda bias: layer.apply({"params": p["params"] | {"bias": bias}}, x, shared)[0]  # noqa: E731
    bias = p["params"]["bias"]
    forward, reverse = jax.jit(jax.jacfwd(first))(bias), jax.jit(jax.jacrev(first))(bias)
    np.testing.assert_allclose(forward, reverse, atol=1e-6)


def _numpy_kl(p_logits, q_logits):
    p = np.exp(p_logits - np.log(np.exp(p_logits).sum(-1, keepdims=True)))
    q = np.exp(q_logits - np.log(np.exp(q_logits).sum(-1, keepdims=True)))
    return (p * (np.log(p) - np.log(q))).sum(axis=(-2, -1))


def test_the_kl_is_categoricals_and_free_bits_leave_a_small_one_alone():
    rng = np.random.default_rng(10)
    post, prior = (rng.normal(size=(2, 4, 32, 16)) * 3.0).astype(np.float32)
    close = prior + 0.01 * rng.normal(size=prior.shape).astype(np.float32)

    @jax.jit
    def kls(post, prior, close):
        post, prior, close = unimix_logits(post), unimix_logits(prior), unimix_logits(close)
        # The dynamics term trains the prior alone, the representation term the posterior.
        by_prior = jax.grad(lambda q: balanced_kl(post, q)[1][..., 0].sum())(prior)
        by_post = jax.grad(lambda p: balanced_kl(p, prior)[1][..., 0].sum())(post)
        flat = jax.grad(lambda p, q: balanced_kl(p, q)[0].sum(), argnums=(0, 1))(close, prior)
        return {
            "logits": (post, prior),
            "kl": categorical_kl(post, prior),
            "balanced": balanced_kl(post, prior),
            "by": (by_prior, by_post),
            "close": categorical_kl(close, prior),
            "flat": flat,
        }

    out = jax.tree.map(np.asarray, kls(post, prior, close))
    np.testing.assert_allclose(out["kl"], _numpy_kl(*out["logits"]), rtol=1e-4)
    total, (dyn, rep) = out["balanced"][0], out["balanced"][1].T
    assert np.all(dyn > 1.0) and np.all(rep > 1.0), "the premise: KLs above 1"
    np.testing.assert_allclose(total, dyn + 0.1 * rep, rtol=1e-6)
    by_prior, by_post = out["by"]
    assert np.abs(by_prior).sum() > 0 and np.abs(by_post).sum() == 0
    # Below one nat the loss is flat: no gradient at all.
    assert np.all(out["close"] < 1.0)
    assert all(np.abs(g).sum() == 0 for g in out["flat"])


def test_unimix_keeps_one_percent_uniform_and_samples_pass_probabilities_gradients():
    logits = jnp.array([[30.0, 0.0, -30.0, 0.0]])
    weights = jnp.arange(4.0)
    sampled = lambda x: (straight_through_sample(jax.random.key(0), x) * weights).sum()  # noqa: E731
    expected = lambda x: (jax.nn.softmax(x) * weights).sum()  # noqa: E731
    probs, sample, grad, want = jax.jit(
        lambda x: (
            jnp.exp(unimix_logits(x)),
            straight_through_sample(jax.random.key(0), x),
            jax.grad(sampled)(jnp.zeros(4)),
            jax.grad(expected)(jnp.zeros(4)),
        )
    )(logits)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-6)
    assert float(probs.min()) >= 0.01 / 4 * 0.999
    np.testing.assert_array_equal(sample, [[1.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(grad, want, rtol=1e-6)


def test_samples_of_the_latents_follow_their_probabilities():
    probs = jnp.array([0.1, 0.6, 0.0, 0.3])
    logits = jnp.broadcast_to(jnp.log(probs), (20_000, 4))
    samples = np.asarray(jax.jit(straight_through_sample)(jax.random.key(5), logits))
    assert set(np.unique(samples)) == {0.0, 1.0} and (samples.sum(-1) == 1.0).all()
    # Within 4 standard errors of each class's probability; the impossible class never drawn.
    np.testing.assert_allclose(samples.mean(0), probs, atol=4 * np.sqrt(0.25 / 20_000))
    assert samples[:, 2].sum() == 0


def test_tdmpc2s_discount_grows_with_the_episode():
    assert discount_for_episodes(200) == pytest.approx(0.975)
    assert discount_for_episodes(1000) == pytest.approx(0.995)
    assert discount_for_episodes(50) == pytest.approx(0.95)  # (10 - 1) / 10 = 0.9, clipped
