"""Same seed, same numbers; a seed in a batch runs as it does alone."""

import jax
import numpy as np
import pytest

from ajax import PPO, LoggingConfig
from ajax.run.plan import seed_array, seed_key


@pytest.fixture(scope="module")
def agent():
    return PPO(env_id="CartPole-v1", n_envs=4, n_steps=32)


@pytest.fixture(scope="module")
def three_seeds(agent, tmp_path_factory):
    """Seeds 0-2 in one logged run, which the first two tests compare with other runs."""
    config = LoggingConfig(log_frequency=2048, log_dir=tmp_path_factory.mktemp("runs"))
    return agent.train(seed=[0, 1, 2], n_timesteps=6144, logging_config=config)


def _leaves(state, index):
    return [np.asarray(x[index]) for x in jax.tree.leaves(state)]


def test_same_seed_gives_identical_runs(agent, three_seeds, tmp_path):
    config = LoggingConfig(log_frequency=2048, log_dir=tmp_path)
    first = three_seeds
    second = agent.train(seed=[0, 1, 2], n_timesteps=6144, logging_config=config)
    np.testing.assert_array_equal(
        first.evaluations["episode_return"], second.evaluations["episode_return"]
    )
    for a, b in zip(jax.tree.leaves(first.state), jax.tree.leaves(second.state), strict=True):
        np.testing.assert_array_equal(a, b)


def test_seed_in_a_batch_runs_as_alone(agent, three_seeds, tmp_path):
    config = LoggingConfig(log_frequency=2048, log_dir=tmp_path)
    batch = three_seeds
    alone = agent.train(seed=1, n_timesteps=6144, logging_config=config)
    # Seed 1 draws the same keys in both runs, so it acts the same: every training episode
    # and every evaluation episode is identical.
    np.testing.assert_array_equal(
        batch.evaluations["episode_return"][1], alone.evaluations["episode_return"][0]
    )
    for key in ("train/episode_return", "train/episode_length"):
        np.testing.assert_array_equal(batch.train_metrics[key][1], alone.train_metrics[key][0])
    # Parameters agree up to float rounding, not bit for bit: XLA's batched kernels may sum
    # in another order than the unbatched ones, and 200 Adam steps, normalised per weight,
    # carry those last-bit differences into every weight. (Measured: up to 0.3% of a layer's
    # largest weight after 12 iterations.) The exact checks above are the episodes.
    for a, b in zip(_leaves(batch.state.params, 1), _leaves(alone.state.params, 0), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-2 * max(np.abs(b).max(), 1e-6))


def test_different_seeds_differ(agent):
    result = agent.train(seed=[0, 1], n_timesteps=1024)
    # Every weight and bias ends elsewhere: the seeds start from different weights and see
    # different episodes (biases start at zero in both, so they differ only by training).
    first, second = _leaves(result.state.params, 0), _leaves(result.state.params, 1)
    for a, b in zip(first, second, strict=True):
        assert not np.allclose(a, b)
    episodes = result.train_metrics["train/episode_length"]
    assert episodes[0, -1] != episodes[1, -1]


@pytest.mark.parametrize("seed", [0, 1, 2**31 - 1, 2**31, 2**32 - 1])
def test_a_programs_key_for_a_seed_is_jaxs_key_for_it(seed):
    # The programs make each seed's key from the seed itself; it must be the key a user
    # gets from jax.random.PRNGKey(seed), up to the largest seed train accepts.
    made = jax.jit(jax.vmap(seed_key))(seed_array([seed]))[0]
    np.testing.assert_array_equal(made, jax.random.PRNGKey(seed))


def test_an_evaluation_draws_the_same_episodes_whatever_the_segments(agent, three_seeds, tmp_path):
    # The evaluation after 6,144 steps, in a run logged every 3,072 steps instead of every
    # 2,048: the same state, evaluated with the same key, so the same episodes.
    config = LoggingConfig(log_frequency=3072, log_dir=tmp_path)
    other = agent.train(seed=[0, 1, 2], n_timesteps=6144, logging_config=config)
    assert list(other.evaluations["timestep"]) == [3072, 6144]
    np.testing.assert_array_equal(
        other.evaluations["episode_return"][:, -1],
        three_seeds.evaluations["episode_return"][:, -1],
    )
    for a, b in zip(jax.tree.leaves(other.state), jax.tree.leaves(three_seeds.state), strict=True):
        np.testing.assert_array_equal(a, b)
