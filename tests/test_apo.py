"""APO: the differential advantage against a NumPy reference, the reward rate on probes, and
learning Pendulum-v1."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import APO
from ajax.acting import Transition

from .probes import ActionReward, ConstantReward
from .states import initial_state


def _reference(reward, value, next_value, terminated, truncated, rho, b, gamma, lam, nu):
    """The recursion written out step by step (xtma/apo, apo/algos/utils.py), with a
    truncated episode bootstrapping from its final observation."""
    steps, copies = reward.shape
    advantage = np.zeros((steps, copies))
    for c in range(copies):
        following = 0.0
        for t in reversed(range(steps)):
            delta = reward[t, c] - rho + gamma * (1 - terminated[t, c]) * next_value[t, c]
            delta -= value[t, c]
            done = terminated[t, c] or truncated[t, c]
            following = delta + gamma * lam * (1 - done) * following
            advantage[t, c] = following
    return advantage, advantage + value - nu * b


def test_differential_advantages_match_a_numpy_reference():
    agent = APO(env_id="Pendulum-v1", n_envs=2, gamma=0.97, gae_lambda=0.9)
    rng = np.random.default_rng(0)
    shape = (6, 2)
    reward, value, next_value = (rng.normal(size=shape).astype(np.float32) for _ in range(3))
    terminated, truncated = np.zeros(shape, bool), np.zeros(shape, bool)
    terminated[2, 0] = True  # copy 0's episode ends by termination: no bootstrap
    truncated[3, 1] = True  # copy 1's by the time limit: bootstraps from its final obs
    state, _ = initial_state(agent, 2, 10)
    c = agent.config
    # The first rollout sets rho and b to its means; later ones move them by alpha.
    rho, b = reward.mean(), value.mean()
    for iteration in range(2):
        steps = Transition(
            obs=None,
            action=None,
            reward=jnp.asarray(reward),
            terminated=jnp.asarray(terminated),
            truncated=jnp.asarray(truncated),
            next_obs=None,
            info={},
        )
        state = state.replace(iteration=jnp.int32(iteration))
        state, advantage, target, stats = agent._advantages(
            state, steps, jnp.asarray(value), jnp.asarray(next_value)
        )
        np.testing.assert_allclose(stats["reward_rate"], rho, rtol=1e-6)
        np.testing.assert_allclose(stats["value_offset"], b, rtol=1e-6)
        want_advantage, want_target = _reference(
            reward, value, next_value, terminated, truncated, rho, b, 0.97, 0.9, 1.0
        )
        np.testing.assert_allclose(advantage, want_advantage, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(target, want_target, rtol=1e-5, atol=1e-5)
        reward = reward + 1.0
        value = value * 2.0
        alpha = c.reward_rate_step
        rho = (1 - alpha) * rho + alpha * reward.mean()
        b = (1 - alpha) * b + alpha * value.mean()


SETTINGS = dict(n_envs=4, n_steps=16, n_minibatches=2, learning_rate=3e-3)


def test_reward_rate_is_the_constant_reward_and_differential_values_vanish():
    agent = APO(env_id=ConstantReward(), **SETTINGS)
    result = agent.train(seed=[0, 1], n_timesteps=4096)
    np.testing.assert_allclose(result.state.stats["reward_rate"], 1.0, rtol=1e-6)
    # r - rho is 0 on every step, so the differential value of the only state is 0.
    values = jax.vmap(lambda p: agent.value(p, jnp.ones((1, 1))))(result.state.params)
    np.testing.assert_allclose(values, 0.0, atol=0.05)


def test_reward_rate_follows_the_policy_as_it_learns():
    agent = APO(env_id=ActionReward(), **SETTINGS)
    result = agent.train(seed=[0, 1], n_timesteps=4096)
    # Action 1 earns +1 and action 0 earns -1: a policy that learnt to pick 1 has a rate near 1.
    assert np.all(result.state.stats["reward_rate"] > 0.9)
    np.testing.assert_array_equal(result.act(np.ones(1, np.float32)), [1, 1])


@pytest.mark.slow
@pytest.mark.learning
def test_apo_learns_pendulum_within_300k_steps(learning_run, bar):
    _, mean_over_seeds = learning_run(APO(env_id="Pendulum-v1"), 300_000, 100_000)
    bar.at_least("final 4-seed mean", mean_over_seeds[-1], -400, mean_over_seeds)
