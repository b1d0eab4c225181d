"""Multi-layer perceptrons with orthogonal initialisation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "elu": nn.elu,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "leaky_relu": nn.leaky_relu,
}


class MLP(nn.Module):
    """Hidden layers then a linear output of ``out_dim`` units.

    Hidden layers use orthogonal weights with gain sqrt(2) and the output layer gain
    ``out_gain`` (Engstrom et al. 2020, "Implementation Matters": 0.01 for policy logits,
    1.0 for values), as PPO implementations commonly do.
    """

    hidden_sizes: Sequence[int]
    out_dim: int
    activation: str = "tanh"
    out_gain: float = 1.0
    #: LayerNorm before each hidden activation (PQN's normalisation, Gallici et al. 2025).
    layer_norm: bool = False
    #: Orthogonal weights as above; False keeps Flax's LeCun-normal default (purejaxql's).
    orthogonal: bool = True
    #: The orthogonal gain of the hidden layers.
    hidden_gain: float = float(np.sqrt(2))
    #: Divide the last hidden features by their Euclidean norm before the output layer
    #: (AVG's penultimate normalisation, Vasan et al. 2024, after Bjorck et al. 2022).
    normalize_features: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        init = nn.initializers.orthogonal if self.orthogonal else None
        for size in self.hidden_sizes:
            x = nn.Dense(size, **({"kernel_init": init(self.hidden_gain)} if init else {}))(x)
            x = act(nn.LayerNorm()(x) if self.layer_norm else x)
        if self.normalize_features:
            x = x / jnp.maximum(jnp.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
            # Kept only when applied with mutable=["intermediates"] (tests read it).
            self.sow("intermediates", "features", x)
        return nn.Dense(self.out_dim, **({"kernel_init": init(self.out_gain)} if init else {}))(x)


class MLPHead(nn.Module):
    """An MLP whose outputs ``head`` turns into something else, typically a distribution
    (``MLPHead(MLP(sizes, n_actions, out_gain=0.01), Categorical)``)."""

    mlp: MLP
    head: Callable[[jax.Array], Any]

    def __call__(self, x: jax.Array) -> Any:
        return self.head(self.mlp(x))


def flatten_obs(obs: jax.Array, obs_ndim: int) -> jax.Array:
    """Merge the observation's own axes so that an MLP sees one feature axis."""
    return jnp.reshape(obs, (*obs.shape[: obs.ndim - obs_ndim], -1))
