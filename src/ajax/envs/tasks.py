"""Differentiable control tasks: environments whose step can be backpropagated through.

An analytic-policy-gradient agent differentiates a rollout's return through the environment's
``step``, so every quantity on the path from action to reward must have an exact, finite
gradient. :class:`PendulumTracking` is such a task: the classic pendulum (gym's Pendulum-v1)
must follow a reference angle that swings around upright during the episode.

Why each piece is smooth:

* **Dynamics.** Gym's Pendulum-v1 equations are a sine and two Euler updates: smooth already.
  The angle is never wrapped (``theta`` may grow past pi); only its cosine and sine are used.
* **Speed limit.** Gym clips the speed to ``[-8, 8]``, whose gradient vanishes at the bound.
  Here the speed is passed through :func:`soft_clip`: the identity up to ``speed_knee`` (so
  the dynamics equal gym's there), then a ``tanh`` that approaches ``max_speed`` without
  reaching it. The join is twice continuously differentiable and the gradient stays positive.
* **Torque.** The action is clipped to ``[-2, 2]`` as in gym: the gradient is exact inside the
  bounds, zero beyond them (where the torque indeed no longer changes).
* **Reward.** ``2 (1 - cos(theta - ref))`` replaces gym's squared wrapped angle: it equals
  ``(theta - ref)**2`` to second order, is periodic without a modulo, and is smooth everywhere.
* **Reference.** ``ref(t) = A sin(omega t dt + phi)``, a smooth function of time; its
  amplitude, frequency and phase are drawn at reset and live in the state.
* **Episode end.** Episodes are only truncated (at ``max_episode_steps``), never terminated,
  so a rollout's length does not depend on the actions.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ajax.envs.core import Env, StepResult, checked_params
from ajax.envs.spaces import Box

# Physical constants of gym's Pendulum-v1 (gym/envs/classic_control/pendulum.py, also
# gymnasium and gymnax): gravity g, mass m, length l, time step dt, torque and speed bounds.
GRAVITY = 10.0
MASS = 1.0
LENGTH = 1.0
DT = 0.05
MAX_TORQUE = 2.0
MAX_SPEED = 8.0


@dataclass(frozen=True)
class PendulumTrackingParams:
    """The parameters of :class:`PendulumTracking`, fixed for the environment's lifetime."""

    #: Steps after which an episode is truncated (gym Pendulum-v1's time limit: 200 = 10 s).
    max_episode_steps: int = 200
    #: Range (radians) the reference's amplitude is drawn from at reset. Holding the pendulum
    #: at angle ``a`` from upright takes torque ``m g l sin(a) / 2 = 5 sin(a)``, so amplitudes
    #: beyond about 0.4 rad cannot be tracked with the torque bound of 2; 0.3 leaves margin for
    #: the acceleration.
    amplitude_range: tuple[float, float] = (0.05, 0.3)
    #: Range (Hz) the reference's frequency is drawn from: 1 to 3 swings per 10 s episode,
    #: slow enough for the bounded torque to follow at the largest amplitude.
    frequency_range: tuple[float, float] = (0.1, 0.3)
    #: Half-width (radians) of the uniform offset of the initial angle from the reference.
    initial_angle_noise: float = 0.1
    #: Half-width (rad/s) of the uniform offset of the initial speed from the reference's rate.
    initial_speed_noise: float = 0.1
    #: Speed (rad/s) up to which the speed limit is the identity, as gym's clip is; beyond it
    #: the speed saturates smoothly towards ``max_speed`` = 8. 0 gives ``8 tanh(v / 8)``.
    speed_knee: float = 6.0


def _check_params(params: PendulumTrackingParams) -> None:
    if not (
        isinstance(params.max_episode_steps, (int, np.integer)) and params.max_episode_steps > 0
    ):
        raise ValueError(
            f"max_episode_steps must be a positive int, got {params.max_episode_steps!r}."
        )
    for name in ("amplitude_range", "frequency_range"):
        low, high = getattr(params, name)
        if not 0 <= low <= high:
            raise ValueError(f"{name} must be (low, high) with 0 <= low <= high, got {low, high}.")
    for name in ("initial_angle_noise", "initial_speed_noise"):
        if getattr(params, name) < 0:
            raise ValueError(f"{name} must be >= 0, got {getattr(params, name)}.")
    if not 0 <= params.speed_knee < MAX_SPEED:
        raise ValueError(f"speed_knee must lie in [0, {MAX_SPEED}), got {params.speed_knee}.")


def soft_clip(x: jax.Array, knee: float, limit: float) -> jax.Array:
    """``x`` where ``|x| <= knee``; beyond, ``knee + (limit - knee) tanh(...)`` towards ``limit``.

    Value, slope (1) and curvature (0) agree at the knee, so the result is twice continuously
    differentiable, and its gradient is positive everywhere (until ``tanh`` rounds to 1, far
    beyond the speeds one step can reach). Both branches are finite everywhere, so the
    ``where`` passes exact gradients.
    """
    width = limit - knee
    magnitude = knee + width * jnp.tanh((jnp.abs(x) - knee) / width)
    return jnp.where(jnp.abs(x) <= knee, x, jnp.sign(x) * magnitude)


@struct.dataclass
class PendulumTrackingState:
    """One episode's state: the pendulum, the step count and the reference's parameters."""

    #: Angle from upright (radians, counter-clockwise, never wrapped).
    theta: jax.Array
    #: Angular speed (rad/s).
    theta_dot: jax.Array
    #: Steps taken in this episode.
    time: jax.Array
    #: The reference's amplitude (radians).
    amplitude: jax.Array
    #: The reference's angular frequency (rad/s).
    omega: jax.Array
    #: The reference's phase (radians).
    phase: jax.Array


def reference(state: PendulumTrackingState) -> tuple[jax.Array, jax.Array]:
    """The reference angle and its rate at the state's time."""
    angle = state.omega * state.time * DT + state.phase
    return state.amplitude * jnp.sin(angle), state.amplitude * state.omega * jnp.cos(angle)


def tracking_reward(state: PendulumTrackingState, torque: jax.Array) -> jax.Array:
    """Minus the tracking cost of ``state`` under ``torque`` (0 exactly on the reference).

    Gym's Pendulum-v1 cost ``angle**2 + 0.1 speed**2 + 0.001 torque**2`` taken relative to the
    reference, with ``2 (1 - cos(error))`` for the squared wrapped angle: equal to second
    order, and smooth.
    """
    ref, ref_dot = reference(state)
    angle_cost = 2.0 * (1.0 - jnp.cos(state.theta - ref))
    return -(angle_cost + 0.1 * (state.theta_dot - ref_dot) ** 2 + 0.001 * torque**2)


class PendulumTracking(Env):
    """Pendulum-v1's pendulum tracking a sinusoidal reference around upright; differentiable.

    Observation (7 floats): ``[cos theta, sin theta, theta_dot, cos ref, sin ref, ref_dot,
    omega]``; ``omega``, the reference's angular frequency, together with ``ref`` and
    ``ref_dot`` fixes the reference's future, so the task is Markov. Action: torque in
    ``[-2, 2]``, shape ``(1,)``. Reward: :func:`tracking_reward` of the state the action is
    applied in (gym's convention). ``env_params`` override :class:`PendulumTrackingParams`.
    """

    env_id = "ajax/PendulumTracking-v0"
    differentiable = True

    def __init__(self, **env_params: Any):
        fields = dataclasses.fields(PendulumTrackingParams)
        defaults = {f.name: f.default for f in fields}
        whole = [f.name for f in fields if f.type in (int, "int")]
        self.params = PendulumTrackingParams(
            **checked_params(self.env_id, env_params, defaults, "parameters", whole)
        )
        _check_params(self.params)
        self.max_episode_steps = self.params.max_episode_steps
        self.action_space = Box(-MAX_TORQUE, MAX_TORQUE, (1,))
        max_omega = 2 * math.pi * self.params.frequency_range[1]
        max_ref_dot = self.params.amplitude_range[1] * max_omega
        self.observation_space = Box(
            np.array([-1, -1, -MAX_SPEED, -1, -1, -max_ref_dot, 0.0]),
            np.array([1, 1, MAX_SPEED, 1, 1, max_ref_dot, max_omega]),
            (7,),
        )

    def reset(self, key: jax.Array) -> tuple[PendulumTrackingState, jax.Array]:
        p = self.params
        keys = jax.random.split(key, 5)

        def uniform(key: jax.Array, low: float, high: float) -> jax.Array:
            return jax.random.uniform(key, (), minval=low, maxval=high)

        state = PendulumTrackingState(
            theta=jnp.zeros(()),
            theta_dot=jnp.zeros(()),
            time=jnp.zeros((), jnp.int32),
            amplitude=uniform(keys[0], *p.amplitude_range),
            omega=2 * jnp.pi * uniform(keys[1], *p.frequency_range),
            phase=uniform(keys[2], 0.0, 2 * jnp.pi),
        )
        ref, ref_dot = reference(state)
        state = state.replace(
            theta=ref + uniform(keys[3], -p.initial_angle_noise, p.initial_angle_noise),
            theta_dot=ref_dot + uniform(keys[4], -p.initial_speed_noise, p.initial_speed_noise),
        )
        return state, self.observation(state)

    def step(self, key: jax.Array, state: PendulumTrackingState, action: jax.Array) -> StepResult:
        del key  # deterministic dynamics
        torque = jnp.clip(jnp.reshape(action, ()), -MAX_TORQUE, MAX_TORQUE)
        reward = tracking_reward(state, torque)
        # Pendulum-v1: theta_ddot = 3 g / (2 l) sin(theta) + 3 / (m l^2) u, semi-implicit Euler.
        theta_ddot = (
            3 * GRAVITY / (2 * LENGTH) * jnp.sin(state.theta) + 3.0 / (MASS * LENGTH**2) * torque
        )
        theta_dot = soft_clip(state.theta_dot + theta_ddot * DT, self.params.speed_knee, MAX_SPEED)
        state = state.replace(
            theta=state.theta + theta_dot * DT, theta_dot=theta_dot, time=state.time + 1
        )
        truncated = state.time >= self.max_episode_steps
        return state, self.observation(state), reward, jnp.zeros((), bool), truncated, {}

    def observation(self, state: PendulumTrackingState) -> jax.Array:
        """``[cos theta, sin theta, theta_dot, cos ref, sin ref, ref_dot, omega]``."""
        ref, ref_dot = reference(state)
        return jnp.stack(
            [
                jnp.cos(state.theta),
                jnp.sin(state.theta),
                state.theta_dot,
                jnp.cos(ref),
                jnp.sin(ref),
                ref_dot,
                state.omega,
            ]
        )


def registered_ids() -> list[str]:
    return ["PendulumTracking-v0"]


def make(name: str, **env_params: Any) -> Env:
    """The task ``name`` (an id of :func:`registered_ids`, unprefixed) with ``env_params``."""
    if name != "PendulumTracking-v0":
        raise ValueError(f"Unknown task {name!r}; the tasks are {registered_ids()}.")
    return PendulumTracking(**env_params)
