"""The categorical latents of DreamerV3's world model (Hafner et al. 2023, section 3 and
appendix; the reference's ``rssm.py``): each latent is ``stoch`` one-hot variables of
``classes`` classes, their probabilities mixed with 1% uniform so that no class's
log-probability (and so no KL) explodes, sampled with straight-through gradients.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def unimix_logits(logits: jax.Array, mix: float = 0.01) -> jax.Array:
    """Log-probabilities of ``(1 - mix) * softmax(logits) + mix / classes`` over the last
    axis."""
    probs = jax.nn.softmax(logits, axis=-1)
    return jnp.log((1.0 - mix) * probs + mix / logits.shape[-1])


def straight_through_sample(key: jax.Array, logits: jax.Array) -> jax.Array:
    """A one-hot sample of each categorical variable, whose gradient is that of the
    probabilities (the straight-through estimator, Bengio et al. 2013). Each variable is
    drawn by inverting its cumulative probabilities at one uniform number, where Gumbel-max
    (``jax.random.categorical``) hashes and takes two logarithms of one per class."""
    probs = jax.nn.softmax(logits, axis=-1)
    uniform = jax.random.uniform(key, (*logits.shape[:-1], 1))
    index = jnp.sum(jnp.cumsum(probs, axis=-1)[..., :-1] < uniform, axis=-1)
    one_hot = jax.nn.one_hot(index, logits.shape[-1], dtype=logits.dtype)
    return jax.lax.stop_gradient(one_hot - probs) + probs


def categorical_kl(p_logits: jax.Array, q_logits: jax.Array) -> jax.Array:
    """``KL[p || q]`` of categorical variables ``[..., stoch, classes]``, summed over the
    ``stoch`` variables: ``[...]``."""
    p_log = jax.nn.log_softmax(p_logits, axis=-1)
    q_log = jax.nn.log_softmax(q_logits, axis=-1)
    return (jnp.exp(p_log) * (p_log - q_log)).sum(axis=(-2, -1))


def balanced_kl(
    posterior: jax.Array,
    prior: jax.Array,
    free_nats: float = 1.0,
    dynamics_scale: float = 1.0,
    representation_scale: float = 0.1,
) -> tuple[jax.Array, jax.Array]:
    """DreamerV3's KL balancing with free bits, from unimixed logits ``[..., stoch,
    classes]``: the dynamics loss ``max(free, KL[sg(posterior) || prior])`` trains the prior
    towards the posterior, the representation loss ``max(free, KL[posterior || sg(prior)])``
    the posterior towards the prior, weighted 1 and 0.1. Below ``free_nats`` a loss is flat,
    so a latent already well predicted is left alone. Returns the weighted sum and the two
    losses ``(dyn, rep)`` stacked on the last axis, for the logs."""
    stop = jax.lax.stop_gradient
    dyn = jnp.maximum(free_nats, categorical_kl(stop(posterior), prior))
    rep = jnp.maximum(free_nats, categorical_kl(posterior, stop(prior)))
    total = dynamics_scale * dyn + representation_scale * rep
    return total, jnp.stack([dyn, rep], axis=-1)
