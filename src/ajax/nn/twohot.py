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
    """Fixed, increasing bins and the squash applied to a target before it is placed among
    them (and undone on the prediction)."""

    values: jax.Array
    symlog_targets: bool = struct.field(pytree_node=False, default=False)

    def encode(self, x: jax.Array) -> jax.Array:
        """``x [...]`` as weights over the bins ``[..., n]``: its two nearest bins weighted by
        closeness, summing to 1; a target beyond the range sits on the end bin."""
        x = symlog(x) if self.symlog_targets else x
        bins = self.values
        x = jnp.clip(x, bins[0], bins[-1])
        above = jnp.clip(jnp.searchsorted(bins, x, side="right"), 1, len(bins) - 1)
        below = above - 1
        span = bins[above] - bins[below]
        weight_above = jnp.clip((x - bins[below]) / span, 0.0, 1.0)
        n = len(bins)
        return (
            jax.nn.one_hot(below, n) * (1.0 - weight_above)[..., None]
            + jax.nn.one_hot(above, n) * weight_above[..., None]
        )

    def decode(self, logits: jax.Array) -> jax.Array:
        """The prediction of ``logits [..., n]``: the bins' mean under their softmax, summed
        from both ends towards the middle so that symmetric bins under uniform probabilities
        give exactly zero (a left-to-right sum leaves rounding error, which DreamerV3's
        reference also avoids), then unsquashed."""
        probs = jax.nn.softmax(logits, axis=-1)
        weighted = probs * self.values
        half = self.values.shape[-1] // 2
        low = weighted[..., :half][..., ::-1]
        high = weighted[..., self.values.shape[-1] - half :]
        middle = weighted[..., half : self.values.shape[-1] - half].sum(-1)
        mean = (low + high).sum(-1) + middle
        return symexp(mean) if self.symlog_targets else mean

    def loss(self, logits: jax.Array, target: jax.Array) -> jax.Array:
        """The cross-entropy of ``logits [..., n]`` to ``target [...]``'s two-hot encoding
        (no gradient through the target): ``[...]``."""
        weights = jax.lax.stop_gradient(self.encode(target))
        return -(weights * jax.nn.log_softmax(logits, axis=-1)).sum(-1)


def symexp_bins(n: int = 255, limit: float = 20.0) -> TwoHotBins:
    """DreamerV3's bins: ``symexp`` of ``n`` points evenly over ``[-limit, limit]`` (255 over
    [-20, 20], the reference's ``symexp_twohot`` head), built from the negative half and its
    mirror so that the middle bin is exactly zero; ``n`` is odd."""
    if n < 3 or n % 2 == 0:
        raise ValueError(f"symexp_bins needs an odd number of bins, at least 3; got {n}.")
    half = symexp(jnp.linspace(-limit, 0.0, n // 2 + 1, dtype=jnp.float32))
    return TwoHotBins(jnp.concatenate([half, -half[-2::-1]]))


def symlog_bins(n: int = 101, low: float = -10.0, high: float = 10.0) -> TwoHotBins:
    """TD-MPC2's bins: ``n`` points evenly over ``[low, high]`` in ``symlog`` units (101 over
    [-10, 10], the reference's ``num_bins``, ``vmin`` and ``vmax``)."""
    return TwoHotBins(jnp.linspace(low, high, n, dtype=jnp.float32), symlog_targets=True)
