"""AVG: the TD-error scaler against a NumPy port of the reference's, the penultimate
normalisation and its zero vector, one update against Adam with beta 1 = 0 on gradients by
the chain rule, and learning Pendulum without a buffer. The probes are in
test_continuous_probes.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import AVG
from ajax.acting import actor_step
from ajax.agents.avg import TDErrorScaler
from ajax.nn.mlp import unit_norm

from .probes import ZeroObservationActionReward
from .states import initial_state


class _NumpyStats:
    """Welford's mean and population variance, 0 before any sample (the reference's
    RunningStats, incremental_rl/td_error_scaler.py)."""

    def __init__(self):
        self.n, self.m, self.s = 0, 0.0, 0.0

    def update(self, x):
        self.n += 1
        if self.n == 1:
            self.m, self.s = x, 0.0
        else:
            previous = self.m
            self.m += (x - self.m) / self.n
            self.s += (x - previous) * (x - self.m)

    @property
    def mean(self):
        return self.m if self.n else 0.0

    @property
    def variance(self):
        return self.s / self.n if self.n else 0.0


def _numpy_sigmas(rewards, terminated, gamma):
    """The reference's scaler as avg.py drives it: the return is pushed and reset only at
    termination; sigma after each step."""
    reward, discount, return_sq = _NumpyStats(), _NumpyStats(), _NumpyStats()
    running, sigmas = 0.0, []
    for r, done in zip(rewards, terminated, strict=True):
        running += r
        if done:
            return_sq.update(running**2)
            running = 0.0
        reward.update(r)
        discount.update(0.0 if done else gamma)
        variance = max(reward.variance + discount.variance * return_sq.mean, 1e-4)
        sigmas.append(1.0 if variance <= 0.01 and return_sq.n == 0 else np.sqrt(variance))
    return np.array(sigmas)


def test_sigma_matches_a_numpy_port_of_the_reference():
    rng = np.random.default_rng(0)
    # Small rewards first (sigma stays 1 until a return is seen), then larger ones with
    # terminations about every 40 steps.
    rewards = np.concatenate([0.01 * rng.normal(size=30), rng.normal(size=300) - 1.0])
    terminated = np.zeros(len(rewards), bool)
    terminated[30:] = rng.random(300) < 0.025

    def step(scaler, inputs):
        r, done = inputs
        scaler = scaler.update(r[None], done[None], 0.99)
        return scaler, scaler.sigma

    _, sigmas = jax.lax.scan(
        step, TDErrorScaler.zeros(1), (jnp.asarray(rewards, jnp.float32), jnp.asarray(terminated))
    )
    want = _numpy_sigmas(rewards, terminated, 0.99)
    assert want[0] == 1.0 and terminated.sum() > 3 and want[-1] > 1.0
    np.testing.assert_allclose(sigmas, want, rtol=1e-4)


def test_penultimate_features_have_unit_norm():
    agent = AVG(env_id="Pendulum-v1", hidden_sizes=(32, 32))
    state, _ = initial_state(agent, 1)
    obs = 10.0 * jax.random.normal(jax.random.key(1), (16, 3))
    inputs = {"actor": obs, "critic": jnp.concatenate([obs, jnp.ones((16, 1))], -1)}
    for name, network in (("actor", agent.actor), ("critic", agent.critic)):
        _, sown = network.apply(state.params[name], inputs[name], mutable=["intermediates"])
        (features,) = jax.tree.leaves(sown)
        assert features.shape == (16, 32)
        np.testing.assert_allclose(jnp.linalg.norm(features, axis=-1), 1.0, rtol=1e-5)


def test_unit_norm_of_a_zero_vector_is_zero_with_a_zero_gradient():
    x = jnp.array([[0.0, 0.0, 0.0], [3.0, 0.0, 4.0]])
    np.testing.assert_allclose(unit_norm(x), [[0.0, 0.0, 0.0], [0.6, 0.0, 0.8]], rtol=1e-6)
    gradient = jax.grad(lambda x: unit_norm(x)[:, 0].sum())(x)
    np.testing.assert_allclose(gradient[0], 0.0)
    # d(x0/|x|)/dx at (3, 0, 4): (1/|x| - x0^2/|x|^3, 0, -x0 x2/|x|^3).
    np.testing.assert_allclose(gradient[1], [0.128, 0.0, -0.096], rtol=1e-5)


@pytest.mark.parametrize("normalize_observations", [True, False])
def test_avg_learns_from_an_all_zero_observation(normalize_observations):
    # Its zero features once made the first update's actor loss NaN (diverged at step 2).
    agent = AVG(
        env_id=ZeroObservationActionReward(continuous=True),
        n_envs=2,
        hidden_sizes=(64, 64),
        normalize_observations=normalize_observations,
    )
    result = agent.train(seed=[0, 1], n_timesteps=8192)
    assert not np.any(result.diverged)
    obs = jnp.zeros((1, 1))
    action = jax.vmap(lambda p: agent.policy(p, obs).mode())(result.state.params)
    np.testing.assert_allclose(np.asarray(action)[..., 0], 0.5, atol=0.1)


def _hand_gradients(agent, env, state):
    """The actor's and the critic's gradients of one iteration from ``state``, by the chain
    rule on the paper's update (Vasan et al. 2024, Algorithm 1) rather than by differentiating
    a loss: the actor's ``alpha * d log pi(a|s) - dQ/da * da/dtheta`` and the critic's
    ``-2 delta dQ / sigma^2``, each term a product of its own, with the TD target computed
    apart. A wrong sign, term or action in avg.py's losses then shows."""
    c = agent.config
    _, act_key, step_key, next_key = jax.random.split(state.key, 4)
    params = state.params

    def behaviour(params, obs, carry, _):
        return agent.policy(params, obs).sample(act_key).reshape(-1, 1), carry, ()

    _, step, _ = actor_step(env, behaviour, params, state.cursor, step_key)
    n = step.obs.shape[0]

    def sample(actor_params):
        policy = agent.policy({"actor": actor_params}, step.obs)
        return policy.sample_and_log_prob(act_key)

    action, log_prob = sample(params["actor"])
    dq_da = jax.grad(lambda a: agent.q_values(params, step.obs, a).sum())(action)
    (through_q,) = jax.vjp(lambda p: sample(p)[0], params["actor"])[1](dq_da / n)
    (through_log_prob,) = jax.vjp(lambda p: sample(p)[1], params["actor"])[1](
        jnp.full(log_prob.shape, c.alpha / n)
    )
    actor = jax.tree.map(jnp.subtract, through_log_prob, through_q)

    sigma = state.scaler.update(step.reward - c.alpha * log_prob, step.terminated, c.gamma).sigma
    next_action, next_log_prob = agent.policy(params, step.next_obs).sample_and_log_prob(next_key)
    soft_next = agent.q_values(params, step.next_obs, next_action) - c.alpha * next_log_prob
    target = step.reward + c.gamma * (1.0 - step.terminated) * soft_next
    q, q_vjp = jax.vjp(
        lambda p: agent.q_values({"critic": p}, step.obs, step.action), params["critic"]
    )
    (critic,) = q_vjp(-2.0 * (target - q) / (sigma**2 * n))
    return {"actor": actor, "critic": critic}


def test_two_updates_are_adam_steps_with_no_momentum():
    agent = AVG(env_id="Pendulum-v1", hidden_sizes=(16, 16))
    first, env = initial_state(agent, 1, 2)
    iterate = jax.jit(lambda state: agent.iteration(state, env)[0])
    by_hand = jax.jit(lambda state: _hand_gradients(agent, env, state))
    second = iterate(first)
    third = iterate(second)
    g1, g2 = by_hand(first), by_hand(second)
    b2, eps = agent.config.adam_b2, 1e-8
    rates = {"actor": agent.config.actor_learning_rate, "critic": agent.config.critic_learning_rate}
    for name, lr in rates.items():

        def adam(p, a, b, lr=lr):
            # beta 1 = 0: the first moment is the latest gradient; the second is Adam's,
            # bias-corrected after two steps.
            v = b2 * (1 - b2) * a**2 + (1 - b2) * b**2
            return p - lr * b / (jnp.sqrt(v / (1 - b2**2)) + eps)

        want = jax.tree.map(adam, second.params[name], g1[name], g2[name])
        got = third.params[name]
        for w, x in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
            np.testing.assert_allclose(x, w, rtol=1e-4, atol=1e-6)
        # And the first step moved every parameter with a gradient by the step size.
        step = jax.tree.map(lambda a, b: a - b, second.params[name], first.params[name])
        moved = jnp.concatenate([jnp.abs(x).ravel() for x in jax.tree.leaves(step)])
        gradient = jnp.concatenate([jnp.abs(x).ravel() for x in jax.tree.leaves(g1[name])])
        np.testing.assert_allclose(moved[gradient > 1e-4], lr, rtol=1e-3)


@pytest.mark.slow
@pytest.mark.learning
def test_avg_learns_pendulum_with_its_task_discount(learning_run, bar):
    # gamma 0.9 is Pendulum's discount in RL Baselines3 Zoo (PPO) and in the README's PPO
    # example: with the reference's 0.99 neither AVG nor the reference leaves a random
    # policy's level within 50k steps (docs/agents/avg.md). Seeds 4-11 reach -245 and -253.
    agent = AVG(env_id="Pendulum-v1", gamma=0.9)
    _, mean_over_seeds = learning_run(agent, 100_000, 10_000)
    bar.at_least("final 4-seed mean", mean_over_seeds[-1], -400, mean_over_seeds)
