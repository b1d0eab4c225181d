"""PPO learns: the returns its references report, as the mean over 4 seeds of one vmapped run."""

import numpy as np
import pytest

from ajax import PPO, evaluate

#: Learning runs of minutes: outside the quick tier (`pytest -m "not slow"`).
pytestmark = [pytest.mark.slow, pytest.mark.learning]


def test_ppo_solves_cartpole_within_200k_steps(cartpole_run, bar):
    returns = cartpole_run.evaluations["episode_return"]
    assert returns.shape == (4, 10)
    mean_over_seeds = returns.mean(axis=0)
    # "Reaches within 200k steps": some evaluation of the run, averaged over the 4 seeds.
    bar.at_least("best 4-seed mean", mean_over_seeds.max(), 475, mean_over_seeds)
    # And the policy the run ends with is far beyond a random one (about 22).
    final = evaluate(cartpole_run, num_episodes=20, seed=0)
    bar.at_least("final policy, 20 episodes per seed", final.mean(), 400, final)


def test_ppo_learns_pendulum_within_300k_steps(learning_run, bar):
    # RL-Baselines3-Zoo's Pendulum-v1 PPO settings (without gSDE): gamma 0.9, lr 1e-3,
    # 4 copies x 1024 steps, 10 epochs of minibatches of 64, no entropy bonus.
    agent = PPO(
        env_id="Pendulum-v1",
        n_envs=4,
        n_steps=1024,
        n_minibatches=64,
        n_epochs=10,
        gamma=0.9,
        learning_rate=1e-3,
        ent_coef=0.0,
        clip_value_loss=False,
        anneal_lr=False,
    )
    result, mean_over_seeds = learning_run(agent, 300_000, 100_000)
    bar.at_least("best 4-seed mean", mean_over_seeds.max(), -400, mean_over_seeds)
    bar.at_least("final 4-seed mean", mean_over_seeds[-1], -400, mean_over_seeds)
    assert np.isfinite(result.train_metrics["train/value_loss"]).all()
