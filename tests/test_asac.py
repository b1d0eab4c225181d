"""ASAC: the average-reward target with its termination branch and reset cost, the reward
rate and the anchor on a continuing probe, and learning Pendulum."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import ASAC

from .probes import ContinuingReward, FallOrGoOn
from .states import initial_state

SMALL = dict(hidden_sizes=(32, 32), batch_size=32, buffer_size=512, learning_starts=64)


def test_target_against_a_hand_computation():
    agent = ASAC(env_id="Pendulum-v1", reward_rate_step=0.1, **SMALL)
    state, _ = initial_state(agent, 1, 10)
    learner = state.learner
    kept = {"reward_rate": jnp.float32(0.3), "reset_cost": jnp.float32(0.5)}
    learner = learner.replace(params=learner.params | kept)
    key = jax.random.key(1)
    obs = jax.random.normal(key, (4, 3))
    batch = {
        "obs": obs,
        "action": jnp.zeros((4, 1)),
        "reward": jnp.array([1.0, -2.0, 0.5, 3.0]),
        "next_obs": obs[::-1],
        "terminated": jnp.array([False, True, False, True]),
    }
    target, updated = agent._target(learner, batch, key)

    next_key, rate_key = jax.random.split(key)
    params, targets = learner.params, learner.target_params
    alpha = np.exp(float(params["log_alpha"]))
    # The bootstrap: a' from the policy, the target critics' minimum, the entropy bonus.
    a, log_prob = agent.policy(params, batch["next_obs"]).sample_and_log_prob(
        jax.random.split(next_key)[0]
    )
    q_next = np.asarray(agent._q(targets["critic"], batch["next_obs"], a))
    soft_next = q_next.min(axis=0) - alpha * np.asarray(log_prob)
    anchor = np.asarray(agent._q(targets["critic"], jnp.zeros((1, 3)), jnp.zeros((1, 1)))).mean()
    # The reset cost moves 10% of the way to 20 times the non-terminal rows' mean reward
    # (1.0 and 0.5) before the target uses it.
    cost = 0.9 * 0.5 + 0.1 * 20 * 0.75
    np.testing.assert_allclose(updated.params["reset_cost"], cost, rtol=1e-6)
    done = np.array([0.0, 1.0, 0.0, 1.0])
    want = np.asarray(batch["reward"]) - 0.3 + (1 - done) * soft_next - done * cost - anchor
    np.testing.assert_allclose(target, want, rtol=1e-5, atol=1e-5)
    # Terminated rows keep theta and the anchor, and take the reset cost for the bootstrap.
    np.testing.assert_allclose(
        np.asarray(target)[[1, 3]], np.array([-2.0, 3.0]) - 0.3 - cost - anchor, rtol=1e-5
    )
    # theta moves 10% of the way to the batch's mean of r - alpha log pi(fresh a | s).
    _, fresh = agent.policy(params, obs).sample_and_log_prob(rate_key)
    observed = np.mean(np.asarray(batch["reward"]) - alpha * np.asarray(fresh))
    np.testing.assert_allclose(updated.params["reward_rate"], 0.9 * 0.3 + 0.1 * observed, rtol=1e-5)


def test_the_reset_cost_teaches_the_policy_not_to_fall():
    """A fall pays the reward rate as going on does; the reset cost in its target is what
    makes the policy keep clear of it."""
    agent = ASAC(env_id=FallOrGoOn(), n_envs=2, **SMALL)
    params = agent.train(seed=[0, 1], n_timesteps=3_000).state.params
    obs = jnp.ones((4096, 1))
    for seed in range(2):
        p = jax.tree.map(lambda x, s=seed: x[s], params)
        actions = agent.policy(p, obs).sample(jax.random.key(seed))
        # Under 0.1% here; 11% to 47% on four seeds with termination_penalty=0.
        assert float(jnp.mean(actions > 0.0)) < 0.02, seed
        np.testing.assert_allclose(p["reset_cost"], 20.0, atol=1.0)  # 20 times the reward 1


def _continuing(n_timesteps=3_000, **settings):
    agent = ASAC(env_id=ContinuingReward(continuous=True), n_envs=2, **SMALL, **settings)
    return agent, agent.train(seed=[0, 1], n_timesteps=n_timesteps).state.params


@pytest.fixture(scope="module")
def anchored():
    return _continuing()


def test_reward_rate_is_the_reward_less_the_entropy_term(anchored):
    agent, params = anchored
    obs = jnp.ones((4096, 1))
    for seed in range(2):
        p = jax.tree.map(lambda x, s=seed: x[s], params)
        _, log_prob = agent.policy(p, obs).sample_and_log_prob(jax.random.key(seed))
        alpha = float(np.exp(p["log_alpha"]))
        want = 1.0 - alpha * float(log_prob.mean())
        np.testing.assert_allclose(agent.reward_rate(p), want, atol=0.05)


def _q_at_the_visited_state(agent, params):
    obs, action = jnp.ones((3, 1)), jnp.array([[-0.5], [0.0], [0.5]])
    return np.asarray(jax.vmap(lambda p: agent.q_values(p, obs, action))(params)).mean()


def test_differential_values_stay_bounded(anchored):
    assert abs(_q_at_the_visited_state(*anchored)) < 2.0


@pytest.mark.slow
def test_without_the_anchor_a_lagging_rate_accumulates_in_the_values():
    # With theta held near 0 (a tiny step), every target carries the excess r - theta ~ 1.1.
    # Nothing fixes the differential values' constant, so unanchored they climb by it update
    # after update (about 3.8, 7.8, 16 at 1.5k, 3k, 6k steps when measured); the anchor takes
    # it out once the reference input's value has risen to it (2.8, 4.1, 4.7).
    rises = {}
    for anchor in (True, False):
        q = [
            _q_at_the_visited_state(*_continuing(n, anchor=anchor, reward_rate_step=1e-6))
            for n in (3_000, 6_000)
        ]
        rises[anchor] = q[1] - q[0]
        if not anchor:
            assert q[1] > 1.8 * q[0], q
    assert rises[False] > 4 * rises[True], rises


@pytest.mark.slow
@pytest.mark.learning
def test_asac_learns_pendulum_within_20k_steps(learning_run, bar):
    # 64x64 networks, as SAC's learning test, to keep the suite short: the default 256x256
    # ones reached -165.1 too, in five times the time (docs/agents/asac.md).
    agent = ASAC(env_id="Pendulum-v1", learning_starts=1_000, hidden_sizes=(64, 64))
    _, mean_over_seeds = learning_run(agent, 20_000, 2_000)
    bar.at_least("final 4-seed mean", mean_over_seeds[-1], -400, mean_over_seeds)
