"""Small update rules shared by the agents."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax


def optimizer_step(
    optimizer: optax.GradientTransformation,
    grads: Any,
    opt_state: Any,
    params: Any,
    learning_rate: jax.Array | float | None = None,
) -> tuple[Any, Any]:
    """``params`` after one step of ``optimizer`` on ``grads``, and its state. Where
    ``learning_rate`` is given, the optimizer gives a direction and the step is minus the
    learning rate times it: a rate that changes during the run (annealed) is then a traced
    value rather than part of the optimizer. Else the optimizer's updates are its steps."""
    updates, opt_state = optimizer.update(grads, opt_state, params)
    if learning_rate is not None:
        updates = jax.tree.map(lambda u: -learning_rate * u, updates)
    return optax.apply_updates(params, updates), opt_state


def soft_update(target: Any, online: Any, tau: float) -> Any:
    """Polyak averaging ``(1 - tau) * target + tau * online``; ``tau=1`` copies ``online``."""
    return optax.incremental_update(online, target, tau)


def select(condition: jax.Array, new: Any, old: Any) -> Any:
    """``new`` where ``condition`` holds, else ``old``, leaf by leaf.

    Under the vmap over seeds a ``lax.cond`` on per-seed state computes both branches anyway;
    where both branches are computed in any case, this says so plainly.
    """
    return jax.tree.map(lambda n, o: jnp.where(condition, n, o), new, old)


def annealed(learning_rate: float, progress: jax.Array, anneal: bool) -> jax.Array:
    """The step size at ``progress`` (0 at the start of the run, 1 at its end): decayed
    linearly to 0 when ``anneal``, else constant."""
    lr = jnp.asarray(learning_rate, jnp.float32)
    return lr * (1.0 - progress) if anneal else lr


def clipped_over_one_vector(
    max_grad_norm: float, direction: optax.GradientTransformation
) -> optax.GradientTransformation:
    """Gradients clipped by their global norm, then ``direction``, computed over one vector
    of every parameter (``optax.flatten``) rather than leaf by leaf: an update is then a few
    kernels where it was a few per leaf (the norm alone was a reduction per leaf), which
    compiled and ran faster for the agents that use it (PERFORMANCE_REPORT.md, "What the
    CPU tuning buys")."""
    return optax.flatten(optax.chain(optax.clip_by_global_norm(max_grad_norm), direction))
