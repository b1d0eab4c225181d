"""DQN and PQN learn CartPole: the mean over 4 seeds of one vmapped run."""

from ajax import PQN, LoggingConfig


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
