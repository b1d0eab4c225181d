"""Epochs of shuffled minibatches over one rollout, shared by the on-policy style agents."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax


def fit_minibatches(
    state: Any,
    batch: Any,
    loss: Callable[[Any, Any], tuple[jax.Array, dict[str, jax.Array]]],
    optimizer: optax.GradientTransformation,
    learning_rate: jax.Array,
    n_epochs: int,
    n_minibatches: int,
) -> tuple[Any, dict[str, jax.Array]]:
    """``n_epochs`` passes over ``batch`` (leaves with a common leading axis), each shuffled
    and cut into ``n_minibatches`` equal minibatches, one gradient step on ``loss`` per
    minibatch. ``optimizer`` gives the direction and ``learning_rate`` the (possibly
    annealed) step size. ``state`` has ``params``, ``opt_state`` and ``key`` fields; returns it
    with all three moved on, and the mean of the loss's metrics."""
    key, epochs_key = jax.random.split(state.key)
    size = jax.tree.leaves(batch)[0].shape[0]

    def step(carry, minibatch):
        params, opt_state = carry
        grads, metrics = jax.grad(loss, has_aux=True)(params, minibatch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, jax.tree.map(lambda u: -learning_rate * u, updates))
        return (params, opt_state), metrics

    def epoch(carry, epoch_key):
        order = jax.random.permutation(epoch_key, size)
        minibatches = jax.tree.map(
            lambda x: x[order].reshape((n_minibatches, -1, *x.shape[1:])), batch
        )
        return jax.lax.scan(step, carry, minibatches)

    (params, opt_state), metrics = jax.lax.scan(
        epoch, (state.params, state.opt_state), jax.random.split(epochs_key, n_epochs)
    )
    state = state.replace(params=params, opt_state=opt_state, key=key)
    return state, jax.tree.map(jnp.mean, metrics)


def check_minibatches(n_envs: int, n_steps: int, n_minibatches: int) -> None:
    """Raise, naming the fix, when a rollout of ``n_envs x n_steps`` does not split into
    ``n_minibatches`` equal minibatches."""
    batch = n_envs * n_steps
    if batch % n_minibatches:
        raise ValueError(
            f"n_envs * n_steps = {batch} does not split into n_minibatches={n_minibatches} "
            f"equal minibatches; pick n_minibatches dividing {batch}."
        )


def merge_steps(rollout_leaf: jax.Array) -> jax.Array:
    """A rollout's ``[steps, copies, ...]`` leaf as one batch axis: ``[steps * copies, ...]``."""
    return rollout_leaf.reshape((-1, *rollout_leaf.shape[2:]))
