"""Replay memory, the memory estimate and the refusal of runs that cannot fit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import DQN
from ajax.buffers import Episodes, EpisodeStore, ReplayBuffer, transition_bytes
from ajax.run.plan import check_memory, seed_array, state_bytes
from ajax.run.program import init_program


def _example():
    return {"obs": jnp.zeros(3), "action": jnp.zeros((), jnp.int32)}


def test_add_wraps_around_and_keeps_the_newest_rows():
    buffer = ReplayBuffer.create(_example(), capacity=5)
    for start in (0, 2, 4):
        batch = {
            "obs": jnp.arange(start, start + 2)[:, None] * jnp.ones(3),
            "action": jnp.arange(start, start + 2),
        }
        buffer = buffer.add(batch)
    assert int(buffer.size) == 5 and int(buffer.position) == 1
    np.testing.assert_array_equal(buffer.storage["action"], [5, 1, 2, 3, 4])


def test_sample_draws_only_filled_rows():
    buffer = ReplayBuffer.create(_example(), capacity=100)
    buffer = buffer.add({"obs": jnp.ones((3, 3)), "action": jnp.asarray([7, 8, 9])})
    sample = buffer.sample(jax.random.PRNGKey(0), 500)
    assert set(np.asarray(sample["action"]).tolist()) == {7, 8, 9}
    assert sample["obs"].shape == (500, 3)


def test_sequences_follow_one_copy_and_stay_within_what_was_written():
    # Two copies; the step t of copy c stores action 10*t + c. Capacity 7 is not a multiple
    # of the copies, and 9 steps (18 rows) wrap it twice.
    buffer = ReplayBuffer.create(_example(), capacity=7)
    for t in range(9):
        actions = jnp.asarray([10 * t, 10 * t + 1])
        buffer = buffer.add({"obs": jnp.zeros((2, 3)), "action": actions})
    runs = np.asarray(buffer.sample_sequences(jax.random.PRNGKey(0), 400, 3, stride=2)["action"])
    assert runs.shape == (400, 3)
    np.testing.assert_array_equal(np.diff(runs, axis=1), 10)
    # The 7 newest rows are steps 5.5-8; a run of 3 steps must start at step 6 or later (copy
    # 1 of step 5 is the oldest row, and its run would need step 7's copy 1 too: allowed).
    starts = set(runs[:, 0].tolist())
    assert starts == {51, 60, 61}, starts


def test_transition_bytes():
    assert transition_bytes(_example()) == 3 * 4 + 4


def _state_shape(agent, seeds):
    env = agent.env_copies(agent.n_envs)
    return jax.eval_shape(init_program(agent, env, 1), seed_array(seeds), {})


def test_memory_grows_with_seeds_and_buffer_size():
    small = DQN(env_id="CartPole-v1", buffer_size=1_000)
    large = DQN(env_id="CartPole-v1", buffer_size=101_000)
    total_one, buffer_one = state_bytes(_state_shape(small, [0]))
    total_four, buffer_four = state_bytes(_state_shape(small, [0, 1, 2, 3]))
    assert buffer_four == 4 * buffer_one and total_four == 4 * total_one
    # obs (4 floats) twice, action, reward, terminated and truncated (the default 5-step
    # runs stop at either episode end): 48 bytes per transition.
    _, buffer_large = state_bytes(_state_shape(large, [0]))
    assert buffer_large - buffer_one == 100_000 * 48


def test_a_run_that_cannot_fit_is_refused_with_the_estimate():
    agent = DQN(env_id="CartPole-v1", buffer_size=1_000_000)
    shape = _state_shape(agent, [0, 1])
    with pytest.raises(MemoryError, match=r"needs about .*2 seeds x .* replay buffer.*buffer_size"):
        check_memory(shape, 2, available=10_000_000)
    check_memory(shape, 2, available=10**12)


def test_a_checkpointed_run_counts_the_copies_a_checkpoint_makes():
    # On a CPU a checkpoint's two host copies come from the devices' memory.
    shape = _state_shape(DQN(env_id="CartPole-v1", buffer_size=100_000), [0, 1])
    total, _ = state_bytes(shape)
    check_memory(shape, 2, available=2 * total)
    with pytest.raises(MemoryError, match=r"held 3 times while a checkpoint is made"):
        check_memory(shape, 2, available=2 * total, host_copies=2)
    check_memory(shape, 2, available=3 * total, host_copies=2)


def test_train_refuses_before_compiling(monkeypatch):
    import ajax.run.plan

    monkeypatch.setattr(ajax.run.plan, "available_bytes", lambda: 1_000)
    with pytest.raises(MemoryError, match=r"Lower what each seed stores \(buffer_size"):
        DQN(env_id="CartPole-v1").train(seed=[0, 1], n_timesteps=1_000)


def _episodes(returns, max_length=3):
    returns = jnp.asarray(returns, jnp.float32)
    n = returns.shape[0]
    # Each episode's steps hold its return, so the tests can see which episode went where.
    steps = {"obs": jnp.broadcast_to(returns[:, None, None], (n, max_length, 2))}
    return Episodes(steps, jnp.full(n, max_length, jnp.int32), returns)


def test_episode_store_keeps_the_best_episodes():
    store = EpisodeStore.create({"obs": jnp.zeros(2)}, capacity=3, max_length=3)
    assert int(store.size) == 0
    store = store.add(_episodes([5.0, -jnp.inf]))
    assert int(store.size) == 1
    store = store.add(_episodes([1.0, 9.0, 3.0, 7.0, 2.0]))
    assert sorted(np.asarray(store.episodes.returns).tolist()) == [5.0, 7.0, 9.0]
    # Each episode's steps moved with it.
    np.testing.assert_array_equal(store.episodes.steps["obs"][:, 0, 0], store.episodes.returns)
    np.testing.assert_array_equal(store.best(2).returns, [9.0, 7.0])
    np.testing.assert_array_equal(store.best(2).steps["obs"][:, 2, 1], [9.0, 7.0])


def test_episode_store_keeps_the_older_of_equal_returns():
    store = EpisodeStore.create({"obs": jnp.zeros(2)}, capacity=2, max_length=3)
    store = store.add(Episodes({"obs": jnp.zeros((2, 3, 2))}, jnp.asarray([1, 2]), jnp.ones(2)))
    store = store.add(Episodes({"obs": jnp.zeros((1, 3, 2))}, jnp.asarray([3]), jnp.ones(1)))
    assert sorted(np.asarray(store.episodes.lengths).tolist()) == [1, 2]


def test_episode_store_samples_only_stored_episodes():
    store = EpisodeStore.create({"obs": jnp.zeros(2)}, capacity=8, max_length=3)
    store = store.add(_episodes([2.0, 4.0, 6.0]))
    sample = jax.jit(store.sample, static_argnums=1)(jax.random.key(0), 300)
    assert set(np.asarray(sample.returns).tolist()) == {2.0, 4.0, 6.0}


def test_episode_store_samples_steps_within_their_episode():
    store = EpisodeStore.create({"t": jnp.zeros((), jnp.int32)}, capacity=4, max_length=5)
    lengths = jnp.asarray([2, 5])
    steps = {"t": jnp.broadcast_to(jnp.arange(5), (2, 5))}
    store = store.add(Episodes(steps, lengths, jnp.asarray([1.0, 2.0])))
    sampled, t, length = jax.jit(store.sample_steps, static_argnums=1)(jax.random.key(1), 500)
    np.testing.assert_array_equal(sampled["t"], t)
    assert np.all(t < length) and np.all(t >= 0)
    assert set(np.asarray(length).tolist()) == {2, 5}
    assert set(np.asarray(t[length == 5]).tolist()) == {0, 1, 2, 3, 4}


def test_episode_store_samples_segments_within_their_episode():
    store = EpisodeStore.create({"t": jnp.zeros((), jnp.int32)}, capacity=4, max_length=5)
    lengths = jnp.asarray([2, 5])
    steps = {"t": jnp.broadcast_to(jnp.arange(5), (2, 5))}
    store = store.add(Episodes(steps, lengths, jnp.asarray([1.0, 2.0])))
    sample = jax.jit(store.sample_segments, static_argnums=1)(jax.random.key(2), 2000)
    first, last, span, trailing = (np.asarray(x) for x in jax.tree.leaves(sample))
    t1, t2 = first, first + span
    # t1 < t2 <= the episode's length; the step at t2 is the last one where t2 is the end.
    assert np.all(span >= 1) and np.all(t2 <= 5)
    np.testing.assert_array_equal(last, np.where(trailing, t2 - 1, t2))
    # Every segment of both episodes is drawn, and none other.
    expected = {
        (a, b, b == length)
        for length in (2, 5)
        for a in range(length)
        for b in range(a + 1, length + 1)
    }
    assert set(zip(t1.tolist(), t2.tolist(), trailing.tolist(), strict=True)) == expected
