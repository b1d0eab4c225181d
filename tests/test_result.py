"""Results: evaluate, act, save and load."""

import dataclasses
import json
import os
import tracemalloc
from pathlib import Path

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ajax
from ajax.envs import from_gymnax

from .interrupts import join_helper_threads
from .probes import ActionReward


def test_evaluate_gives_one_mean_per_seed_and_repeats_itself(small_result):
    returns = ajax.evaluate(small_result, num_episodes=5, seed=0)
    assert returns.shape == (2,)
    np.testing.assert_array_equal(returns, ajax.evaluate(small_result, num_episodes=5, seed=0))


def test_evaluate_returns_what_the_greedy_action_earns():
    # ActionReward pays +1 for action 1 and -1 for action 0 on its single step, so each
    # seed's evaluation is fixed by its deterministic action. Four barely trained seeds.
    result = ajax.PPO(env_id=ActionReward(), n_envs=2, n_steps=8, n_minibatches=2).train(
        seed=[0, 1, 2, 3], n_timesteps=16
    )
    actions = result.act(np.ones(1, np.float32))
    returns = ajax.evaluate(result, num_episodes=3, seed=0)
    np.testing.assert_array_equal(returns, np.where(actions == 1, 1.0, -1.0))


def test_unlogged_run_has_no_evaluations(small_result):
    assert small_result.evaluations["timestep"].shape == (0,)
    assert small_result.evaluations["episode_return"].shape == (2, 0)
    assert small_result.train_metrics["timestep"].tolist() == [640]
    assert small_result.n_timesteps == 640


def test_a_result_reads_in_one_line_without_its_state(small_result):
    agent = repr(small_result.agent)
    assert repr(small_result) == (
        f"TrainResult({agent}, seeds=[3, 5], n_timesteps=640, evaluations=0)"
    )
    evaluated = dataclasses.replace(
        small_result,
        evaluations={
            "timestep": np.array([320, 640]),
            "episode_return": np.array([[9, 20], [9, 30]]),
        },
        diverged=[{"seed": 5, "timestep": 320, "metric": "params"}],
        log_dir="runs/x",
    )
    assert repr(evaluated) == (
        f"TrainResult({agent}, seeds=[3, 5], n_timesteps=640, evaluations=2, final_return=25.0, "
        "diverged=[5], log_dir='runs/x')"
    )


def test_act_gives_an_action_per_seed(small_result):
    obs = np.zeros(4, np.float32)
    actions = small_result.act(obs)
    assert actions.shape == (2,) and set(actions.tolist()) <= {0, 1}
    with pytest.raises(ValueError, match="obs must have shape"):
        small_result.act(np.zeros(3))


def test_a_loaded_result_evaluates_and_acts_the_same(small_result, tmp_path):
    small_result.save(tmp_path / "saved")
    loaded = ajax.load(tmp_path / "saved")
    assert loaded.seeds == small_result.seeds and repr(loaded.agent) == repr(small_result.agent)
    np.testing.assert_array_equal(
        ajax.evaluate(loaded, num_episodes=5, seed=1),
        ajax.evaluate(small_result, num_episodes=5, seed=1),
    )
    obs = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    np.testing.assert_array_equal(loaded.act(obs), small_result.act(obs))


def test_continuous_actions_come_back_in_the_env_bounds_with_normalisation(tmp_path):
    agent = ajax.PPO(
        env_id="Pendulum-v1",
        n_envs=2,
        n_steps=32,
        normalize_observations=True,
        normalize_rewards=True,
        init_log_std=1.0,
    )
    result = agent.train(seed=[0, 1], n_timesteps=128)
    obs = np.asarray([[1.0, 0.0, 8.0], [0.0, 1.0, -8.0]], np.float32)
    actions = result.act(obs, deterministic=False)
    assert actions.shape == (2, 1) and np.all(np.abs(actions) <= 2.0)
    result.save(tmp_path / "pendulum")
    loaded = ajax.load(tmp_path / "pendulum")
    np.testing.assert_array_equal(loaded.act(obs), result.act(obs))
    np.testing.assert_array_equal(
        loaded.state.cursor.env_state.inner.moments.mean,
        result.state.cursor.env_state.inner.moments.mean,
    )


def test_a_save_keeps_no_copy_of_the_state_and_a_load_holds_one_array_at_a_time(tmp_path):
    # A replay buffer of 200,000 transitions over two seeds (split over the CPU's devices):
    # about 10 MB of state, most of it in a few arrays. Encoding the whole state at once held
    # two more copies of it, and kept one on the split arrays after the save.
    result = ajax.DQN("CartPole-v1", buffer_size=200_000, learning_starts=256).train(
        seed=[0, 1], n_timesteps=512
    )
    state_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(result.state))
    # tracemalloc counts every thread's allocations: a program left running by an earlier
    # test in this worker, or this run's helper winding down, must not be counted as the save's.
    join_helper_threads()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result.save(tmp_path / "saved")
        held, peak = tracemalloc.get_traced_memory()
        assert held - before < 0.05 * state_bytes
        assert peak - before < 0.5 * state_bytes
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        loaded = ajax.load(tmp_path / "saved")
        assert tracemalloc.get_traced_memory()[1] - before < state_bytes
    finally:
        tracemalloc.stop()
    leaves = zip(jax.tree.leaves(result.state), jax.tree.leaves(loaded.state), strict=True)
    for saved, read in leaves:
        np.testing.assert_array_equal(np.asarray(saved), np.asarray(read))


def test_a_damaged_saved_result_is_refused_naming_the_damage(small_result, tmp_path):
    saved = small_result.save(tmp_path / "saved")
    state = saved / json.loads((saved / "result.json").read_text())["state_file"]
    state.write_bytes(state.read_bytes()[:-64])
    with pytest.raises(ValueError, match=r"state-\w{8}\.msgpack is cut short .*Save the run"):
        ajax.load(saved)
    # Other damage names the file, and blames no version.
    meta = (saved / "result.json").read_text()
    (saved / "result.json").write_text(meta.replace('"seeds"', '"sneeds"'))
    with pytest.raises(ValueError, match=r"does not hold a whole result \(KeyError: 'seeds'\)"):
        ajax.load(saved)
    (saved / "result.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"result\.json is not valid JSON .*damaged"):
        ajax.load(saved)
    (saved / "result.json").write_text(meta)
    state.unlink()
    with pytest.raises(FileNotFoundError, match=r"but not its state-\w{8}\.msgpack: it was not"):
        ajax.load(saved)


def test_a_save_over_a_result_replaces_it_whole_or_not_at_all(small_result, tmp_path, monkeypatch):
    saved = small_result.save(tmp_path / "saved")
    weights = jax.tree.map(
        lambda x: -x if jnp.issubdtype(x.dtype, jnp.floating) else x, small_result.state
    )
    newer = dataclasses.replace(small_result, state=weights, n_timesteps=1_280)

    def holds(result):
        loaded = ajax.load(saved)
        assert loaded.n_timesteps == result.n_timesteps
        leaves = zip(jax.tree.leaves(loaded.state), jax.tree.leaves(result.state), strict=True)
        for read, kept in leaves:
            np.testing.assert_array_equal(np.asarray(read), np.asarray(kept))

    # Cut short while writing the new state, then while renaming its description into place.
    written = []

    def cut_at_the_third_array(*args):
        written.append(args)
        if len(written) == 3:
            raise KeyboardInterrupt
        write_array(*args)

    write_array = ajax.serialization._write_array
    with monkeypatch.context() as patch:
        patch.setattr(ajax.serialization, "_write_array", cut_at_the_third_array)
        with pytest.raises(KeyboardInterrupt):
            newer.save(saved)
    holds(small_result)
    replace = os.replace

    def cut_at_the_description(src, dst):
        if Path(dst).name == "result.json":
            raise KeyboardInterrupt
        replace(src, dst)

    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", cut_at_the_description)
        with pytest.raises(KeyboardInterrupt):
            newer.save(saved)
    holds(small_result)
    # A save that ends replaces it: of the state files, its own is left (the unnamed one the
    # cut left is removed), and a file of the user's stays.
    (saved / "notes.txt").write_text("seed 5 looked odd")
    newer.save(saved)
    holds(newer)
    assert sorted(p.name for p in saved.iterdir()) == sorted(
        ["notes.txt", "result.json", json.loads((saved / "result.json").read_text())["state_file"]]
    )


def test_a_result_saved_before_format_4_loads(small_result, tmp_path):
    """Formats 1 to 3 kept the state in ``state.msgpack`` and named no file."""
    saved = small_result.save(tmp_path / "saved")
    meta = json.loads((saved / "result.json").read_text())
    (saved / meta.pop("state_file")).rename(saved / "state.msgpack")
    (saved / "result.json").write_text(json.dumps(meta | {"format": 3}))
    obs = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    np.testing.assert_array_equal(ajax.load(saved).act(obs), small_result.act(obs))


def test_load_of_a_directory_without_a_result_fails_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="no saved Ajax result"):
        ajax.load(tmp_path)


def test_a_run_on_an_environment_object_loads_with_an_environment_that_fits(tmp_path):
    upstream, params = gymnax.make("CartPole-v1")
    env = from_gymnax(upstream, params, env_id="MyCartPole")
    result = ajax.PPO(env_id=env, n_envs=2, n_steps=8, n_minibatches=2).train(n_timesteps=16)
    saved = result.save(tmp_path / "mine")
    with pytest.raises(
        ValueError,
        match=r"environment object \(gymnax\.environments\.classic_control\.cartpole\.CartPole, "
        r"named 'MyCartPole'\).*ajax\.load\(.*env=\.\.\.\)",
    ):
        ajax.load(saved)
    acrobot = from_gymnax(*gymnax.make("Acrobot-v1"))
    with pytest.raises(
        ValueError,
        match=r"saved on gymnax\.environments\.classic_control\.cartpole\.CartPole: "
        r"observation_space\.shape: saved \[4\], given \[6\];.*action_space\.n: saved 2, given 3",
    ):
        ajax.load(saved, env=acrobot)
    with pytest.raises(TypeError, match="env must be an ajax Env"):
        ajax.load(saved, env=upstream)
    # The same environment built anew, as a user's next session would.
    loaded = ajax.load(saved, env=from_gymnax(*gymnax.make("CartPole-v1")))
    obs = np.random.default_rng(0).normal(size=(1, 4)).astype(np.float32)
    np.testing.assert_array_equal(loaded.act(obs), result.act(obs))


def test_a_box_whose_bounds_differ_is_refused(tmp_path):
    upstream, params = gymnax.make("MountainCarContinuous-v0")
    result = ajax.PPO(env_id=from_gymnax(upstream, params), n_envs=2, n_steps=8).train(
        n_timesteps=16
    )
    saved = result.save(tmp_path / "mine")
    faster = from_gymnax(upstream, params.replace(max_speed=0.1))
    with pytest.raises(ValueError, match=r"observation_space\.(low|high): saved"):
        ajax.load(saved, env=faster)


def test_a_save_names_its_version_and_an_incompatible_one_is_refused_naming_both(
    small_result, tmp_path
):
    saved = small_result.save(tmp_path / "saved")
    meta = json.loads((saved / "result.json").read_text())
    assert meta["ajax_version"] == ajax.__version__ and meta["format"] == 4

    newer = dict(meta, format=5, ajax_version="9.0.0")
    (saved / "result.json").write_text(json.dumps(newer))
    with pytest.raises(
        ValueError, match=r"saved by Ajax 9\.0\.0 in result format 5.*reads formats 1, 2, 3, 4"
    ):
        ajax.load(saved)

    # A state written by a version whose networks differ does not fit this one's.
    other = dict(
        meta, ajax_version="0.0.9", hyperparameters=meta["hyperparameters"] | {"hidden_sizes": [8]}
    )
    (saved / "result.json").write_text(json.dumps(other))
    with pytest.raises(
        ValueError,
        match=rf"saved by Ajax 0\.0\.9 and does not fit this Ajax \({ajax.__version__}\)",
    ):
        ajax.load(saved)
    # The same version's state in another layout is another build's, not damage.
    (saved / "result.json").write_text(json.dumps(dict(other, ajax_version=ajax.__version__)))
    with pytest.raises(ValueError, match=r"saved by another build of Ajax .*differs") as error:
        ajax.load(saved)
    assert "damaged" not in str(error.value)
