"""Same seed, same numbers; a seed in a batch runs as it does alone."""

import jax
import numpy as np
import pytest

from ajax import PPO, LoggingConfig


@pytest.fixture(scope="module")
def agent():
    return PPO(env_id="CartPole-v1", n_envs=4, n_steps=32)


def _leaves(state, index):
    return [np.asarray(x[index]) for x in jax.tree.leaves(state)]


def test_same_seed_gives_identical_runs(agent, tmp_path):
    config = LoggingConfig(log_frequency=2048, log_dir=tmp_path)
    first = agent.train(seed=[0, 1, 2], n_timesteps=6144, logging_config=config)
    second = agent.train(seed=[0, 1, 2], n_timesteps=6144, logging_config=config)
    np.testing.assert_array_equal(
        first.evaluations["episode_return"], second.evaluations["episode_return"]
    )
    for a, b in zip(jax.tree.leaves(first.state), jax.tree.leaves(second.state), strict=True):
        np.testing.assert_array_equal(a, b)


def test_seed_in_a_batch_runs_as_alone(agent, tmp_path):
    config = LoggingConfig(log_frequency=2048, log_dir=tmp_path)
    batch = agent.train(seed=[0, 1, 2], n_timesteps=6144, logging_config=config)
    alone = agent.train(seed=1, n_timesteps=6144, logging_config=config)
    np.testing.assert_array_equal(
        batch.evaluations["episode_return"][1], alone.evaluations["episode_return"][0]
    )
    # XLA's batched matrix kernels may round differently from the unbatched ones, so states
    # agree to float32 rounding rather than bit for bit.
    for a, b in zip(_leaves(batch.state, 1), _leaves(alone.state, 0), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_different_seeds_differ(agent):
    result = agent.train(seed=[0, 1], n_timesteps=1024)
    first, second = _leaves(result.state, 0), _leaves(result.state, 1)
    assert any(not np.array_equal(a, b) for a, b in zip(first, second, strict=True))
