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


def clip_by_agc(clip: float = 0.3, floor: float = 1e-3) -> optax.GradientTransformation:
    """Adaptive gradient clipping as DreamerV3's reference does it: each tensor's update
    scaled down to at most ``clip`` times its parameter's norm (that norm floored at
    ``floor``). ``optax.adaptive_grad_clip`` clips row by row instead (Brock et al. 2021), a
    different rule."""

    def update_fn(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        def one(update: jax.Array, param: jax.Array) -> jax.Array:
            limit = clip * jnp.maximum(floor, jnp.linalg.norm(param.ravel()))
            return update / jnp.maximum(1.0, jnp.linalg.norm(update.ravel()) / limit)

        return jax.tree.map(one, updates, params), state

    return optax.GradientTransformation(optax.init_empty_state, update_fn)


def laprop(
    learning_rate: float = 4e-5,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-20,
    agc: float = 0.3,
    warmup: int = 1000,
) -> optax.GradientTransformation:
    """LaProp (Ziyin et al. 2020) as DreamerV3 trains with it (Hafner et al. 2023; the
    reference's ``opt`` settings are the defaults): clipped as :func:`clip_by_agc`, divided by
    the root of the gradients' bias-corrected second moment, and only then averaged into a
    bias-corrected momentum (Adam averages first, then divides), with the step size ramped
    linearly from 0 over ``warmup`` updates."""
    schedule = optax.linear_schedule(0.0, learning_rate, warmup) if warmup else learning_rate
    return optax.chain(
        clip_by_agc(agc),
        optax.scale_by_rms(beta2, eps, eps_in_sqrt=False, bias_correction=True),
        optax.ema(beta1, debias=True),
        optax.scale_by_learning_rate(schedule),
    )
