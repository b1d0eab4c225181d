"""Brax, MuJoCo Playground and target-gym by id: each adapter stepped next to its library's
own API, the time limit reported as truncation, and resets computed only where needed."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from ajax import make_env
from ajax.envs import env_ids
from ajax.envs.physics import BraxEnv, SimulatorEnv
from ajax.envs.wrappers import AutoReset, VectorEnv


def _rollout_next_to_upstream(env, upstream_reset, upstream_step, n_steps, key):
    """Our adapter and the library's own API, reset with the same key and stepped with the
    same actions in one program; returns both first observations and both sequences of
    (obs, reward, done), with our truncation flags."""
    action_key, reset_key = jax.random.split(key)
    actions = jax.random.uniform(
        action_key, (n_steps, *env.action_space.shape), minval=-1.0, maxval=1.0
    )

    @jax.jit
    def both(actions):
        state, obs = env.reset(reset_key)
        up_state = upstream_reset(reset_key)

        def step(carry, action):
            state, up_state = carry
            state, obs, reward, terminated, truncated, _ = env.step(reset_key, state, action)
            up_state, up_obs, up_reward, up_done = upstream_step(up_state, action)
            return (state, up_state), (
                obs,
                reward,
                terminated,
                truncated,
                up_obs,
                up_reward,
                up_done,
            )

        return (obs, up_state.obs), jax.lax.scan(step, (state, up_state), actions)[1]

    return both(actions)


def _brax_like(upstream):
    def step(state, action):
        state = upstream.step(state, action)
        return state, state.obs, state.reward, state.done

    return upstream.reset, step


def test_brax_adapter_matches_brax():
    # `fast` compiles in seconds; Playground's test below runs a real MJX pipeline through
    # the same adapter class, and the stub test after it covers termination.
    from brax import envs

    env = make_env("brax/fast", episode_length=40)
    upstream = envs.get_environment("fast")
    _, (obs, reward, terminated, truncated, up_obs, up_reward, up_done) = _rollout_next_to_upstream(
        env, *_brax_like(upstream), 40, jax.random.key(0)
    )
    np.testing.assert_allclose(obs, up_obs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(reward, up_reward, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(terminated, np.asarray(up_done) > 0)
    # The time limit is truncation and falls on the last step.
    np.testing.assert_array_equal(truncated, np.arange(1, 41) == 40)


def test_simulator_termination_stays_apart_from_the_time_limit():
    # A simulator whose episode terminates at its third step, with a time limit of 3 or 5.
    def run(episode_length):
        env = SimulatorEnv(_EndsAtThree(), "stub", episode_length, np.float32(-1), np.float32(1))
        state, _ = env.reset(jax.random.key(0))
        flags = []
        for _ in range(min(episode_length, 3)):
            state, _, _, terminated, truncated, _ = env.step(None, state, jnp.zeros(1))
            flags.append((bool(terminated), bool(truncated)))
        return flags

    assert run(5) == [(False, False), (False, False), (True, False)]
    assert run(3) == [(False, False), (False, False), (True, False)]  # terminated wins
    assert run(2) == [(False, False), (False, True)]


def test_playground_adapter_matches_playground_with_pure_jax_mjx():
    from mujoco_playground import registry

    env = make_env("playground/CartpoleBalance", episode_length=25)
    upstream = registry.load("CartpoleBalance", config_overrides={"impl": "jax"})
    assert env.env._config.impl == "jax"
    (first_obs, up_first_obs), (obs, reward, terminated, truncated, up_obs, up_reward, up_done) = (
        _rollout_next_to_upstream(env, *_brax_like(upstream), 25, jax.random.key(1))
    )
    np.testing.assert_allclose(obs, up_obs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(reward, up_reward, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(terminated, np.asarray(up_done) > 0)
    np.testing.assert_array_equal(truncated, np.arange(1, 26) == 25)
    np.testing.assert_allclose(first_obs, up_first_obs, rtol=1e-5)


def test_target_gym_adapter_matches_target_gym():
    from target_gym.registry import REGISTRY

    env = make_env("target_gym/Plane", max_steps_in_episode=30)
    spec = REGISTRY["plane"]
    upstream, params = spec.make_env(), spec.params_cls(max_steps_in_episode=30)

    # The adapter hands target-gym's step_env the key it is given: feed both the same.
    reset_key = jax.random.key(2)
    state, obs = env.reset(reset_key)
    up_obs, up_state = upstream.reset_env(reset_key, params)
    np.testing.assert_allclose(obs, up_obs, rtol=1e-6)
    step, up = jax.jit(env.step), jax.jit(upstream.step_env)
    actions = jax.random.uniform(jax.random.key(3), (30, 2), minval=-1.0, maxval=1.0)
    for t, action in enumerate(actions):
        key = jax.random.fold_in(reset_key, t)
        state, obs, reward, terminated, truncated, _ = step(key, state, action)
        up_obs, up_state, up_reward, up_terminated, _ = up(key, up_state, action, params)
        np.testing.assert_allclose(obs, up_obs, rtol=1e-5, atol=1e-5, err_msg=f"step {t}")
        np.testing.assert_allclose(reward, up_reward, rtol=1e-5, atol=1e-6)
        assert bool(terminated) == bool(up_terminated)
        if terminated:
            break
        assert bool(truncated) == (t == 29)


def _count_resets(env, n_steps):
    """Steps ``n_steps`` times through AutoReset (no batch transform, so its cond stays a
    cond) and counts how often the environment's reset was computed."""
    calls = []

    class Counted(type(env)):
        def reset(self, key):
            jax.debug.callback(lambda: calls.append(1))
            return super().reset(key)

    counted = object.__new__(Counted)
    counted.__dict__.update(env.__dict__)
    batch = AutoReset(VectorEnv(counted, 2))
    state, _ = batch.reset(jax.random.key(0))
    calls.clear()

    @jax.jit
    def run(state):
        def step(state, _):
            state, _, _, terminated, truncated, _ = batch.step(
                jax.random.key(1), state, jnp.ones((2, 1))
            )
            return state, terminated | truncated

        return jax.lax.scan(step, state, length=n_steps)

    _, done = run(state)
    jax.effects_barrier()
    return len(calls), int(np.asarray(done).any(axis=1).sum())


def test_brax_resets_only_on_steps_where_an_episode_ended():
    resets, steps_with_an_end = _count_resets(BraxEnv("fast", episode_length=4), 12)
    assert steps_with_an_end == 3
    assert resets == 3


def test_differentiable_reset_computes_a_reset_every_step():
    env = BraxEnv("fast", episode_length=4, differentiable_reset=True)
    resets, steps_with_an_end = _count_resets(env, 12)
    assert steps_with_an_end == 3
    assert resets == 12


class _EndsAtThree:
    """A simulator in Brax's and Playground's protocol whose episode terminates (``done``)
    at its third step."""

    observation_size = 1
    action_size = 1

    def reset(self, key):
        return _StubState(obs=jnp.zeros(1), reward=0.0, done=0.0)

    def step(self, state, action):
        count = state.obs + 1
        return _StubState(obs=count, reward=1.0, done=(count[0] >= 3).astype(jnp.float32))


class _RandomStart:
    """A simulator in Brax's and Playground's protocol whose reset draws a random start and
    whose step adds the action: enough to tell a cached initial state from a fresh one."""

    observation_size = 1
    action_size = 1

    def reset(self, key):
        return _StubState(obs=jax.random.uniform(key, (1,)), reward=0.0, done=0.0)

    def step(self, state, action):
        return _StubState(obs=state.obs + action, reward=1.0, done=0.0)


@struct.dataclass
class _StubState:
    obs: jax.Array
    reward: float
    done: float


def test_cached_initial_state_is_reused_and_fresh_resets_differ():
    def episode_starts(fresh_reset):
        env = SimulatorEnv(
            _RandomStart(), "stub", 2, np.float32(-1), np.float32(1), fresh_reset=fresh_reset
        )
        batch = AutoReset(VectorEnv(env, 2))
        key = jax.random.key(4)
        state, first = batch.reset(key)
        for t in range(4):
            state, obs, *_ = batch.step(jax.random.fold_in(key, t), state, jnp.ones((2, 1)))
        return first, obs

    first, third_episode = episode_starts(fresh_reset=False)
    np.testing.assert_array_equal(first, third_episode)
    first, third_episode = episode_starts(fresh_reset=True)
    assert not np.allclose(first, third_episode)


def test_playground_takes_the_cached_reset_option():
    env = make_env("playground/CartpoleBalance", fresh_reset=False, episode_length=50)
    assert not env.fresh_reset and env.max_episode_steps == 50


def test_ids_list_offline_envs_and_explain_the_rest():
    ids = env_ids()
    assert {"brax/ant", "brax/fast", "playground/CartpoleBalance", "playground/CheetahRun"} <= set(
        ids
    )
    assert {"target_gym/Plane", "target_gym/Plane3DCircle", "target_gym/cstr"} <= set(ids)
    assert not any(i.startswith("playground/Go1") for i in ids)
    with pytest.raises(ValueError, match="Menagerie"):
        make_env("playground/Go1JoystickFlatTerrain")


def test_bad_options_fail_before_any_compile():
    with pytest.raises(ValueError, match="no config entries"):
        make_env("playground/CartpoleBalance", episode_lenght=10)
    with pytest.raises(ValueError, match="did you mean 'max_steps_in_episode'"):
        make_env("target_gym/Plane", max_steps=10)
    with pytest.raises(ValueError, match="episode_length"):
        make_env("brax/fast", episode_length=0)
    # Every family reads its numbers alike: no text for a number, no fraction for a count.
    for env_id, name, value, message in [
        ("brax/fast", "episode_length", 50.5, "whole number like its default, 1000"),
        ("playground/CartpoleBalance", "episode_length", 50.5, "whole number like its default"),
        ("playground/CartpoleBalance", "ctrl_dt", "abc", "number like its default, 0.01, not the"),
        ("target_gym/Plane", "max_steps_in_episode", 0.5, "whole number like its default"),
        ("ajax/PendulumTracking-v0", "max_episode_steps", 50.5, "whole number like its default"),
        ("ajax/PendulumTracking-v0", "speed_knee", "abc", "number like its default, 6.0, not"),
    ]:
        with pytest.raises(ValueError, match=rf"{env_id}'s {name} takes a {message}"):
            make_env(env_id, **{name: value})
    # A whole float is the count it stands for (YAML reads 1e3 as a float).
    assert make_env("brax/fast", episode_length=1e3).max_episode_steps == 1000
    assert make_env("ajax/PendulumTracking-v0", max_episode_steps=1e2).max_episode_steps == 100
