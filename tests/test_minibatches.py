"""The minibatch fit against a leaf-by-leaf reading of it: carrying the parameters as their
matrices and one vector of the rest must not change what the fit computes. Its shuffle
against JAX's."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import struct

from ajax.minibatches import _stable_argsort, fit_minibatches, fit_opt_state, permutation
from ajax.updates import clipped_over_one_vector


@struct.dataclass
class _State:
    params: dict
    opt_state: optax.OptState
    key: jax.Array


def _params(key):
    k = jax.random.split(key, 5)
    return {
        "dense": {"kernel": jax.random.normal(k[0], (3, 5)), "bias": jax.random.normal(k[1], (5,))},
        "norm": {"scale": jax.random.normal(k[2], (5,))},
        "head": {"kernel": jax.random.normal(k[3], (5, 2)), "temperature": jnp.float32(0.7)},
        "stack": jax.random.normal(k[4], (2, 2, 5)),
    }


def _loss(params, minibatch):
    x, y = minibatch
    h = jnp.tanh(x @ params["dense"]["kernel"] + params["dense"]["bias"])
    h = h * params["norm"]["scale"] + params["stack"].sum((0, 1))
    prediction = (h @ params["head"]["kernel"]) * params["head"]["temperature"]
    error = ((prediction - y) ** 2).mean()
    return error, {"error": error}


def _leaf_by_leaf_fit(state, batch, optimizer, learning_rate, n_epochs, n_minibatches):
    _, epochs_key = jax.random.split(state.key)
    params, opt_state = state.params, state.opt_state
    errors = []
    for epoch_key in jax.random.split(epochs_key, n_epochs):
        order = jax.random.permutation(epoch_key, batch[0].shape[0])
        for rows in np.split(np.asarray(order), n_minibatches):
            minibatch = tuple(x[rows] for x in batch)
            grads, metrics = jax.grad(_loss, has_aux=True)(params, minibatch)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = jax.tree.map(lambda p, u: p - learning_rate * u, params, updates)
            errors.append(metrics["error"])
    return params, float(np.mean(errors))


def test_the_fit_matches_its_leaf_by_leaf_reading():
    params_key, data_key, fit_key = jax.random.split(jax.random.key(3), 3)
    params = _params(params_key)
    x = jax.random.normal(data_key, (24, 3))
    batch = (x, jnp.stack([x.sum(-1), x[:, 0] * x[:, 1]], -1))
    # The on-policy agents' optimiser: a global-norm clip, then Adam, over one vector; a
    # clip tight enough to act on every step.
    optimizer = clipped_over_one_vector(0.1, optax.scale_by_adam())
    state = _State(params=params, opt_state=fit_opt_state(optimizer, params), key=fit_key)

    fitted, metrics = jax.jit(
        lambda s: fit_minibatches(s, batch, _loss, optimizer, 0.05, n_epochs=3, n_minibatches=4)
    )(state)
    reference = state.replace(opt_state=optimizer.init(params))
    expected, mean_error = _leaf_by_leaf_fit(reference, batch, optimizer, 0.05, 3, 4)

    assert jax.tree.structure(fitted.params) == jax.tree.structure(params)
    for got, want, before in zip(
        jax.tree.leaves(fitted.params),
        jax.tree.leaves(expected),
        jax.tree.leaves(params),
        strict=True,
    ):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert not np.allclose(got, before)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(metrics["error"], mean_error, rtol=1e-5)
    assert int(optax.tree_utils.tree_get(fitted.opt_state, "count")) == 12


# One round of JAX's shuffle up to 1,625 elements, two above; JAX's own beyond 65,536.
@pytest.mark.parametrize("n", [0, 1, 2, 3, 100, 512, 1_625, 1_626, 4_096, 65_536, 65_537])
def test_the_shuffle_is_jaxs_permutation(n):
    keys = jax.random.split(jax.random.PRNGKey(n), 8)
    ours = jax.jit(jax.vmap(permutation, in_axes=(0, None)), static_argnums=1)(keys, n)
    theirs = jax.vmap(jax.random.permutation, in_axes=(0, None))(keys, n)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_the_shuffle_breaks_ties_as_a_stable_sort():
    """Keys equal in one 16-bit digit or in both keep their index order, as JAX's stable
    key-value sort keeps them: random keys of 512 elements almost never tie."""
    keys = np.array([7, 0x10007, 7, 0x10000, 0x10007, 5, 0xFFFFFFFF, 0, 5], np.uint32)
    np.testing.assert_array_equal(_stable_argsort(jnp.asarray(keys)), np.argsort(keys, stable=True))
