"""SAC, TD3, REDQ and AVG on the probe environments with a continuous action: the critics
must come out as the probes dictate, and the policy must find the rewarded action."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import AVG, REDQ, SAC, TD3

from .probes import (
    ActionReward,
    ConstantReward,
    FarObservationReward,
    ObservationReward,
    TwoStep,
)

# Small networks, a larger step size and faster targets: the probes are tiny problems.
SMALL = dict(
    hidden_sizes=(64, 64),
    learning_rate=1e-3,
    batch_size=64,
    buffer_size=1024,
    learning_starts=128,
    tau=0.02,
)
# AVG (no buffer, no targets) keeps its own step sizes and normalisation.
AVG_PROBE = dict(hidden_sizes=(64, 64))
SETTINGS = {"SAC": SMALL, "TD3": SMALL, "REDQ": SMALL, "AVG": AVG_PROBE}
# The value probes fix a negligible temperature, so SAC's, REDQ's and AVG's soft values
# (which add the policy's entropy) equal the plain values the probes define.
FIXED_ALPHA = dict(autotune_alpha=False, initial_alpha=1e-4)
NO_ENTROPY = {"SAC": FIXED_ALPHA, "REDQ": FIXED_ALPHA, "AVG": dict(alpha=1e-4)}
AGENTS = {"SAC": SAC, "TD3": TD3, "REDQ": REDQ, "AVG": AVG}
# REDQ makes 20 updates of 10 critics per step, so it needs (and gets) fewer steps.
# AVG makes one update per iteration from that step alone, each weight moving by about its
# step size with no momentum to average the noise out. On the observation probe (4 seeds, read
# at a = 0.3 then, not yet at the policy's action) the worst critic read 0.85 for a value of 1
# at 4,096 steps, 0.92 at 8,192 and 0.97 at 16,384; at 1,024 steps one seed in four read
# 0.7-0.8 for the constant reward.
STEPS = {"SAC": 1024, "TD3": 1024, "REDQ": 384, "AVG": 8192}
# TD3's deterministic actor moves once per two critic updates: at 1,024 steps 2 of 16 seeds'
# actors were still at 0.8-0.9 on the action probe (as much before the replay schedule's
# warm-up change as after), at 2,048 all 16 lay within 0.05 of 0.5.
ACTION_STEPS = STEPS | {"TD3": 2048}
#: REDQ's probes take about 20 s each: outside the quick tier.
NAMES = [pytest.param(n, marks=pytest.mark.slow) if n == "REDQ" else n for n in sorted(AGENTS)]


def _train(name, env, gamma=0.99, value_probe=True):
    extra = NO_ENTROPY.get(name, {}) if value_probe else {}
    agent = AGENTS[name](env_id=env, n_envs=2, gamma=gamma, **SETTINGS[name], **extra)
    steps = (STEPS if value_probe else ACTION_STEPS)[name]
    return agent, agent.train(seed=[0, 1], n_timesteps=steps).state.params


def _q(agent, params, obs, action, policy_actions=False):
    """``Q(obs, action)`` of each seed's critics, ``[seeds, critics, len(obs)]`` (AVG's one
    critic gets the critic axis too); with ``policy_actions``, at each seed's policy's own
    (deterministic) action at ``obs`` instead of ``action``."""
    obs, action = jnp.asarray(obs, jnp.float32), jnp.asarray(action, jnp.float32)

    def one(p):
        taken = agent.policy(p, obs).mode() if policy_actions else action
        return agent.q_values(p, obs, taken)

    q = np.asarray(jax.vmap(one)(params))
    return q if q.ndim == 3 else q[:, None]


def _value_q(agent, params, obs, action):
    """The value probes' reading of the critics: at ``action`` for the replay agents, whose
    buffers keep the warm-up's uniformly random actions, so their critics are fitted at every
    action. AVG learns from the actions it takes and keeps none, so its critic is fitted only
    where its policy acts, and is read there. At a fixed action its policy never took, its
    critic says nothing about the observation: on an AVX-512 machine one seed's policy took
    -0.76 at obs 1 (the reward ignores the action and the temperature is negligible), and its
    critic read 1.00 there but 0.73 at 0.3 and 0.30 at 0.9."""
    return _q(agent, params, obs, action, policy_actions=isinstance(agent, AVG))


@pytest.mark.parametrize("name", NAMES)
def test_critics_learn_a_constant_reward(name):
    agent, params = _train(name, ConstantReward(continuous=True))
    np.testing.assert_allclose(
        _value_q(agent, params, [[1.0]] * 3, [[-0.8], [0.0], [0.8]]), 1, atol=0.1
    )


@pytest.mark.parametrize("name", NAMES)
def test_critics_read_the_observation(name):
    agent, params = _train(name, ObservationReward(continuous=True))
    q = _value_q(agent, params, [[1.0], [-1.0]], [[0.3], [0.3]])
    np.testing.assert_allclose(q[..., 0], 1.0, atol=0.1)
    np.testing.assert_allclose(q[..., 1], -1.0, atol=0.1)


@pytest.mark.parametrize("name", NAMES)
def test_critics_discount_over_two_steps(name):
    agent, params = _train(name, TwoStep(continuous=True), gamma=0.5)
    q = _value_q(agent, params, [[1.0], [-1.0]], [[0.0], [0.0]])
    np.testing.assert_allclose(q[..., 0], 0.5, atol=0.1)
    np.testing.assert_allclose(q[..., 1], 1.0, atol=0.1)


@pytest.mark.parametrize("name", NAMES)
def test_policy_finds_the_rewarded_action(name):
    agent, params = _train(name, ActionReward(continuous=True), value_probe=False)
    obs = jnp.ones((1, 1))
    action = jax.vmap(lambda p: agent.act(p, obs, (), jax.random.key(0), deterministic=True)[0])(
        params
    )
    np.testing.assert_allclose(np.asarray(action)[..., 0], 0.5, atol=0.1)
    q = _q(agent, params, [[1.0], [1.0]], [[0.5], [-0.5]])
    if name == "AVG":
        # AVG learns from the actions it takes and keeps none: once its policy has settled
        # near 0.5 its critic sees no action near -0.5 again, so it cannot know that value
        # (-3) as the replay agents, whose buffers keep the warm-up's random actions, do. Its
        # critic must still rank the rewarded action above it.
        assert np.all(q[..., 0] > q[..., 1]), q
        return
    np.testing.assert_allclose(q[..., 0], 1.0, atol=0.15)
    np.testing.assert_allclose(q[..., 1], -3.0, atol=0.3)


@pytest.mark.parametrize("name", ["SAC", "TD3"])
def test_normalised_observations_far_from_unit_scale_are_read(name):
    """Observations of 900 and 1100 (rewards -1 and +1): with ``normalize_observations`` the
    networks see them standardised, as ``result.observe`` shows, and the critics read them."""
    agent = AGENTS[name](
        env_id=FarObservationReward(continuous=True),
        n_envs=2,
        normalize_observations=True,
        **SMALL,
        **NO_ENTROPY.get(name, {}),
    )
    result = agent.train(seed=[0, 1], n_timesteps=STEPS[name])
    # Each seed's view of 1100 and 900: [seeds, 2, 1].
    seen = jnp.stack([result.observe(jnp.asarray([raw])) for raw in (1100.0, 900.0)], axis=1)
    np.testing.assert_allclose(seen[..., 0], [[1.0, -1.0]] * 2, atol=0.1)
    # Read at the policy's own action, where the buffer's rows are: the reward ignores the
    # action. Unnormalised, both read about 0 (-0.2 to 0.5 on 4 seeds); normalised, within
    # 0.08 of the rewards on 4 seeds.
    q = jax.vmap(lambda p, obs: agent.q_values(p, obs, agent.policy(p, obs).mode()))(
        result.state.params, seen
    )
    np.testing.assert_allclose(q[..., 0], 1.0, atol=0.15)
    np.testing.assert_allclose(q[..., 1], -1.0, atol=0.15)
