"""GAE against a direct, loop-by-loop reading of its definition."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from hypothesis import given, settings
from hypothesis import strategies as st

from ajax.returns import gae
from ajax.updates import optimizer_step


def _reference(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages = np.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        done = terminated[t] or truncated[t]
        bootstrap = 0.0 if terminated[t] else gamma * next_values[t]
        delta = rewards[t] + bootstrap - values[t]
        running = delta + (0.0 if done else gamma * lam * running)
        advantages[t] = running
    return advantages


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.integers(0, 2**31 - 1),
)
def test_gae_matches_reference(length, gamma, lam, seed):
    rng = np.random.default_rng(seed)
    rewards, values, next_values = rng.normal(size=(3, length)).astype(np.float32)
    ends = rng.integers(0, 3, size=length)  # 0 running, 1 terminated, 2 truncated
    terminated, truncated = ends == 1, ends == 2
    advantages, targets = gae(
        jnp.asarray(rewards),
        jnp.asarray(values),
        jnp.asarray(next_values),
        jnp.asarray(terminated, jnp.float32),
        jnp.asarray(terminated | truncated, jnp.float32),
        gamma,
        lam,
    )
    expected = _reference(rewards, values, next_values, terminated, truncated, gamma, lam)
    np.testing.assert_allclose(advantages, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(targets, expected + values, rtol=1e-4, atol=1e-4)


def test_truncation_bootstraps_from_the_final_observation_and_termination_does_not():
    ones = jnp.ones(1)
    kwargs = dict(values=jnp.zeros(1), next_values=10 * ones, gamma=0.5, lam=0.9)
    truncated, _ = gae(ones, terminated=jnp.zeros(1), done=ones, **kwargs)
    terminated, _ = gae(ones, terminated=ones, done=ones, **kwargs)
    assert float(truncated[0]) == 1.0 + 0.5 * 10.0
    assert float(terminated[0]) == 1.0


def test_td_target_bootstraps_unless_terminated():
    from ajax.returns import td_target

    reward, next_value = jnp.asarray([1.0, 1.0]), jnp.asarray([10.0, 10.0])
    target = td_target(reward, next_value, jnp.asarray([0.0, 1.0]), 0.9)
    np.testing.assert_allclose(target, [10.0, 1.0])


def test_n_step_returns_stop_at_the_first_episode_end():
    from ajax.returns import n_step_returns

    rewards = jnp.asarray([[1.0, 2.0, 4.0]] * 4)
    terminated = jnp.asarray([[0.0, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 1]])
    truncated = jnp.asarray([[0.0, 0, 0], [0, 0, 0], [1, 0, 1], [0, 0, 0]])
    partial, last, discount = n_step_returns(rewards, terminated, truncated, 0.5)
    # No end: 1 + 0.5*2 + 0.25*4, bootstrapping at 0.5^3. Terminated at step 1: 1 + 0.5*2,
    # no bootstrap. Truncated at step 0: the reward alone, bootstrapping at 0.5 from step
    # 0's final observation. Terminated at the last step: all three, no bootstrap.
    np.testing.assert_allclose(partial, [3.0, 2.0, 1.0, 3.0])
    np.testing.assert_array_equal(last, [2, 1, 0, 2])
    np.testing.assert_allclose(discount, [0.125, 0.0, 0.5, 0.0])


def test_one_step_returns_are_the_td_target():
    from ajax.returns import n_step_returns, td_target

    reward, terminated = jnp.asarray([[1.0], [3.0]]), jnp.asarray([[0.0], [1.0]])
    partial, _, discount = n_step_returns(reward, terminated, jnp.zeros_like(reward), 0.9)
    expected = td_target(reward[:, 0], jnp.asarray([10.0, 10.0]), terminated[:, 0], 0.9)
    np.testing.assert_allclose(partial + discount * 10.0, expected)


def _lambda_reference(rewards, next_values, terminated, done, gamma, lam):
    returns = np.zeros_like(rewards)
    following = next_values[-1]
    for t in reversed(range(len(rewards))):
        blend = (
            next_values[t]
            if done[t] or t == len(rewards) - 1
            else ((1 - lam) * next_values[t] + lam * following)
        )
        returns[t] = rewards[t] + gamma * (1 - terminated[t]) * blend
        following = returns[t]
    return returns


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.integers(0, 2**31 - 1))
def test_lambda_returns_match_reference(length, gamma, lam, seed):
    from ajax.returns import lambda_returns

    rng = np.random.default_rng(seed)
    rewards, next_values = rng.normal(size=(2, length)).astype(np.float32)
    ends = rng.integers(0, 3, size=length)
    terminated, done = (ends == 1).astype(np.float32), ends > 0
    got = lambda_returns(
        jnp.asarray(rewards),
        jnp.asarray(next_values),
        jnp.asarray(terminated),
        jnp.asarray(done),
        gamma,
        lam,
    )
    expected = _lambda_reference(rewards, next_values, terminated, done, gamma, lam)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_lambda_zero_is_one_step_q_learning_and_one_is_monte_carlo():
    from ajax.returns import lambda_returns

    rewards, next_values = jnp.asarray([1.0, 2.0, 3.0]), jnp.asarray([10.0, 20.0, 30.0])
    never = jnp.zeros(3)
    one_step = lambda_returns(rewards, next_values, never, never.astype(bool), 0.5, 0.0)
    np.testing.assert_allclose(one_step, rewards + 0.5 * next_values)
    full = lambda_returns(rewards, next_values, never, never.astype(bool), 0.5, 1.0)
    np.testing.assert_allclose(
        full, [1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 30, 2 + 0.5 * 3 + 0.25 * 30, 3 + 0.5 * 30]
    )


def test_soft_update():
    from ajax.updates import soft_update

    target, online = {"w": jnp.zeros(2)}, {"w": jnp.ones(2)}
    np.testing.assert_allclose(soft_update(target, online, 0.1)["w"], [0.1, 0.1])
    np.testing.assert_allclose(soft_update(target, online, 1.0)["w"], [1.0, 1.0])


def test_an_optimizer_step_with_and_without_a_traced_learning_rate():
    params = {"w": jnp.asarray([1.0, -2.0]), "b": jnp.asarray(0.5)}
    grads = {"w": jnp.asarray([0.5, 1.0]), "b": jnp.asarray(-4.0)}
    # A direction (plain gradients here) scaled by minus the rate given to the step.
    sgd_direction = optax.identity()
    stepped, _ = optimizer_step(sgd_direction, grads, sgd_direction.init(params), params, 0.1)
    np.testing.assert_allclose(stepped["w"], [0.95, -2.1])
    np.testing.assert_allclose(stepped["b"], 0.9)
    # An optimizer with its own step size: its updates are the steps.
    sgd = optax.sgd(0.1)
    stepped_again, _ = optimizer_step(sgd, grads, sgd.init(params), params)
    assert jax.tree.all(jax.tree.map(np.array_equal, stepped_again, stepped))
