"""The block-diagonal GRU of DreamerV3's recurrent state-space model (Hafner et al. 2023,
appendix; the reference's ``rssm.py``): the deterministic state is split into ``blocks``
groups, and each group's gates see its own slice of the state and the whole input, so a
state of width ``d`` costs ``d^2 / blocks`` weights per layer rather than ``d^2``.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.nn.mlp import ACTIVATIONS


@jax.custom_jvp
def _add_bias(x: jax.Array, bias: jax.Array) -> jax.Array:
    """``x [..., g, w] + bias [g, w]``, whose bias tangent is broadcast over the rows by a
    product with a column of ones, so that the bias gradient (its transpose) is a product
    with a row of ones rather than a sum over the rows. XLA's CPU backend fused that sum,
    with the pieces' padding, into a kernel that computed the GRU gates' backward again
    element by element at every step of the observe scan; as a product it reads the
    gradient once (PERFORMANCE_REPORT.md, "The world models"). The value is the plain sum,
    and forward-mode derivatives still work."""
    return x + bias


@_add_bias.defjvp
def _add_bias_tangent(
    primals: tuple[jax.Array, jax.Array], tangents: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, jax.Array]:
    (x, bias), (dx, dbias) = primals, tangents
    rows = math.prod(x.shape[:-2])
    ones = jnp.ones((rows, 1), x.dtype)
    spread = (ones @ dbias.reshape(1, -1)).reshape(x.shape)
    return x + bias, dx + spread


class BlockLinear(nn.Module):
    """A dense layer whose input and output are split into ``blocks`` groups, output group
    ``k`` computed from input group ``k`` alone (a block-diagonal kernel), and from a
    ``shared`` input every group reads whole: the kernel is stored as ``[blocks, in / blocks
    + shared, units / blocks]``, each group's rows its own inputs' and then the shared ones'.

    The shared part is one dense product and the block part one product batched over the
    groups, leading: the same sums as one product over a copy of the shared input in every
    group, which XLA's CPU backend ran about twice as slowly (PERFORMANCE_REPORT.md, "The
    world models").

    The output comes as ``parts`` arrays ``[..., units / parts]``: each group's units split
    into ``parts`` equal pieces (the GRU's three gates), piece ``i`` of every group in the
    groups' order. The two products are split before they are added, and the bias after:
    XLA fused one sum over the whole output with the split into index arithmetic that ran
    the GRU's gates about 2.5 times slower. The bias's gradient is summed by a product
    (:func:`_add_bias`)."""

    units: int
    blocks: int
    parts: int = 1

    @nn.compact
    def __call__(self, x: jax.Array, shared: jax.Array | None = None) -> tuple[jax.Array, ...]:
        g = self.blocks
        if x.shape[-1] % g or self.units % (g * self.parts):
            raise ValueError(
                f"BlockLinear splits {x.shape[-1]} inputs and {self.units} units into "
                f"{g} blocks of {self.parts} parts: both must divide evenly."
            )
        own = x.shape[-1] // g
        n_shared = 0 if shared is None else shared.shape[-1]
        width = self.units // g
        kernel = self.param(
            "kernel",
            nn.initializers.lecun_normal(in_axis=1, out_axis=2, batch_axis=(0,)),
            (g, own + n_shared, width),
        )
        bias = self.param("bias", nn.initializers.zeros, (self.units,)).reshape(g, width)
        grouped = jnp.swapaxes(x.reshape(-1, g, own), 0, 1)
        batch = x.shape[:-1]
        block = jnp.swapaxes(grouped @ kernel[:, :own], 0, 1).reshape(*batch, g, width)
        if shared is not None:
            whole = jnp.swapaxes(kernel[:, own:], 0, 1).reshape(n_shared, self.units)
            from_shared = (shared @ whole).reshape(*batch, g, width)
        piece = width // self.parts

        def part(i: int) -> jax.Array:
            cut = slice(i * piece, (i + 1) * piece)
            out = block[..., cut] if shared is None else block[..., cut] + from_shared[..., cut]
            return _add_bias(out, bias[:, cut]).reshape(*batch, g * piece)

        return tuple(part(i) for i in range(self.parts))


class BlockGRU(nn.Module):
    """One step of the block GRU: ``(deter [..., deter], inputs [..., n]) -> deter``.

    Each group of the state is joined by the whole input, passed through ``layers``
    block-diagonal layers (RMS-normalised over the whole state, as the reference's, which
    couples the groups through one scale; then ``activation``), and a last block layer gives
    the group's reset, candidate and update gates. The update gate's bias starts at
    -1, so a fresh cell keeps most of its state."""

    deter: int
    blocks: int = 8
    layers: int = 1
    activation: str = "silu"

    @nn.compact
    def __call__(self, deter: jax.Array, inputs: jax.Array) -> jax.Array:
        g = self.blocks
        if self.deter % g:
            raise ValueError(
                f"BlockGRU splits a state of {self.deter} into {g} blocks: they must divide evenly."
            )
        x, shared = deter, inputs
        for _ in range(self.layers):
            (x,) = BlockLinear(self.deter, g)(x, shared)
            x = ACTIVATIONS[self.activation](nn.RMSNorm(epsilon=1e-4)(x))
            shared = None
        reset, candidate, update = BlockLinear(3 * self.deter, g, parts=3)(x, shared)
        candidate = jnp.tanh(jax.nn.sigmoid(reset) * candidate)
        update = jax.nn.sigmoid(update - 1.0)
        return update * candidate + (1.0 - update) * deter
