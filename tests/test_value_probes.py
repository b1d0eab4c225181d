"""DQN and PQN on the probe environments: Q-values must come out as the probes dictate."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import DQN, PQN

from .probes import ActionReward, ConstantReward, ObservationReward, TwoStep

SMALL = dict(hidden_sizes=(64, 64), learning_rate=1e-3)
REPLAY = dict(n_envs=2, train_frequency=16, gradient_steps=8, learning_starts=64, buffer_size=1024)
AGENTS = {
    # The paper's one-step target.
    "DQN-1step": lambda env, gamma: DQN(
        env_id=env, gamma=gamma, n_step=1, double_dqn=False, **REPLAY, **SMALL
    ),
    # The defaults' 5-step double-DQN target, with the dueling head: runs of 5 steps cross
    # the probes' episode ends, where the target must stop.
    "DQN-5step-dueling": lambda env, gamma: DQN(
        env_id=env, gamma=gamma, dueling=True, **REPLAY, **SMALL
    ),
    "PQN": lambda env, gamma: PQN(
        env_id=env,
        n_envs=8,
        gamma=gamma,
        n_steps=16,
        n_minibatches=4,
        anneal_lr=False,
        reward_scale=1.0,
        **SMALL,
    ),
}


def _q(name, env, obs, gamma=0.99):
    agent = AGENTS[name](env, gamma)
    result = agent.train(seed=[0, 1], n_timesteps=4096)
    q = jax.vmap(lambda p: agent.q_values(p, jnp.asarray(obs, jnp.float32)))(result.state.params)
    return np.asarray(q)  # [seeds, len(obs), actions]


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_q_learns_a_constant_reward(name):
    np.testing.assert_allclose(_q(name, ConstantReward(), [[1.0]]), 1.0, atol=0.1)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_q_reads_the_observation(name):
    q = _q(name, ObservationReward(), [[1.0], [-1.0]])
    np.testing.assert_allclose(q[:, 0], 1.0, atol=0.1)
    np.testing.assert_allclose(q[:, 1], -1.0, atol=0.1)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_q_discounts_over_two_steps(name):
    q = _q(name, TwoStep(), [[1.0], [-1.0]], gamma=0.5)
    np.testing.assert_allclose(q[:, 0], 0.5, atol=0.1)
    np.testing.assert_allclose(q[:, 1], 1.0, atol=0.1)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_q_separates_the_actions(name):
    q = _q(name, ActionReward(), [[1.0]])
    np.testing.assert_allclose(q[:, 0, 0], -1.0, atol=0.15)
    np.testing.assert_allclose(q[:, 0, 1], 1.0, atol=0.15)


def test_dueling_q_values_are_the_value_plus_centred_advantages():
    agent = DQN(env_id="CartPole-v1", dueling=True, hidden_sizes=(8,))
    obs = jax.random.normal(jax.random.PRNGKey(1), (5, 4))
    params = agent._init_network(jax.random.PRNGKey(0), obs)
    out = agent.network.apply(params, obs)
    assert out.shape == (5, 3)  # the value, then one advantage per action
    q = agent.q_values(params, obs)
    np.testing.assert_allclose(q.mean(-1), out[:, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(q[:, 1] - q[:, 0], out[:, 2] - out[:, 1], rtol=1e-5, atol=1e-6)


def test_dqn_starts_from_pytorchs_linear_initialisation():
    """SB3's networks (whose DQN settings Ajax's follow) start from PyTorch's nn.Linear
    default: weights and biases uniform in +-1/sqrt(fan_in)."""
    agent = DQN(env_id="CartPole-v1")
    params = agent._init_network(jax.random.PRNGKey(0), jnp.zeros((1, 4)))["params"]
    for name, fan_in in (("Dense_0", 4), ("Dense_1", 256), ("Dense_2", 256)):
        bound = 1 / np.sqrt(fan_in)
        for kind in ("kernel", "bias"):
            values = np.asarray(params[name][kind]).ravel()
            assert np.abs(values).max() <= bound
            if values.size >= 256:  # (the output bias has 2 values)
                # Uniform: a standard deviation of bound / sqrt(3); LeCun-normal's is bound.
                np.testing.assert_allclose(values.std(), bound / np.sqrt(3), rtol=0.1)
