"""DQN and PQN learn CartPole: the mean over the seeds of one vmapped run."""

import pytest

from ajax import DQN, PQN, LoggingConfig

#: Learning runs of minutes: outside the quick tier (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow


def test_double_dqn_solves_cartpole_within_100k_steps(tmp_path):
    # RL-Zoo's CartPole configuration (the DQN defaults: 256x256, lr 2.3e-3, 128 updates per
    # 256 steps, target copied every 10 steps) with the double-DQN target and the step size
    # decayed to 0. With RL-Zoo's constant step size and plain targets the seeds reach 500 at
    # different times and fall back in between: the 4-seed mean peaked at 290-406.
    # Two seeds keep the suite within its time limit: 4 seeds take about 5 minutes here. Over
    # seeds 0-3 the mean first passed 475 at about 76k steps (docs/agents/dqn.md).
    result = DQN(env_id="CartPole-v1", double_dqn=True, anneal_lr=True).train(
        seed=[0, 1],
        n_timesteps=100_000,
        num_episode_test=10,
        logging_config=LoggingConfig(log_frequency=2_500, log_dir=tmp_path),
    )
    mean_over_seeds = result.evaluations["episode_return"].mean(axis=0)
    assert mean_over_seeds.max() >= 475, mean_over_seeds


def test_pqn_solves_cartpole_within_500k_steps(tmp_path):
    # purejaxql's CartPole configuration (the PQN defaults): 32 copies x 64 steps.
    result = PQN(env_id="CartPole-v1").train(
        seed=[0, 1, 2, 3],
        n_timesteps=500_000,
        num_episode_test=10,
        logging_config=LoggingConfig(log_frequency=50_000, log_dir=tmp_path),
    )
    mean_over_seeds = result.evaluations["episode_return"].mean(axis=0)
    assert mean_over_seeds.max() >= 475, mean_over_seeds
    assert mean_over_seeds[-1] >= 475, mean_over_seeds
