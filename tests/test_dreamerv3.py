"""DreamerV3: the imagined rollout's shapes at every size, the rows-to-sequence mapping, the
imagination's lambda-returns against the reference's recursion, the replay schedule and the
constructor's refusals, the acting carry's reset inside the replay schedule, and two short
runs that train and evaluate: on CartPole, whose constant reward the reward head must fit
(and whose saved run must act after loading), and on a continuous probe whose reward is the
action, whose grid also shows a sweep reading every batchable field inside its program.

Everything that runs uses the reference's ``debug`` sizes (``PRESETS["debug"]``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ajax
from ajax import LoggingConfig
from ajax.agents.dreamerv3 import (
    PRESETS,
    DreamerV3,
    WorldModel,
    features,
    imagined_returns,
    replay_schedule,
)

from .grids import assert_read_inside, moved_sweep
from .probes import RewardIsAction
from .states import initial_state

#: The reference's debug batches (batch_size 8, batch_length 10), 4 copies, and a ratio that
#: gives one update per step of every copy.
DEBUG = {"size": "debug", "batch_size": 8, "batch_length": 10, "train_ratio": 20.0}
#: The probes' settings: one-step episodes need only short sequences and rollouts; a larger
#: step size without warm-up, and two updates per step of every copy, so that a few hundred
#: updates suffice.
PROBE = {
    "size": "debug",
    "batch_size": 16,
    "batch_length": 4,
    "imagination_horizon": 2,
    "train_ratio": 32.0,
    "learning_starts": 64,
    "learning_rate": 3e-3,
    "lr_warmup": 0,
}


def debug_agent(env_id="CartPole-v1", n_envs=4, **overrides):
    return DreamerV3(env_id, n_envs=n_envs, **(DEBUG | {"learning_starts": 100} | overrides))


@pytest.mark.parametrize("size", sorted(PRESETS))
def test_the_imagined_rollout_has_its_shapes_at_every_size(size):
    agent = DreamerV3("CartPole-v1", n_envs=4, size=size)
    p, horizon, starts = PRESETS[size], agent.config.imagination_horizon, 6
    params = jax.eval_shape(
        lambda key: agent._init_params(key, jnp.zeros((4, 4))), jax.random.key(0)
    )
    start = (jnp.zeros((starts, p.deter)), jnp.zeros((starts, p.stoch, p.classes)))
    feats, actions, last = jax.eval_shape(
        lambda params: agent._imagine(params, start, jax.random.key(1)), params
    )
    assert feats.shape == (horizon, starts, p.deter + p.stoch * p.classes)
    assert last.shape == feats.shape[1:]
    assert actions.shape == (horizon, starts) and actions.dtype == jnp.int32


def test_a_sequence_starts_from_the_zero_state_and_again_after_each_episode_end():
    agent = debug_agent()
    state, _ = initial_state(agent)
    length = agent.config.batch_length
    ends = np.zeros((2, length), np.float32)
    ends[0, 3] = 1.0  # terminated at row 3: row 4 starts an episode
    ends[1, 6] = 1.0  # truncated at row 6: row 7 starts one
    rng = np.random.default_rng(0)
    batch = {
        "obs": jnp.asarray(rng.normal(size=(2, length, 4)), jnp.float32),
        "next_obs": jnp.asarray(rng.normal(size=(2, length, 4)), jnp.float32),
        "action": jnp.asarray(rng.integers(0, 2, (2, length)), jnp.int32),
        "reward": jnp.ones((2, length)),
        "terminated": jnp.asarray(np.stack([ends[0], np.zeros(length)]), jnp.float32),
        "truncated": jnp.asarray(np.stack([np.zeros(length), ends[1]]), jnp.float32),
    }
    seq = jax.jit(agent._observe_sequences)(state.params, batch, jax.random.key(0))
    first = np.zeros((2, length), bool)
    first[:, 0] = True
    first[0, 4] = first[1, 7] = True
    np.testing.assert_array_equal(seq["first"], first)
    for start, reset, latent in zip(seq["start"], seq["reset"], seq["latent"], strict=True):
        previous = np.concatenate([np.zeros_like(latent[:, :1]), latent[:, :-1]], axis=1)
        where = first.reshape(first.shape + (1,) * (start.ndim - 2))
        np.testing.assert_array_equal(start, np.where(where, reset, previous))
    # Every reset latent is the GRU's step from the zero state, whatever the row.
    reset_deter = np.asarray(seq["reset"][0])
    np.testing.assert_allclose(reset_deter, np.broadcast_to(reset_deter[0, 0], reset_deter.shape))
    assert not np.allclose(seq["latent"][0][:, 1:], reset_deter[:, 1:])


def test_imagined_returns_follow_the_references_recursion():
    rng = np.random.default_rng(1)
    horizon, n, lam = 5, 3, 0.95
    reward, value = rng.normal(size=(2, horizon + 1, n)).astype(np.float32)
    cont = rng.uniform(size=(horizon + 1, n)).astype(np.float32)
    # The reference's lambda_return with last = 0, term = 1 - cont and disc = 1, written out.
    expected = [value[-1]]
    for t in reversed(range(horizon)):
        interm = reward[t + 1] + (1 - lam) * cont[t + 1] * value[t + 1]
        expected.append(interm + cont[t + 1] * lam * expected[-1])
    expected = np.stack(expected[::-1][:-1])
    got = imagined_returns(jnp.asarray(reward), jnp.asarray(value), jnp.asarray(cont), lam)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_the_train_ratio_sets_steps_and_updates_per_iteration():
    assert replay_schedule(32.0, 1024, 4) == (8, 1)
    assert replay_schedule(512.0, 1024, 1) == (2, 1)
    assert replay_schedule(256.0, 16, 4) == (1, 64)
    assert replay_schedule(32.0, 1024, 3) is None
    for ratio, n_envs in [(10.0, 4), (20.0, 4), (40.0, 4), (8.0, 10)]:
        agent = debug_agent(n_envs=n_envs, train_ratio=ratio, learning_starts=1_000)
        replayed = agent.updates_per_iteration * 8 * 10
        assert replayed / agent.steps_per_iteration == ratio
        assert agent.steps_per_iteration == n_envs * agent._steps_per_copy


def test_a_ratio_without_a_whole_schedule_is_refused_naming_the_nearest_that_work():
    with pytest.raises(
        ValueError, match=r"train_ratio=32 gives no whole schedule.*31\.0303 and 34\.1333"
    ):
        DreamerV3("CartPole-v1", n_envs=3, train_ratio=32.0)
    with pytest.raises(ValueError, match=r"nearest ratios that work are 40 and 60"):
        debug_agent(train_ratio=50.0)


def test_an_unknown_size_is_refused_listing_the_sizes():
    with pytest.raises(ValueError, match=r"size='2m' is not a DreamerV3 model size.*'1m', '12m'"):
        DreamerV3("CartPole-v1", size="2m")


def test_learning_starts_must_leave_room_for_one_sequence_per_copy():
    with pytest.raises(ValueError, match="Set learning_starts to at least 253"):
        DreamerV3("CartPole-v1", n_envs=4, learning_starts=100)
    DreamerV3("CartPole-v1", n_envs=4, learning_starts=253)


def test_the_carry_starts_from_zero_exactly_where_an_episode_ended():
    agent = debug_agent()
    state, env = initial_state(agent)
    collect = jax.jit(lambda s: agent._collect(s, env, agent._explorer_at))
    ends = 0
    for _ in range(60):
        state, transitions = collect(state)
        done = np.asarray(transitions.done[-1])
        carry = {k: np.asarray(v).reshape(agent.n_envs, -1) for k, v in state.cursor.carry.items()}
        for leaf in carry.values():
            assert np.all(leaf[done] == 0)
        # Elsewhere the carry holds the step's one-hot latent and action.
        assert np.all(carry["stoch"][~done].sum(-1) > 0)
        np.testing.assert_array_equal(carry["action"][~done].sum(-1), 1.0)
        ends += done.sum()
    assert ends >= 3


def reward_prediction(agent, params, obs, action):
    """The reward the model predicts for ``action`` taken at the first observation of an
    episode, ``obs`` following (at the posteriors' modes)."""
    carry = agent.initial_carry(params, obs.shape[0])
    carry = agent._next_carry(*agent._observe(params, obs, carry, None), action)
    latent = agent._observe(params, obs, carry, None)
    logits, _ = agent._model(params, WorldModel.predict, features(latent))
    return agent._bins().decode(logits)


@pytest.fixture(scope="module")
def cartpole_result(tmp_path_factory):
    """A short run on CartPole, whose reward is 1 at every step, at the probes' settings."""
    return DreamerV3("CartPole-v1", n_envs=4, **PROBE).train(
        seed=[0, 1],
        n_timesteps=800,
        num_episode_test=2,
        logging_config=LoggingConfig(log_frequency=400, log_dir=tmp_path_factory.mktemp("runs")),
    )


def test_the_reward_head_fits_a_constant_reward(cartpole_result):
    agent, start = cartpole_result.agent, jnp.zeros((1, 4))  # CartPole upright, at rest
    # One program for both seeds: op by op, each operation compiles on its own.
    predict = jax.jit(jax.vmap(lambda p: reward_prediction(agent, p, start, jnp.zeros(1, int))))
    np.testing.assert_allclose(predict(cartpole_result.state.params), 1.0, rtol=0.1)


@pytest.fixture(scope="module")
def action_grid(tmp_path_factory):
    """The action probe's run, as the first configuration of a grid whose second moves every
    batchable field (tests/grids.py): one program serves the probe and the sweep's check."""
    agent = DreamerV3(RewardIsAction(), n_envs=4, **PROBE)
    logging_config = LoggingConfig(log_frequency=1_000, log_dir=tmp_path_factory.mktemp("action"))
    train = dict(seed=[0, 1], n_timesteps=2_000, num_episode_test=2, logging_config=logging_config)
    return agent, agent.train(sweep=moved_sweep(agent), **train), train


def test_the_actor_pushes_its_action_up_where_the_reward_is_the_action(action_grid):
    result = action_grid[1].result(0)
    # One program for both seeds: op by op, each operation compiles on its own.
    mode = jax.jit(jax.vmap(lambda p: result.agent.policy(p, jnp.ones((1, 1))).mode()[0, 0]))
    assert np.all(np.asarray(mode(result.state.params)) > 0.9)
    # Evaluation on this continuous task: one step, whose return is the action taken.
    returns = result.evaluations["episode_return"]
    assert returns.shape == (2, 2) and np.all(returns[:, -1] > 0.9), returns


@pytest.mark.slow
def test_every_batchable_field_is_read_inside_the_program(action_grid, monkeypatch):
    agent, grid, train = action_grid
    assert_read_inside(agent, grid, monkeypatch, **train)


@pytest.mark.slow
def test_a_short_run_on_cartpole_trains_and_evaluates(cartpole_result):
    assert cartpole_result.evaluations["episode_return"].shape == (2, 2)
    assert np.all(cartpole_result.evaluations["episode_return"] > 0)
    assert all(np.isfinite(leaf).all() for leaf in jax.tree.leaves(cartpole_result.state.params))
    assert np.isfinite(cartpole_result.train_metrics["train/model_loss"]).all()


@pytest.mark.slow
def test_a_loaded_run_acts_with_its_carry_as_the_saved_one(cartpole_result, tmp_path):
    cartpole_result.save(tmp_path / "saved")
    loaded = ajax.load(tmp_path / "saved")
    with pytest.raises(ValueError, match="act_with_carry"):
        loaded.act(np.zeros(4, np.float32))
    obs = np.random.default_rng(0).normal(size=(3, 2, 4)).astype(np.float32)
    carry, saved_carry = loaded.initial_carry(), cartpole_result.initial_carry()
    for t, step_obs in enumerate(obs):
        action, carry = loaded.act_with_carry(step_obs, carry, episode_start=t == 0)
        saved_action, saved_carry = cartpole_result.act_with_carry(
            step_obs, saved_carry, episode_start=t == 0
        )
        np.testing.assert_array_equal(action, saved_action)
        # The two programs may sum in another order (the saved run's parameters sit on two
        # devices, the loaded run's on one): the carries agree to float32 rounding. Their
        # entries are at most 1 in size and pass through three recurrent steps, so the bound
        # is 1e-5 (about 80 float32 ulps at 1); one CI machine differed by 1.4e-6. A wrong
        # or reset carry differs by orders more.
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), carry, saved_carry)
        assert set(action.tolist()) <= {0, 1} and np.any(np.asarray(carry["deter"]) != 0)
