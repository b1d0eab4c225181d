"""Epochs of shuffled minibatches over one rollout, shared by the on-policy style agents."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from ajax.updates import optimizer_step


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
    annealed) step size. ``state`` has ``params``, ``opt_state`` (from :func:`fit_opt_state`)
    and ``key`` fields; returns it with all three moved on, and the mean of the loss's
    metrics.

    Through the fit the parameters are carried as their matrices and one vector of every
    other leaf (:func:`_matrices_apart`), and ``optimizer`` updates them in that layout, so
    its state is initialised in it too. A product reads a matrix where it lies; biases and
    normalisation scales are read through slices of the vector that XLA fuses into the
    element-wise kernels using them. A minibatch step then ends in one kernel per matrix and
    one for the vector, where it ended in one per leaf. XLA's CPU runtime hands half of the
    ready kernels to another thread when more than eight are ready at once, as every leaf's
    update is: on two cores each step then moved between cores, a cost that exceeded the
    update itself for narrow networks at one seed (docs/developer-performance.md, "Kernels ready at
    once")."""
    key, epochs_key = jax.random.split(state.key)
    size = jax.tree.leaves(batch)[0].shape[0]

    carried, join = _matrices_apart(state.params)

    def carried_loss(carried, minibatch):
        return loss(join(carried), minibatch)

    def step(carry, minibatch):
        carried, opt_state = carry
        grads, metrics = jax.grad(carried_loss, has_aux=True)(carried, minibatch)
        return optimizer_step(optimizer, grads, opt_state, carried, learning_rate), metrics

    def epoch(carry, epoch_key):
        order = permutation(epoch_key, size)
        minibatches = jax.tree.map(
            lambda x: x[order].reshape((n_minibatches, -1, *x.shape[1:])), batch
        )
        return jax.lax.scan(step, carry, minibatches)

    (carried, opt_state), metrics = jax.lax.scan(
        epoch, (carried, state.opt_state), jax.random.split(epochs_key, n_epochs)
    )
    state = state.replace(params=join(carried), opt_state=opt_state, key=key)
    return state, jax.tree.map(jnp.mean, metrics)


def permutation(key: jax.Array, n: int) -> jax.Array:
    """``jax.random.permutation(key, n)``, the same int32 array, computed with sorts of one
    uint32 operand.

    JAX shuffles by sorting ``arange(n)`` under random 32-bit keys (``lax.sort_key_val``,
    stable, so equal keys keep their order), in one round or more by ``n``. XLA's CPU runtime
    sorts a lone integer array with a direct comparison but calls a compiled comparator for
    every comparison of a key-value sort, which made JAX's shuffle several times slower than
    a sort of one operand (docs/developer-performance.md, "The shuffle's sort"). So each
    round's stable order is a radix sort over the keys' two 16-bit halves, low half first
    (:func:`_stable_argsort`). Beyond 65,536 elements a position no longer fits in 16 bits,
    and JAX's own shuffle runs."""
    if n > 1 << 16:
        return jax.random.permutation(key, n)
    # JAX's number of rounds (jax._src.random._shuffle), so its collision bound holds too.
    rounds = int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))
    order = jnp.arange(n, dtype=jnp.int32)
    for _ in range(rounds):
        key, round_key = jax.random.split(key)
        order = order[_stable_argsort(jax.random.bits(round_key, (n,), jnp.uint32))]
    return order


def _stable_argsort(keys: jax.Array) -> jax.Array:
    """The indices that sort ``keys`` (uint32, at most 65,536 of them), equal keys in index
    order. Each pass sorts lone uint32 values holding a 16-bit half of a key above the
    element's position in the order so far: the values are distinct, and their position
    bits both carry the order out of the sort and break ties as a stable sort would."""
    position = jnp.arange(keys.shape[-1], dtype=jnp.uint32)
    low = jnp.uint32(0xFFFF)
    by_low = jax.lax.sort(((keys & low) << 16) | position) & low
    by_high = jax.lax.sort((keys[by_low] & ~low) | position) & low
    return by_low[by_high].astype(jnp.int32)


def fit_opt_state(optimizer: optax.GradientTransformation, params: Any) -> optax.OptState:
    """``optimizer``'s initial state for :func:`fit_minibatches`, in the layout the fit
    updates ``params`` in."""
    return optimizer.init(_matrices_apart(params)[0])


def _matrices_apart(params: Any) -> tuple[Any, Callable[[Any], Any]]:
    """``params`` as its matrices (the leaves of two or more axes, in order) and one vector
    of its other leaves, and the function that joins such a pair back into ``params``'s
    tree."""
    leaves, treedef = jax.tree.flatten(params)
    is_matrix = [leaf.ndim >= 2 for leaf in leaves]
    matrices = tuple(leaf for leaf, m in zip(leaves, is_matrix, strict=True) if m)
    vector, unravel = ravel_pytree(
        [leaf for leaf, m in zip(leaves, is_matrix, strict=True) if not m]
    )

    def join(carried: Any) -> Any:
        matrices, others = iter(carried[0]), iter(unravel(carried[1]))
        return jax.tree.unflatten(treedef, [next(matrices if m else others) for m in is_matrix])

    return (matrices, vector), join


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
