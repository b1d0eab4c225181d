"""DQN and PQN on the probe environments: Q-values must come out as the probes dictate."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import DQN, PQN

from .probes import ActionReward, ConstantReward, ObservationReward, TwoStep

SMALL = dict(hidden_sizes=(64, 64), learning_rate=1e-3)
AGENTS = {
    "DQN": lambda env, gamma: DQN(
        env_id=env,
        n_envs=2,
        gamma=gamma,
        train_frequency=16,
        gradient_steps=8,
        learning_starts=64,
        buffer_size=1024,
        **SMALL,
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
