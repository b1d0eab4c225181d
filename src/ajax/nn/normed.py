"""TD-MPC2's networks (Hansen et al. 2024, section 3 and appendix; the reference's
``common/layers.py``): every hidden layer is linear, then dropout (the Q-functions' first
layer only), LayerNorm and Mish; the encoder and the latent dynamics end in a normalised
layer whose activation is SimNorm, the heads in a plain linear layer.

Weights start normal with standard deviation 0.02 and biases at zero (the reference's
``init.weight_init``; PyTorch's ``trunc_normal_`` truncates at +-2 in absolute terms, 100
standard deviations out, so it is a plain normal in effect). The reward and Q heads' last
weights start at zero, so their first predictions are the bins' centre.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.nn.mlp import ACTIVATIONS, dense, simnorm

_WEIGHTS = nn.initializers.normal(0.02)


class NormedMLP(nn.Module):
    """Hidden layers of ``hidden_sizes`` units, each ``Linear -> [Dropout] -> LayerNorm ->
    Mish``, then ``out_dim`` outputs: SimNorm over a normalised layer when ``simnorm``, else
    a linear layer (zero-initialised when ``zero_out``)."""

    hidden_sizes: Sequence[int]
    out_dim: int
    simnorm: bool = False
    zero_out: bool = False
    #: Dropout after the first layer, active only when the call is not ``deterministic``.
    dropout: float = 0.0

    @nn.compact
    def __call__(self, x: jax.Array, deterministic: bool = True) -> jax.Array:
        mish = ACTIVATIONS["mish"]
        for i, size in enumerate(self.hidden_sizes):
            x = dense(size, kernel_init=_WEIGHTS)(x)
            if i == 0 and self.dropout:
                x = nn.Dropout(self.dropout, deterministic=deterministic)(x)
            x = mish(nn.LayerNorm(epsilon=1e-5)(x))
        if self.simnorm:
            return simnorm(nn.LayerNorm(epsilon=1e-5)(dense(self.out_dim, kernel_init=_WEIGHTS)(x)))
        kernel = nn.initializers.zeros if self.zero_out else _WEIGHTS
        return dense(self.out_dim, kernel_init=kernel)(x)


class NormedEnsemble(nn.Module):
    """``members`` independent :class:`NormedMLP` heads on ``concat(z, action)``, evaluated
    as one batched network (TD-MPC2's Q-functions): outputs ``[members, ..., out_dim]``.
    Each member draws its own dropout mask."""

    hidden_sizes: Sequence[int]
    out_dim: int
    members: int
    dropout: float = 0.0

    @nn.compact
    def __call__(self, z: jax.Array, action: jax.Array, deterministic: bool = True) -> jax.Array:
        ensemble = nn.vmap(
            NormedMLP,
            variable_axes={"params": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=(None, None),
            out_axes=0,
            axis_size=self.members,
        )
        head = ensemble(self.hidden_sizes, self.out_dim, zero_out=True, dropout=self.dropout)
        return head(jnp.concatenate([z, action], axis=-1), deterministic)
