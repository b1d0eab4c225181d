"""UDRL: the command's update and floor, hindsight targets, the episode store's best
episodes, recording episodes from a rollout, and learning CartPole-v1."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import UDRL
from ajax.acting import Transition
from ajax.agents.udrl import command_targets
from ajax.buffers import Episodes, EpisodeStore

from .states import initial_state


@pytest.fixture(scope="module")
def agent():
    return UDRL(env_id="CartPole-v1", n_envs=2, store_size=4, last_few=2)


def test_the_command_spends_the_reward_and_its_horizon_stops_at_one(agent):
    carry = jnp.asarray([[10.0, 3.0], [5.0, 1.0]])
    after = agent.after_step(None, carry, jnp.asarray([1.0, 2.0]))
    np.testing.assert_array_equal(after, [[9.0, 2.0], [3.0, 1.0]])


def test_udrl_acts_through_its_command_and_has_no_policy_of_the_observation_alone(agent):
    with pytest.raises(NotImplementedError, match=r"UDRL acts through act\(params, obs, carry"):
        agent.policy(None, jnp.zeros((1, 4)))


def test_hindsight_commands_of_a_hand_made_episode():
    rewards = jnp.asarray([1.0, 2.0, 3.0, 7.0, 7.0])  # the last two are padding
    to_go, horizon = command_targets(rewards, jnp.int32(3))
    np.testing.assert_array_equal(to_go, [6.0, 5.0, 3.0, 0.0, 0.0])
    np.testing.assert_array_equal(horizon, [3, 2, 1, 0, 0])


@pytest.mark.parametrize("trailing", [True, False])
def test_hindsight_commands_are_the_return_and_length_of_a_segment(trailing):
    """Rewards 1, 2, 4, 8 make every segment's return unique: each command names the segment
    it was drawn from, starting at its step, ending at the episode's end when trailing."""
    agent = UDRL(env_id="CartPole-v1", batch_size=400, trailing_segments=trailing)
    rewards = jnp.asarray([1.0, 2.0, 4.0, 8.0, 0.0])
    to_go, _ = command_targets(rewards, jnp.int32(4))
    store = EpisodeStore.create(
        {"t": jnp.zeros((), jnp.int32), "return_to_go": jnp.zeros(())}, 2, 5
    )
    steps = {"t": jnp.arange(5)[None], "return_to_go": to_go[None]}
    store = store.add(Episodes(steps, jnp.asarray([4]), jnp.asarray([15.0])))
    sampled, command = jax.jit(agent.hindsight)(store, jax.random.key(0))
    t1, desired, horizon = (np.asarray(x) for x in (sampled["t"], command[:, 0], command[:, 1]))
    expected = {
        (a, float(sum(2.0**i for i in range(a, b))), float(b - a))
        for a in range(4)
        for b in range(a + 1, 5)
        if b == 4 or not trailing
    }
    assert set(zip(t1.tolist(), desired.tolist(), horizon.tolist(), strict=True)) == expected


def test_commands_come_from_the_best_episodes(agent):
    step = {"obs": jnp.zeros(4), "action": jnp.zeros((), jnp.int32)}
    store = EpisodeStore.create(step, capacity=4, max_length=3)
    returns = jnp.asarray([5.0, 9.0, 1.0, 7.0])
    steps = jax.tree.map(lambda x: jnp.zeros((4, 3, *x.shape), x.dtype), step)
    store = store.add(Episodes(steps, jnp.asarray([2, 3, 1, 1]), returns))
    command = agent._command_statistics(store, 2)
    # The best two: returns 9 and 7, lengths 3 and 1.
    np.testing.assert_allclose(command["return"], 8.0)
    np.testing.assert_allclose(command["return_std"], 1.0)
    np.testing.assert_allclose(command["horizon"], 2.0)


def test_finished_episodes_reach_the_store_with_their_returns_to_go(agent):
    state, _ = initial_state(agent, 2)
    obs = jnp.arange(8.0).reshape(2, 4)
    store, recording = state.store, state.recording
    for t, done in enumerate([(False, False), (False, False), (True, False)]):
        step = Transition(
            obs=obs + t,
            action=jnp.asarray([t % 2, 1]),
            reward=jnp.asarray([1.0 + t, 1.0]),
            terminated=jnp.asarray(done),
            truncated=jnp.asarray([False, False]),
            next_obs=obs,
            info={},
        )
        store, recording = agent._record(store, recording, step)
    assert int(store.size) == 1
    stored = store.best(1)
    np.testing.assert_array_equal(stored.lengths, [3])
    np.testing.assert_array_equal(stored.returns, [6.0])
    np.testing.assert_array_equal(stored.steps["return_to_go"][0, :3], [6.0, 5.0, 3.0])
    np.testing.assert_array_equal(stored.steps["action"][0, :3], [0, 1, 0])
    np.testing.assert_array_equal(stored.steps["obs"][0, 2], obs[0] + 2)
    # Copy 0 starts a new episode; copy 1 is three steps into its first.
    np.testing.assert_array_equal(recording.lengths, [0, 3])
    np.testing.assert_array_equal(recording.returns, [0.0, 3.0])


def test_acting_spends_the_command_step_by_step():
    agent = UDRL(env_id="CartPole-v1", n_envs=2, n_steps=5)
    result = agent.train(seed=0, n_timesteps=10)
    carry = result.initial_carry()
    np.testing.assert_array_equal(carry, [[[0.0, 1.0]]])  # nothing stored before any update
    obs = np.zeros(4, np.float32)
    _, carry = result.act_with_carry(obs, carry, episode_start=True)
    _, carry = result.act_with_carry(obs, carry, episode_start=False, reward=1.0)
    _, carry = result.act_with_carry(obs, carry, episode_start=False, reward=1.0)
    np.testing.assert_array_equal(carry, [[[-2.0, 1.0]]])
    with pytest.raises(ValueError, match="act_with_carry"):
        result.act(obs)


@pytest.mark.slow
@pytest.mark.learning
def test_udrl_learns_cartpole_within_200k_steps(learning_run, bar):
    # Seeds 0-3 reach 418.7, seeds 4-7 366.9; BY571's notebook about 100 (docs/agents/udrl.md).
    _, mean_over_seeds = learning_run(UDRL(env_id="CartPole-v1"), 200_000, 25_000)
    bar.at_least("final 4-seed mean", mean_over_seeds[-1], 200, mean_over_seeds)
