"""Environments: the gymnax adapter against gymnax itself, the registry, and the wrappers."""

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import make_env
from ajax.envs import Box, Discrete, Env, from_gymnax
from ajax.envs.core import SEED_AXIS, bare_state
from ajax.envs.wrappers import (
    ActionMap,
    AutoReset,
    EpisodeStats,
    NormalizeObservation,
    NormalizeReward,
    RunningMoments,
    VectorEnv,
    copies,
)


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1", "Acrobot-v1"])
def test_adapter_matches_gymnax_step_for_step(name):
    env = make_env(name)
    upstream, params = gymnax.make(name)
    key = jax.random.PRNGKey(0)
    state, obs = env.reset(key)
    up_obs, up_state = upstream.reset(key, params)
    step, up_step = jax.jit(env.step), jax.jit(upstream.step_env)
    np.testing.assert_allclose(obs, up_obs, rtol=1e-6)
    for t in range(30):
        key, act_key, step_key = jax.random.split(key, 3)
        action = upstream.action_space(params).sample(act_key)
        state, obs, reward, terminated, _truncated, _ = step(step_key, state, action)
        # gymnax's own step splits its key into (step, reset) and steps with the first.
        up_step_key, _ = jax.random.split(step_key)
        up_obs, up_state, up_reward, up_terminated, _ = up_step(
            up_step_key, up_state, action, params
        )
        np.testing.assert_allclose(obs, up_obs, rtol=1e-5, atol=1e-6, err_msg=f"step {t}")
        np.testing.assert_allclose(reward, up_reward, rtol=1e-5, atol=1e-6)
        assert bool(terminated) == bool(up_terminated)
        if terminated:
            break


def test_spaces_are_converted():
    cartpole, pendulum = make_env("CartPole-v1"), make_env("gymnax/Pendulum-v1")
    assert cartpole.action_space == Discrete(2)
    assert isinstance(pendulum.action_space, Box)
    np.testing.assert_allclose(pendulum.action_space.low, [-2.0])
    np.testing.assert_allclose(pendulum.action_space.high, [2.0])
    assert pendulum.observation_space.shape == (3,)
    assert cartpole.max_episode_steps == 500 and pendulum.max_episode_steps == 200


def test_env_params_override_defaults_and_unknown_ones_fail():
    assert make_env("Pendulum-v1", max_steps_in_episode=50).max_episode_steps == 50
    # A whole float (YAML's 1e3, np.float64) is the int the field holds; a fraction is refused.
    long = make_env("Pendulum-v1", max_steps_in_episode=np.float64(1e3))
    assert type(long.params.max_steps_in_episode) is int and long.max_episode_steps == 1000
    with pytest.raises(ValueError, match=r"takes a whole number like its default, 200, not 50\.5"):
        make_env("Pendulum-v1", max_steps_in_episode=50.5)
    # Float fields take any number.
    assert make_env("Pendulum-v1", max_torque=1.5).params.max_torque == 1.5
    with pytest.raises(ValueError, match="no parameters 'gravity_on_mars'; its parameters"):
        make_env("Pendulum-v1", gravity_on_mars=3.7)
    with pytest.raises(ValueError, match=r"'max_step' \(did you mean 'max_steps_in_episode'\?\)"):
        make_env("Pendulum-v1", max_step=50)


def test_unknown_id_names_the_closest_ids():
    with pytest.raises(ValueError, match="CartPole-v1") as error:
        make_env("CartPol-v1")
    assert "ajax list" in str(error.value)
    with pytest.raises(ValueError, match="Unknown environment id"):
        make_env("nosuchfamily/CartPole-v1")


def test_a_gymnax_object_steps_as_its_registered_id():
    upstream, params = gymnax.make("CartPole-v1")
    own = from_gymnax(upstream, params.replace(max_steps_in_episode=20), env_id="MyCartPole")
    registered = make_env("CartPole-v1", max_steps_in_episode=20)
    assert own.env_id == "MyCartPole" and own.max_episode_steps == 20
    assert own.action_space == registered.action_space
    key = jax.random.PRNGKey(3)
    (state, obs), (ref_state, ref_obs) = own.reset(key), registered.reset(key)
    np.testing.assert_array_equal(obs, ref_obs)
    for _ in range(25):
        key, step_key = jax.random.split(key)
        action = jnp.int32(1)
        state, obs, reward, terminated, truncated, _ = own.step(step_key, state, action)
        ref = registered.step(step_key, ref_state, action)
        ref_state = ref[0]
        for mine, theirs in zip((obs, reward, terminated, truncated), ref[1:5], strict=True):
            np.testing.assert_array_equal(mine, theirs)
    assert from_gymnax(upstream).max_episode_steps == 500
    # Unnamed, it takes gymnax's name for the environment (its run directories' too).
    assert from_gymnax(upstream).env_id == "CartPole-v1"


def test_from_gymnax_refuses_what_is_not_a_gymnax_environment():
    with pytest.raises(TypeError, match="lacks reset_env, step_env"):
        from_gymnax(object())
    upstream, _ = gymnax.make("CartPole-v1")
    with pytest.raises(TypeError, match="max_steps_in_episode"):
        from_gymnax(upstream, {"gravity": 9.8})


def test_an_env_instance_passes_through():
    env = make_env("CartPole-v1")
    assert make_env(env) is env
    with pytest.raises(TypeError, match=r"got CartPole; wrap .* ajax.envs.from_gymnax"):
        make_env(gymnax.make("CartPole-v1")[0])


class _Countdown(Env):
    """Probe: episodes end by termination after ``state`` reaches 0 (reward 1 per step), or
    by truncation at the time limit; obs is the countdown itself."""

    observation_space = Box(-np.inf, np.inf, (1,))
    action_space = Discrete(2)
    max_episode_steps = 5

    def __init__(self, start: int):
        self.start = start

    def reset(self, key):
        state = (jnp.asarray(self.start), jnp.asarray(0))
        return state, jnp.asarray([float(self.start)])

    def step(self, key, state, action):
        count, t = state[0] - 1, state[1] + 1
        terminated = count <= 0
        truncated = (t >= self.max_episode_steps) & ~terminated
        return (
            (count, t),
            jnp.asarray([count], jnp.float32),
            jnp.float32(1.0),
            terminated,
            truncated,
            {},
        )


def _batch(env, n):
    return EpisodeStats(AutoReset(VectorEnv(env, n)))


def test_auto_reset_keeps_final_obs_and_separates_termination_from_truncation():
    env = _batch(_Countdown(3), 2)
    state, obs = env.reset(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(1)
    step = jax.jit(env.step)
    for _ in range(2):
        state, obs, *_ = step(key, state, jnp.zeros(2, jnp.int32))
    state, obs, _reward, terminated, truncated, info = step(key, state, jnp.zeros(2, jnp.int32))
    np.testing.assert_array_equal(terminated, [True, True])
    np.testing.assert_array_equal(truncated, [False, False])
    np.testing.assert_array_equal(info["final_obs"][:, 0], [0.0, 0.0])  # true final obs
    np.testing.assert_array_equal(obs[:, 0], [3.0, 3.0])  # post-reset obs
    np.testing.assert_array_equal(info["episode_return"], [3.0, 3.0])
    np.testing.assert_array_equal(info["episode_length"], [3, 3])

    long = _batch(_Countdown(100), 1)
    state, _ = long.reset(key)
    step = jax.jit(long.step)
    for _ in range(5):
        state, obs, _, terminated, truncated, info = step(key, state, jnp.zeros(1, jnp.int32))
    assert bool(truncated[0]) and not bool(terminated[0])
    assert float(info["final_obs"][0, 0]) == 95.0 and float(obs[0, 0]) == 100.0


def test_auto_reset_only_resets_copies_that_ended():
    env = AutoReset(VectorEnv(_Countdown(2), 3))
    state, _ = env.reset(jax.random.PRNGKey(0))
    # Desynchronise the copies: copy 0 is one step from its end, the others are not.
    state = (jnp.asarray([1, 2, 2]), jnp.asarray([0, 0, 0]))
    state, obs, _, terminated, *_ = env.step(jax.random.PRNGKey(1), state, jnp.zeros(3, jnp.int32))
    np.testing.assert_array_equal(terminated, [True, False, False])
    np.testing.assert_array_equal(obs[:, 0], [2.0, 1.0, 1.0])


def test_auto_reset_skips_the_reset_computation_behind_a_cond():
    env = AutoReset(VectorEnv(_Countdown(2), 3))
    state, _ = env.reset(jax.random.PRNGKey(0))
    jaxpr = jax.make_jaxpr(env.step)(jax.random.PRNGKey(1), state, jnp.zeros(3, jnp.int32))
    assert "cond" in str(jaxpr)


def test_the_reset_stays_behind_a_cond_under_the_vmap_over_seeds():
    # A cond whose predicate is batched becomes a select computing both branches; the run's
    # vmap over seeds is named, so AutoReset reduces its predicate over the seeds first.
    env = AutoReset(VectorEnv(_Countdown(2), 3))
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    state, _ = jax.vmap(env.reset)(keys)
    actions = jnp.zeros((2, 3), jnp.int32)
    named = jax.make_jaxpr(jax.vmap(env.step, axis_name=SEED_AXIS))(keys, state, actions)
    unnamed = jax.make_jaxpr(jax.vmap(env.step))(keys, state, actions)
    assert "cond" in str(named) and "cond" not in str(unnamed)
    # Seeds whose copies did not end keep their state: the reset is selected per copy.
    state = (jnp.asarray([[1, 2, 2], [2, 2, 2]]), jnp.zeros((2, 3), jnp.int32))
    _, obs, _, terminated, *_ = jax.vmap(env.step, axis_name=SEED_AXIS)(keys, state, actions)
    np.testing.assert_array_equal(terminated, [[True, False, False], [False, False, False]])
    np.testing.assert_array_equal(obs[..., 0], [[2.0, 1.0, 1.0], [1.0, 1.0, 1.0]])


def test_action_map_sends_unit_actions_onto_the_bounds():
    pendulum = make_env("Pendulum-v1")
    mapped = ActionMap(pendulum)
    assert mapped.action_space.low.tolist() == [-1.0] and mapped.action_space.high.tolist() == [1.0]
    np.testing.assert_allclose(
        mapped.to_env(jnp.asarray([-1.0, 0.0, 0.5, 1.0, 7.0])), [-2, 0, 1, 2, 2]
    )
    with pytest.raises(ValueError, match="bounded Box"):
        ActionMap(make_env("CartPole-v1"))


def test_running_moments_match_numpy_over_batches():
    data = np.random.default_rng(0).normal(3.0, 2.0, size=(40, 5))
    moments = RunningMoments.zeros((5,))
    for chunk in np.split(data, 4):
        moments = moments.update(jnp.asarray(chunk))
    np.testing.assert_allclose(moments.mean, data.mean(0), rtol=1e-3)
    np.testing.assert_allclose(moments.var, data.var(0), rtol=1e-3)


def test_normalisation_wrappers_and_their_evaluation_copies():
    base = _batch(make_env("Pendulum-v1"), 8)
    env = NormalizeReward(NormalizeObservation(base), gamma=0.99)
    state, obs = env.reset(jax.random.PRNGKey(0))
    key = jax.random.PRNGKey(1)
    action = jnp.zeros((8, 1))
    step = jax.jit(env.step)
    for _ in range(50):
        key, sub = jax.random.split(key)
        state, obs, _reward, *_ = step(sub, state, action)
    moments = state.inner.moments
    assert float(jnp.abs(obs).max()) <= 10.0
    raw = jnp.asarray([[1.0, 0.0, -2.0]])
    expected = (raw - moments.mean) / jnp.sqrt(moments.var + 1e-8)
    np.testing.assert_allclose(env.observe(state, raw), expected, rtol=1e-5)
    # An evaluation copy starts from the training statistics, freezes them, and returns raw
    # rewards, so evaluation returns are in the task's own units.
    frozen = env.for_evaluation()
    assert env.training and not frozen.training and not frozen.inner.training
    eval_state, _ = frozen.reset_from(jax.random.PRNGKey(2), state)
    np.testing.assert_array_equal(eval_state.inner.moments.mean, moments.mean)
    eval_state, _, raw_reward, *_ = frozen.step(key, eval_state, action)
    np.testing.assert_array_equal(eval_state.inner.moments.mean, moments.mean)
    assert float(raw_reward.max()) <= 0.0 and float(raw_reward.min()) >= -16.3


def test_bare_state_reaches_through_every_wrapper():
    bare = make_env("Pendulum-v1")
    env = NormalizeReward(NormalizeObservation(copies(bare, 3)), gamma=0.99)
    state, _ = env.reset(jax.random.PRNGKey(0))
    expected, _ = jax.vmap(bare.reset)(jax.random.split(jax.random.PRNGKey(0), 3))
    found = bare_state(env, state)
    assert type(found) is type(expected)
    np.testing.assert_array_equal(found.theta, expected.theta)
    assert bare_state(bare, expected) is expected


_NEEDS_DOWNLOAD = {"MNISTBandit-bsuite"}


@pytest.mark.parametrize("name", sorted(set(gymnax.registered_envs) - _NEEDS_DOWNLOAD))
def test_every_gymnax_id_resets_and_steps(name):
    env = make_env(f"gymnax/{name}")

    @jax.jit
    def reset_and_step(key):
        state, obs = env.reset(key)
        action = env.action_space.sample(key)
        return obs, env.step(key, state, action)

    obs, (_, next_obs, reward, terminated, truncated, _) = reset_and_step(jax.random.PRNGKey(0))
    assert obs.shape == env.observation_space.shape == next_obs.shape
    assert obs.dtype == jnp.float32 and reward.shape == () and terminated.dtype == bool
    assert not (bool(terminated) and bool(truncated))


def test_an_id_that_needs_a_download_fails_clearly_offline(monkeypatch):
    import gymnax.utils.load_mnist as load_mnist

    def offline(*args, **kwargs):
        raise OSError("no network")

    # As on a machine without network access, whether or not MNIST was fetched before.
    monkeypatch.setattr(load_mnist, "_download", offline)
    with pytest.raises(RuntimeError, match="downloads its data when built"):
        make_env("MNISTBandit-bsuite")
