"""The differentiable Pendulum tracking task: exact gradients, gym's dynamics, episode ends."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax.envs.tasks import (
    PendulumTracking,
    make,
    reference,
    registered_ids,
    soft_clip,
)

HORIZON = 20


def rollout_return(env, state, actions):
    """The summed reward of stepping ``env`` from ``state`` through ``actions``."""

    def body(state, action):
        state, _obs, reward, _terminated, _truncated, _info = env.step(
            jax.random.PRNGKey(0), state, action
        )
        return state, reward

    _, rewards = jax.lax.scan(body, state, actions)
    return rewards.sum()


def central_difference(f, x, direction, eps=1e-6):
    return (f(x + eps * direction) - f(x - eps * direction)) / (2 * eps)


def test_return_gradient_wrt_actions_matches_finite_differences():
    with jax.enable_x64(True):
        env = PendulumTracking()
        state, _ = jax.jit(env.reset)(jax.random.PRNGKey(1))
        keys = jax.random.split(jax.random.PRNGKey(2), 4)
        # Inside the torque bounds, where the clip's gradient is exact.
        actions = jax.random.uniform(keys[0], (HORIZON, 1), minval=-1.5, maxval=1.5)
        value = jax.jit(lambda a: rollout_return(env, state, a))
        grad = jax.jit(jax.grad(lambda a: rollout_return(env, state, a)))(actions)
        assert grad.dtype == jnp.float64
        assert np.all(np.isfinite(grad)) and np.any(grad != 0)
        for key in keys[1:]:
            direction = jax.random.normal(key, actions.shape)
            expected = central_difference(value, actions, direction)
            np.testing.assert_allclose(jnp.vdot(grad, direction), expected, rtol=1e-4)


def test_return_gradient_wrt_initial_angle_matches_finite_differences():
    with jax.enable_x64(True):
        env = PendulumTracking()
        state, _ = jax.jit(env.reset)(jax.random.PRNGKey(3))
        actions = jax.random.uniform(jax.random.PRNGKey(4), (HORIZON, 1), minval=-1, maxval=1)

        def from_angle(theta):
            return rollout_return(env, state.replace(theta=theta), actions)

        grad = jax.jit(jax.grad(from_angle))(state.theta)
        expected = central_difference(jax.jit(from_angle), state.theta, 1.0)
        assert np.isfinite(grad) and grad != 0
        np.testing.assert_allclose(grad, expected, rtol=1e-4)


def test_reward_is_maximal_on_the_reference_with_zero_torque():
    env = PendulumTracking()
    state, _ = jax.jit(env.reset)(jax.random.PRNGKey(5))
    ref, ref_dot = reference(state)
    on_reference = state.replace(theta=ref, theta_dot=ref_dot)

    def reward(theta, theta_dot, action):
        start = on_reference.replace(theta=theta, theta_dot=theta_dot)
        return env.step(jax.random.PRNGKey(0), start, action)[2]

    value_and_grad = jax.jit(jax.value_and_grad(reward, argnums=(0, 1, 2)))
    # Compiled code recomputes the reference with its own rounding: zero up to float32 error.
    best, slopes = value_and_grad(ref, ref_dot, jnp.zeros(1))
    assert abs(float(best)) < 1e-10
    np.testing.assert_allclose(np.concatenate([np.ravel(s) for s in slopes]), 0.0, atol=1e-5)
    for off in ((ref + 0.1, ref_dot, 0.0), (ref, ref_dot - 0.1, 0.0), (ref, ref_dot, 0.5)):
        theta, theta_dot, action = off
        assert float(value_and_grad(theta, theta_dot, jnp.array([action]))[0]) < -1e-4


def test_episodes_truncate_at_the_time_limit_and_never_terminate():
    env = PendulumTracking()
    assert env.max_episode_steps == 200
    state, obs = jax.jit(env.reset)(jax.random.PRNGKey(6))
    # Full-torque random actions spin the pendulum past the speed limit's knee.
    actions = jax.random.uniform(jax.random.PRNGKey(7), (200, 1), minval=-2, maxval=2)

    def body(state, action):
        state, obs, _reward, terminated, truncated, _info = env.step(
            jax.random.PRNGKey(0), state, action
        )
        return state, (obs, terminated, truncated)

    _, (observations, terminated, truncated) = jax.jit(lambda s: jax.lax.scan(body, s, actions))(
        state
    )
    assert not np.any(terminated)
    np.testing.assert_array_equal(np.flatnonzero(truncated), [199])
    space = env.observation_space
    assert obs.shape == space.shape and obs.dtype == space.dtype
    assert np.all(observations >= space.low) and np.all(observations <= space.high)
    assert np.all(np.abs(observations[:, 2]) < 8.0)


def test_one_step_follows_gym_pendulum_v1_within_the_speed_limit():
    env = PendulumTracking()
    state, _ = jax.jit(env.reset)(jax.random.PRNGKey(8))
    step = jax.jit(env.step)
    for theta, theta_dot, action in [
        (0.3, -1.0, 1.2),
        (-2.5, 2.0, -0.7),
        (3.5, 0.5, 0.0),
        (1.0, 1.0, 3.5),  # torque is clipped to 2, as in gym
    ]:
        start = state.replace(theta=jnp.float32(theta), theta_dot=jnp.float32(theta_dot))
        new, obs, reward, *_ = step(jax.random.PRNGKey(0), start, jnp.array([action]))
        # gym Pendulum-v1 (g=10, m=1, l=1, dt=0.05), by hand.
        u = np.clip(action, -2.0, 2.0)
        expected_dot = theta_dot + (3 * 10.0 / 2 * np.sin(theta) + 3.0 * u) * 0.05
        expected_theta = theta + expected_dot * 0.05
        ref, ref_dot = (float(x) for x in reference(start))
        expected_reward = -(
            2 * (1 - np.cos(theta - ref)) + 0.1 * (theta_dot - ref_dot) ** 2 + 0.001 * u**2
        )
        np.testing.assert_allclose(new.theta, expected_theta, rtol=1e-5)
        np.testing.assert_allclose(
            obs[:3],
            [np.cos(expected_theta), np.sin(expected_theta), expected_dot],
            rtol=1e-5,
            atol=1e-6,
        )
        np.testing.assert_allclose(reward, expected_reward, rtol=1e-5)


def test_speed_limit_is_identity_below_the_knee_and_saturates_smoothly():
    # One step adds at most (15 + 6) * 0.05 rad/s, so speeds stay below about 9.1.
    speeds = jnp.array([-10.0, -7.0, -6.0, -1.0, 0.0, 2.0, 5.9, 6.1, 9.0, 10.0])
    limited, slopes = jax.jit(jax.vmap(jax.value_and_grad(lambda v: soft_clip(v, 6.0, 8.0))))(
        speeds
    )
    inside = np.abs(speeds) <= 6.0
    np.testing.assert_array_equal(limited[inside], speeds[inside])
    assert np.all(np.abs(limited) < 8.0) and np.all(slopes > 0) and np.all(slopes <= 1)


def test_unknown_parameter_is_rejected_by_name():
    with pytest.raises(ValueError, match="gravity_on_mars") as error:
        PendulumTracking(gravity_on_mars=3.7)
    assert "max_episode_steps" in str(error.value) and "amplitude_range" in str(error.value)
    with pytest.raises(ValueError, match="amplitude_range"):
        PendulumTracking(amplitude_range=(0.3, 0.1))


def test_make_builds_the_registered_task():
    assert registered_ids() == ["PendulumTracking-v0"]
    env = make("PendulumTracking-v0", max_episode_steps=7)
    assert env.max_episode_steps == 7 and env.env_id == "ajax/PendulumTracking-v0"
    with pytest.raises(ValueError, match="PendulumTracking-v0"):
        make("PendulumTracking-v1")
