"""A trained policy for a user's own loop (``TrainResult.policy_fn``): raw observations in,
environment actions out, compiled once, the same actions as ``act``; the observation units
of the agents' own accessors (``TrainResult.observe``)."""

import jax
import numpy as np
import pytest

import ajax


@pytest.fixture(scope="module")
def pendulum():
    """PPO with observation normalisation on a Box task: raw and network units differ, and
    actions are mapped onto the environment's bounds."""
    agent = ajax.PPO(env_id="Pendulum-v1", n_envs=2, n_steps=32, normalize_observations=True)
    return agent.train(seed=[0, 1, 2], n_timesteps=256)


OBS = np.asarray([0.6, -0.8, 3.0], np.float32)


def test_policy_fn_acts_as_act_on_raw_observations(pendulum):
    every_seed = pendulum.policy_fn()
    np.testing.assert_array_equal(every_seed(OBS), pendulum.act(OBS))
    per_seed = np.stack([OBS, -OBS, 2 * OBS])
    np.testing.assert_array_equal(every_seed(per_seed), pendulum.act(per_seed))
    for i in (0, 2):
        action = pendulum.policy_fn(seed_index=i)(OBS)
        assert action.shape == (1,)
        np.testing.assert_array_equal(action, pendulum.act(OBS)[i])


def test_the_accessors_take_observations_in_the_networks_units(pendulum):
    seen = pendulum.observe(OBS)
    # The learnt normalisation moves the observation: raw units are not the networks'.
    assert seen.shape == (3, 3) and not np.allclose(seen, OBS)
    mean = pendulum.state.cursor.env_state.moments.mean
    var = pendulum.state.cursor.env_state.moments.var
    np.testing.assert_allclose(seen, (OBS - mean) / np.sqrt(var + 1e-8), rtol=1e-5)
    params = jax.tree.map(lambda leaf: leaf[1], pendulum.state.params)
    mode = pendulum.agent.policy(params, seen[1][None]).mode()
    env = pendulum.agent.env_copies(1)
    np.testing.assert_allclose(
        env.action_to_env(mode)[0], pendulum.policy_fn(seed_index=1)(OBS), rtol=1e-6
    )


def test_policy_fn_is_compiled_once(pendulum, monkeypatch):
    traced = []
    act = pendulum.agent.act
    monkeypatch.setattr(pendulum.agent, "act", lambda *a, **k: traced.append(1) or act(*a, **k))
    policy = pendulum.policy_fn(seed_index=0)
    assert len(traced) == 1
    for _ in range(5):
        policy(OBS)
    policy.reset()
    policy(OBS)
    assert len(traced) == 1


def test_a_stochastic_policy_samples_anew_each_call(pendulum):
    policy = pendulum.policy_fn(seed_index=0, deterministic=False)
    actions = np.concatenate([policy(OBS) for _ in range(8)])
    # Samples beyond the bounds are clipped to them, so some may repeat at -2 or 2.
    assert len(np.unique(actions)) >= 4 and np.all(np.abs(actions) <= 2.0)
    again = pendulum.policy_fn(seed_index=0, deterministic=False)
    np.testing.assert_array_equal(np.concatenate([again(OBS) for _ in range(8)]), actions)


def test_bad_seed_index_and_observation_are_refused(pendulum):
    with pytest.raises(ValueError, match="seed_index 3 is out of range: the run has 3 seeds"):
        pendulum.policy_fn(seed_index=3)
    with pytest.raises(ValueError, match=r"obs must have shape \(3,\) or \(3, 3\), got \(4,\)"):
        pendulum.policy_fn()(np.zeros(4))
    with pytest.raises(ValueError, match=r"obs must have shape \(3,\), got \(3, 3\)"):
        pendulum.policy_fn(seed_index=0)(np.zeros((3, 3)))


def test_a_policy_with_a_carry_keeps_it_and_asks_for_the_reward():
    # UDRL's command (desired return, horizon) spends each reward: the policy must carry it
    # from call to call exactly as act_with_carry does when given the carry back.
    small = {"n_steps": 4, "n_updates": 2, "store_size": 8, "last_few": 4}
    result = ajax.UDRL(env_id="CartPole-v1", n_envs=2, **small).train(seed=[0, 1], n_timesteps=64)
    observations = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    rewards = [0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    policy = result.policy_fn()
    carry = result.initial_carry()
    for t, (obs, reward) in enumerate(zip(observations, rewards, strict=True)):
        want, carry = result.act_with_carry(obs, carry, t == 0, reward)
        np.testing.assert_array_equal(policy(obs, reward=reward), want)
    with pytest.raises(ValueError, match=r"UDRL's carry spends the reward .* reward=r"):
        policy(observations[0])
    policy.reset()
    np.testing.assert_array_equal(
        policy(observations[0]),
        result.act_with_carry(observations[0], result.initial_carry(), True)[0],
    )
