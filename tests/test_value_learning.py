"""DQN and PQN learn CartPole: the mean over the seeds of one vmapped run."""

import pytest

from ajax import DQN, PQN, LoggingConfig

#: Learning runs of minutes: outside the quick tier (`pytest -m "not slow"`).
pytestmark = [pytest.mark.slow, pytest.mark.learning]


def test_dqn_holds_cartpole_from_90k_to_100k_steps(tmp_path, seeds, bar):
    # The DQN defaults: RL-Zoo's CartPole settings (256x256 started as SB3's, lr 2.3e-3, 128
    # updates per 256 steps, target copied every 10 steps) with the double-DQN target, 5-step
    # returns and the step size decayed to 0. What a user relies on is the policy the run ends
    # with, so the bar is on the last three evaluations (about 90k, 95k and 100k steps) of
    # every seed.
    result = DQN(env_id="CartPole-v1").train(
        seed=seeds(4),
        n_timesteps=100_000,
        num_episode_test=10,
        logging_config=LoggingConfig(log_frequency=5_000, log_dir=tmp_path),
    )
    returns = result.evaluations["episode_return"]
    assert result.evaluations["timestep"][-3] >= 90_000
    bar.at_least(
        "mean over 4 seeds of the last 3 evaluations",
        returns[:, -3:].mean(),
        475,
        returns.mean(axis=0),
    )


def test_pqn_solves_cartpole_within_500k_steps(tmp_path, seeds, bar):
    # purejaxql's CartPole configuration (the PQN defaults): 32 copies x 64 steps.
    result = PQN(env_id="CartPole-v1").train(
        seed=seeds(4),
        n_timesteps=500_000,
        num_episode_test=10,
        logging_config=LoggingConfig(log_frequency=50_000, log_dir=tmp_path),
    )
    mean_over_seeds = result.evaluations["episode_return"].mean(axis=0)
    bar.at_least("best 4-seed mean", mean_over_seeds.max(), 475, mean_over_seeds)
    bar.at_least("final 4-seed mean", mean_over_seeds[-1], 475, mean_over_seeds)
