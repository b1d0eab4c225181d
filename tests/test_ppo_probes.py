"""PPO on the probe environments: each isolates one piece of the algorithm."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import PPO

from .probes import ActionReward, ConstantReward, ObservationReward, TwoStep

# Short rollouts and a constant, larger step size: the probes are tiny supervised problems.
SETTINGS = dict(n_steps=16, n_minibatches=2, learning_rate=3e-3, anneal_lr=False)


def _train(env, gamma=0.99, ent_coef=0.0):
    agent = PPO(env_id=env, n_envs=4, gamma=gamma, ent_coef=ent_coef, **SETTINGS)
    result = agent.train(seed=[0, 1], n_timesteps=4096)
    return agent, result.state.params


def _values(agent, params, obs):
    return jax.vmap(lambda p: agent.value(p, jnp.asarray(obs, jnp.float32)))(params)


def test_value_learns_a_constant_reward():
    agent, params = _train(ConstantReward())
    np.testing.assert_allclose(_values(agent, params, [[1.0]]), 1.0, atol=0.05)


def test_value_reads_the_observation():
    agent, params = _train(ObservationReward())
    np.testing.assert_allclose(_values(agent, params, [[1.0], [-1.0]]), [[1, -1]] * 2, atol=0.1)


@pytest.mark.parametrize("gamma", [0.5])
def test_value_discounts_over_two_steps(gamma):
    agent, params = _train(TwoStep(), gamma=gamma)
    np.testing.assert_allclose(_values(agent, params, [[1.0], [-1.0]]), [[gamma, 1]] * 2, atol=0.1)


def test_policy_picks_the_rewarded_action():
    agent, params = _train(ActionReward(), ent_coef=0.01)
    probs = jax.vmap(lambda p: jax.nn.softmax(agent.policy(p, jnp.ones((1, 1))).logits))(params)
    assert np.all(np.asarray(probs)[..., 1] > 0.95), probs
