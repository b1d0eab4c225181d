"""Critic-ensemble maths shared by the continuous-action off-policy agents (SAC, TD3, REDQ).

Every agent here keeps ``n_critics`` Q-networks ``Q_i(s, a)`` and their Polyak-averaged
targets, and bootstraps from a pessimistic reduction of the target ensemble: the minimum over
two critics (clipped double Q-learning, Fujimoto et al. 2018) or, for REDQ, the minimum over a
random subset of ``n_target_critics`` of them drawn afresh at each update (Chen et al. 2021).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from ajax.nn import MLP


class QEnsemble(nn.Module):
    """``n_critics`` independent MLPs on ``concat(obs, action)``, evaluated as one batched
    network: returns Q-values of shape ``[n_critics, ...]``."""

    hidden_sizes: Sequence[int]
    activation: str
    n_critics: int

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        ensemble = nn.vmap(
            MLP,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            in_axes=None,
            out_axes=0,
            axis_size=self.n_critics,
        )
        x = jnp.concatenate([obs, action], axis=-1)
        return ensemble(self.hidden_sizes, 1, self.activation, weight_init="lecun")(x)[..., 0]


def critic_subset(key: jax.Array | None, params: Any, subset_size: int) -> Any:
    """The parameters of ``subset_size`` members of an ensemble (every leaf stacked on axis
    0, as :class:`QEnsemble` keeps them), drawn without replacement: REDQ's in-target subset
    (Chen et al. 2021, Algorithm 1 line 8). Evaluating only the members drawn, rather than the
    whole ensemble and then selecting, spares ``n_critics - subset_size`` forward passes per
    update, as the authors' code does. With ``subset_size`` equal to the ensemble size the
    parameters pass through whole, and no key is needed."""
    n_critics = jax.tree.leaves(params)[0].shape[0]
    if subset_size == n_critics:
        return params
    members = jax.random.choice(key, n_critics, (subset_size,), replace=False)
    return jax.tree.map(lambda leaf: leaf[members], params)


def temperature_loss(log_alpha: jax.Array, log_prob: jax.Array, target_entropy: float) -> jax.Array:
    """Loss of SAC's automatic temperature (Haarnoja et al. 2018b, eq. 18), in ``log alpha``:
    its gradient raises alpha when the policy's entropy ``-log_prob`` falls below
    ``target_entropy`` and lowers it when above."""
    return -(log_alpha * jax.lax.stop_gradient(log_prob + target_entropy)).mean()
