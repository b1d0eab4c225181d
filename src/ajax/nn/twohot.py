"""Discrete regression: a scalar predicted as a softmax over fixed bins and trained with the
cross-entropy to its two-hot encoding, as the world-model agents predict rewards and values
(DreamerV3, Hafner et al. 2023, section 3; TD-MPC2, Hansen et al. 2024, section 3.2). The
loss's gradient does not grow with the target's size, so returns of any scale train alike.

Two layouts of bins, each its paper's:

- :func:`symexp_bins`, DreamerV3's: bins spaced by ``symexp`` over ``[-20, 20]``, the target
  encoded in its own units between its two nearest bins;
- :func:`symlog_bins`, TD-MPC2's: bins spaced evenly over ``[-10, 10]`` in ``symlog``
  units, the target squashed by ``symlog`` (and clipped to the range) before it is encoded.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


def symlog(x: jax.Array) -> jax.Array:
    """``sign(x) * log(1 + |x|)``: the identity near zero, logarithmic far from it."""
    return jnp.sign(x) * jnp.log1p(jnp.abs(x))


def symexp(x: jax.Array) -> jax.Array:
    """The inverse of :func:`symlog`: ``sign(x) * (exp(|x|) - 1)``."""
    return jnp.sign(x) * jnp.expm1(jnp.abs(x))


@struct.dataclass
class TwoHotBins:
    """Fixed, increasing bins, symmetric about a middle bin of exactly 0 (as
    :func:`symexp_bins` and :func:`symlog_bins` build them; :meth:`decode` relies on it), and
    the squash applied to a target before it is placed among them (and undone on the
    prediction)."""

    values: jax.Array
    symlog_targets: bool = struct.field(pytree_node=False, default=False)

    def neighbours(self, x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``x [...]``'s two nearest bins, below and above, and the weight of the one above:
        closeness, in ``[0, 1]``; a target beyond the range sits on the end bin."""
        x = symlog(x) if self.symlog_targets else x
        bins = self.values
        x = jnp.clip(x, bins[0], bins[-1])
        above = jnp.clip(jnp.searchsorted(bins, x, side="right"), 1, len(bins) - 1)
        below = above - 1
        span = bins[above] - bins[below]
        return below, above, jnp.clip((x - bins[below]) / span, 0.0, 1.0)

    def encode(self, x: jax.Array) -> jax.Array:
        """``x [...]`` as weights over the bins ``[..., n]``: its two nearest bins weighted by
        closeness, summing to 1."""
        below, above, weight_above = self.neighbours(x)
        n = len(self.values)
        return (
            jax.nn.one_hot(below, n) * (1.0 - weight_above)[..., None]
            + jax.nn.one_hot(above, n) * weight_above[..., None]
        )

    def decode(self, logits: jax.Array) -> jax.Array:
        """The prediction of ``logits [..., n]``: the bins' mean under their softmax, then
        unsquashed. The bins are symmetric about a middle bin of 0 (both layouts are built
        so), so the mean is folded into one product over the upper half: each bin's value
        times its probability less its mirror's. Symmetric bins under uniform probabilities
        thus give exactly zero (a left-to-right sum leaves rounding error, which DreamerV3's
        reference also avoids), and no ``[..., n]`` array of weighted bins is formed."""
        probs = jax.nn.softmax(logits, axis=-1)
        half = self.values.shape[-1] // 2
        folded = probs[..., half + 1 :] - probs[..., :half][..., ::-1]
        mean = folded @ self.values[half + 1 :]
        return symexp(mean) if self.symlog_targets else mean

    def loss(self, logits: jax.Array, target: jax.Array) -> jax.Array:
        """The cross-entropy of ``logits [..., n]`` to ``target [...]``'s two-hot encoding
        (no gradient through the target): ``[...]``. Written as the log-normaliser less the
        two bins' logits, weighted: the same sum as over :meth:`encode`'s weights, without an
        ``[..., n]`` array of them, which XLA kept in memory, in both passes."""
        below, above, weight_above = jax.lax.stop_gradient(self.neighbours(target))
        pick = lambda i: jnp.take_along_axis(logits, i[..., None], axis=-1)[..., 0]  # noqa: E731
        chosen = (1.0 - weight_above) * pick(below) + weight_above * pick(above)
        return jax.nn.logsumexp(logits, axis=-1) - chosen


def _mirrored(lower_half: jax.Array) -> jax.Array:
    """Bins from their lower half, ending in the middle bin 0, and its mirror."""
    return jnp.concatenate([lower_half, -lower_half[-2::-1]])


def _check_odd(n: int) -> None:
    if n < 3 or n % 2 == 0:
        raise ValueError(f"Two-hot bins are symmetric about 0: an odd number, at least 3; got {n}.")


def symexp_bins(n: int = 255, limit: float = 20.0) -> TwoHotBins:
    """DreamerV3's bins: ``symexp`` of ``n`` points evenly over ``[-limit, limit]`` (255 over
    [-20, 20], the reference's ``symexp_twohot`` head); ``n`` is odd."""
    _check_odd(n)
    return TwoHotBins(_mirrored(symexp(jnp.linspace(-limit, 0.0, n // 2 + 1, dtype=jnp.float32))))


def symlog_bins(n: int = 101, limit: float = 10.0) -> TwoHotBins:
    """TD-MPC2's bins: ``n`` points evenly over ``[-limit, limit]`` in ``symlog`` units (101
    over [-10, 10], the reference's ``num_bins``, ``vmin`` and ``vmax``); ``n`` is odd."""
    _check_odd(n)
    return TwoHotBins(
        _mirrored(jnp.linspace(-limit, 0.0, n // 2 + 1, dtype=jnp.float32)), symlog_targets=True
    )
