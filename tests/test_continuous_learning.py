"""SAC, TD3 and REDQ learn Pendulum-v1: the mean over the seeds of one vmapped run (4 for SAC
and TD3; 2 for REDQ, whose 200 critic updates per step made it the suite's slowest test).

The networks are smaller than the papers' (64x64 instead of 256x256, REDQ 32x32 with batches
of 64): at the papers' sizes one run of these budgets takes several minutes on a 2-core CPU,
most of it in the critics' matrix products. The algorithms are unchanged. Each run stops well
inside the issue's budget (SAC and TD3 within 20k steps, REDQ within 10k) once the bar is
reached, to keep the suite short.
"""

import numpy as np
import pytest

from ajax import REDQ, SAC, TD3, LoggingConfig

#: Learning runs of minutes: outside the quick tier (`pytest -m "not slow"`).
pytestmark = [pytest.mark.slow, pytest.mark.learning]

N_SEEDS = {"SAC": 4, "TD3": 4, "REDQ": 2}
RUNS = {
    # RL-Baselines3-Zoo's Pendulum-v1 SAC: lr 1e-3 (it reports -157 at 20k steps).
    "SAC": (SAC, 8_000, dict(learning_rate=1e-3, hidden_sizes=(64, 64), learning_starts=1_000)),
    # RL-Baselines3-Zoo's Pendulum-v1 TD3: lr 1e-3, gamma 0.98 (it reports -152 at 20k).
    "TD3": (
        TD3,
        10_000,
        dict(learning_rate=1e-3, gamma=0.98, hidden_sizes=(64, 64), learning_starts=1_000),
    ),
    # The paper's REDQ (N=10, M=2, G=20) with small networks and an early start.
    "REDQ": (REDQ, 2_500, dict(hidden_sizes=(32, 32), batch_size=64, learning_starts=500)),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_learns_pendulum(name, tmp_path, seeds, bar):
    agent_cls, n_timesteps, settings = RUNS[name]
    result = agent_cls(env_id="Pendulum-v1", buffer_size=n_timesteps, **settings).train(
        seed=seeds(N_SEEDS[name]),
        n_timesteps=n_timesteps,
        num_episode_test=10,
        logging_config=LoggingConfig(log_frequency=n_timesteps // 4, log_dir=tmp_path),
    )
    mean_over_seeds = result.evaluations["episode_return"].mean(axis=0)
    # Random actions score about -1,200 on Pendulum. The bar is -250, reached within the
    # budget; the policy the run ends with must still be far from random.
    bar.at_least("best mean over seeds", mean_over_seeds.max(), -250, mean_over_seeds)
    bar.at_least("final mean over seeds", mean_over_seeds[-1], -400, mean_over_seeds)
    assert np.isfinite(result.train_metrics["train/critic_loss"]).all()
