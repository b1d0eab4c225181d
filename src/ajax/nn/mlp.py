"""Multi-layer perceptrons."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


def mish(x: jax.Array) -> jax.Array:
    """``x tanh(softplus(x))`` (Misra 2019), TD-MPC2's activation, with one exponential: for
    ``e = exp(x)``, ``tanh(log(1 + e)) = n / (n + 2)`` where ``n = e (e + 2)``. The three
    transcendental functions of ``jax.nn.mish`` (exp, log1p, tanh) become one, which made
    TD-MPC2's planning step, bound by its element-wise kernels, cheaper. Past ``x = 20`` the
    ratio is 1 in float32, so the exponential is capped there rather than overflowing."""
    e = jnp.exp(jnp.minimum(x, 20.0))
    n = e * (e + 2.0)
    return x * (n / (n + 2.0))


ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "elu": nn.elu,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "leaky_relu": nn.leaky_relu,
    "mish": mish,
}


def simnorm(x: jax.Array, group: int = 8) -> jax.Array:
    """Simplicial normalisation (TD-MPC2, Hansen et al. 2024, section 3.2): the last axis
    split into groups of ``group`` features, each group a softmax, so that the latent lies on
    a product of simplices and stays bounded however long the model unrolls."""
    if x.shape[-1] % group:
        raise ValueError(f"simnorm needs a width divisible by {group}, got {x.shape[-1]}.")
    groups = x.reshape(*x.shape[:-1], -1, group)
    return jax.nn.softmax(groups, axis=-1).reshape(x.shape)


#: The product of the layers :func:`dense` makes while it is set (:func:`layer_products`);
#: None for Flax's own.
_LAYER_PRODUCT: contextvars.ContextVar[Callable[..., jax.Array] | None] = contextvars.ContextVar(
    "layer_product", default=None
)


@contextlib.contextmanager
def layer_products(product: Callable[..., jax.Array] | None) -> Iterator[None]:
    """Within the block (on this thread), the layers :func:`dense` makes compute ``product``
    (a ``lax.dot_general`` replacement; None for Flax's own). Layers are made when a module
    is applied, so this reaches every layer of a network traced inside the block: how the
    CPU tuning (:func:`ajax._xla.weight_gradients_for`) chooses the weight gradients' form."""
    token = _LAYER_PRODUCT.set(product)
    try:
        yield
    finally:
        _LAYER_PRODUCT.reset(token)


def dense(size: int, **kwargs: Any) -> nn.Dense:
    """``flax.linen.Dense``, computing the product :func:`layer_products` sets, if any."""
    product = _LAYER_PRODUCT.get()
    if product is not None:
        kwargs["dot_general"] = product
    return nn.Dense(size, **kwargs)


def _dense(size: int, fan_in: int, init: str, gain: float) -> nn.Dense:
    """A layer of ``size`` units on ``fan_in`` inputs, initialised as ``init`` says
    (:data:`INITS`)."""
    if init == "orthogonal":
        return dense(size, kernel_init=nn.initializers.orthogonal(gain))
    if init == "torch":
        bound = 1.0 / np.sqrt(fan_in)
        return dense(
            size,
            kernel_init=nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform"),
            bias_init=lambda key, shape, dtype=jnp.float32: jax.random.uniform(
                key, shape, dtype, -bound, bound
            ),
        )
    return dense(size)


#: Weight initialisations: orthogonal with a gain per layer; Flax's default (LeCun-normal
#: weights, zero biases; purejaxql's); PyTorch's ``nn.Linear`` default (weights and biases
#: uniform in +-1/sqrt(fan_in); Stable-Baselines3's networks).
INITS = ("orthogonal", "lecun", "torch")


def unit_norm(x: jax.Array) -> jax.Array:
    """``x / ||x||`` along the last axis. A vector of norm below 1e-12 maps to zero with zero
    gradient, the norm's subgradient there: dividing by the norm, as AVG's reference does,
    gives NaN gradients (and its forward pass NaN) on a zero feature vector, which a zero
    observation through zero biases produces."""
    square = jnp.sum(x * x, axis=-1, keepdims=True)
    nonzero = square > 1e-24
    return jnp.where(nonzero, x * jax.lax.rsqrt(jnp.where(nonzero, square, 1.0)), 0.0)


class MLP(nn.Module):
    """Hidden layers then a linear output of ``out_dim`` units.

    With the default ``weight_init="orthogonal"``, hidden layers use orthogonal weights with gain
    ``hidden_gain`` (sqrt(2)) and the output layer gain ``out_gain`` (Engstrom et al. 2020,
    "Implementation Matters": 0.01 for policy logits, 1.0 for values), as PPO
    implementations commonly do; :data:`INITS` lists the others.
    """

    hidden_sizes: Sequence[int]
    out_dim: int
    activation: str = "tanh"
    out_gain: float = 1.0
    #: LayerNorm before each hidden activation (PQN's normalisation, Gallici et al. 2025).
    layer_norm: bool = False
    #: One of :data:`INITS`.
    weight_init: str = "orthogonal"
    #: The orthogonal gain of the hidden layers.
    hidden_gain: float = float(np.sqrt(2))
    #: Divide the last hidden features by their Euclidean norm before the output layer
    #: (AVG's penultimate normalisation, Vasan et al. 2024, after Bjorck et al. 2022).
    normalize_features: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        for size in self.hidden_sizes:
            x = _dense(size, x.shape[-1], self.weight_init, self.hidden_gain)(x)
            x = act(nn.LayerNorm()(x) if self.layer_norm else x)
        if self.normalize_features:
            x = unit_norm(x)
            # Kept only when applied with mutable=["intermediates"] (tests read it).
            self.sow("intermediates", "features", x)
        return _dense(self.out_dim, x.shape[-1], self.weight_init, self.out_gain)(x)


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
