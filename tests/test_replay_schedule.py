"""The warm-up before learning (``Agent.warmup``): warm-up iterations collect and store without
computing an update, and updates begin, as in SB3, with the first iteration that ends past
``learning_starts`` steps. Without the warm-up loop the updates were computed and dropped, and
began one iteration earlier."""

import math

import numpy as np
import optax
import pytest

from ajax import DQN, SAC, UDRL, LoggingConfig


def _train_logged(agent, n_timesteps, tmp_path):
    summaries = []
    result = agent.train(
        seed=[0, 1],
        n_timesteps=n_timesteps,
        num_episode_test=1,
        logging_config=LoggingConfig(log_frequency=32, log_dir=tmp_path),
        progress=lambda done, total, summary: summaries.append(summary),
    )
    return result, [s["train/critic_loss"] for s in summaries]


def test_sac_learns_from_the_first_iteration_past_learning_starts(tmp_path):
    agent = SAC(
        env_id="Pendulum-v1",
        learning_starts=48,
        hidden_sizes=(16, 16),
        batch_size=8,
        buffer_size=256,
    )
    assert agent.warmup_iterations == 48
    # Nothing is computed and then dropped any more, so the update count says whether an
    # update ran at all.
    warm, losses = _train_logged(agent, 48, tmp_path)
    np.testing.assert_array_equal(warm.state.learner.updates, [0, 0])
    np.testing.assert_array_equal(warm.state.buffer.size, [48, 48])
    # Segments that hold no learning iteration report no update metric.
    assert all(math.isnan(x) for x in losses)
    one_more, losses = _train_logged(agent, 49, tmp_path)
    np.testing.assert_array_equal(one_more.state.learner.updates, [1, 1])
    # The second segment (steps 32-48) is 16 warm-up iterations and one learning iteration;
    # its critic loss is that iteration's.
    assert math.isnan(losses[0]) and 0 < losses[1] < 1e3


@pytest.mark.slow
def test_dqn_and_udrl_warm_up_without_updates():
    dqn = DQN(
        env_id="CartPole-v1",
        n_envs=2,
        learning_starts=64,
        gradient_steps=3,
        train_frequency=4,
        hidden_sizes=(16,),
        batch_size=8,
        buffer_size=256,
    )
    assert dqn.warmup_iterations == 8
    for steps, updates in ((64, 0), (72, 3)):
        assert int(dqn.train(seed=0, n_timesteps=steps).state.updates[0]) == updates
    udrl = UDRL(env_id="CartPole-v1", n_envs=2, n_steps=8, learning_starts=40, n_updates=2)
    # The iterations that start before step 40 are random and untrained: 3 of 16 steps each.
    assert udrl.warmup_iterations == 3
    for steps, updates in ((48, 0), (64, 2)):
        state = udrl.train(seed=0, n_timesteps=steps).state
        assert int(optax.tree_utils.tree_get(state.opt_state, "count")[0]) == updates
