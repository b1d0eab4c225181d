"""APG: the policy gradient against finite differences, truncation at window edges, the
refusal of environments it cannot differentiate, and learning the tracking task."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import APG, evaluate
from ajax.acting import rollout
from ajax.envs.wrappers import RunningMoments
from ajax.result import TrainResult
from ajax.run.plan import seed_array
from ajax.run.program import init_program

from .states import initial_state

TASK = "ajax/PendulumTracking-v0"


def test_policy_gradient_of_a_two_step_rollout_matches_finite_differences():
    with jax.enable_x64(True):
        # Without observation normalisation: its statistics move with the parameters under a
        # finite difference but, by design, pass no gradient (tested below).
        agent = APG(env_id=TASK, n_envs=3, horizon=2, normalize_observations=False)
        state, env = initial_state(agent)
        params = jax.tree.map(lambda x: x.astype(jnp.float64), state.params)
        key = jax.random.key(1)

        def loss(p):
            return agent._window(p, env, state.cursor, key)[0]

        grad = jax.jit(jax.grad(loss))(params)
        assert jax.tree.leaves(grad)[0].dtype == jnp.float64
        value = jax.jit(loss)
        leaves, tree = jax.tree.flatten(params)
        for seed in range(3):
            keys = jax.random.split(jax.random.key(10 + seed), len(leaves))
            direction = [
                jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)
            ]
            expected = central_difference(value, leaves, direction, tree)
            directional = sum(
                jnp.vdot(g, d) for g, d in zip(jax.tree.leaves(grad), direction, strict=True)
            )
            assert abs(expected) > 1e-8
            np.testing.assert_allclose(directional, expected, rtol=1e-5)


def central_difference(f, leaves, direction, tree, eps=1e-6):
    """The derivative of ``f`` at the parameters ``leaves`` along ``direction``."""

    def at(step):
        return f(
            jax.tree.unflatten(tree, [x + step * d for x, d in zip(leaves, direction, strict=True)])
        )

    return (at(eps) - at(-eps)) / (2 * eps)


def test_a_reward_beyond_the_window_has_no_gradient():
    agent = APG(env_id=TASK, n_envs=2, horizon=4)
    state, env = initial_state(agent)
    other = initial_state(agent, seed=7)[0].params
    key1, key2 = jax.random.split(jax.random.key(3))

    def second_window_loss(first_params, cut):
        if cut:
            cursor = agent._window(first_params, env, state.cursor, key1)[1][0]
        else:
            policy_fn = agent._behaviour()
            cursor = rollout(env, policy_fn, first_params, state.cursor, key1, 4)[0]
        return agent._window(other, env, cursor, key2)[0]

    # Compiled: differentiated op by op, the two rollouts took seconds of dispatch.
    gradient = jax.jit(jax.grad(second_window_loss), static_argnums=1)
    cut = gradient(state.params, True)
    assert all(np.all(np.asarray(g) == 0) for g in jax.tree.leaves(cut))
    # Without the cut the first window's actions do reach the second window's rewards.
    uncut = gradient(state.params, False)
    assert any(np.any(np.asarray(g) != 0) for g in jax.tree.leaves(uncut))


def test_running_statistics_pass_no_gradient():
    batch = jax.random.normal(jax.random.key(0), (8, 3))
    grad = jax.grad(lambda b: sum(jnp.sum(x) for x in jax.tree.leaves(_moments(b))))(batch)
    np.testing.assert_array_equal(grad, 0.0)


def _moments(batch):
    moments = RunningMoments.zeros((3,)).update(batch)
    return moments.mean, moments.var


@pytest.mark.parametrize(
    ("env_id", "env_params"),
    [("Pendulum-v1", None), ("brax/fast", None), ("brax/fast", {"episode_length": 50})],
)
def test_apg_refuses_environments_it_cannot_differentiate(env_id, env_params):
    with pytest.raises(ValueError, match=r"is not differentiable.*differentiable_reset"):
        APG(env_id=env_id, env_params=env_params)


@pytest.mark.slow
def test_apg_runs_on_brax_with_differentiable_resets():
    # brax/fast's reward has no gradient with respect to the action, so this checks only
    # that the rollout differentiates end to end on Brax; it is no learning bar.
    agent = APG(env_id="brax/fast", env_params={"differentiable_reset": True}, n_envs=4)
    result = agent.train(seed=[0, 1], n_timesteps=4 * 32 * 3)
    assert np.isfinite(result.train_metrics["train/loss"]).all()


def _untrained_returns(agent, seeds, episodes):
    """Each seed's mean return with its initial parameters, evaluated as ajax.evaluate does."""
    state = init_program(agent, agent.env_copies(agent.n_envs), 1)(seed_array(seeds), {})
    untrained = TrainResult(agent=agent, state=state, seeds=seeds, n_timesteps=0, evaluations={})
    return evaluate(untrained, num_episodes=episodes)


@pytest.mark.slow
@pytest.mark.learning
def test_apg_halves_the_tracking_cost(learning_run, bar):
    agent = APG(env_id=TASK)
    result, mean_returns = learning_run(agent, 200_000, 50_000, num_episode_test=20)
    untrained_cost = -_untrained_returns(agent, result.seeds, 20).mean()
    # The bar: the final tracking cost is at most half the untrained policy's.
    bar.at_least(
        "untrained cost / 2 - final cost", untrained_cost / 2 + mean_returns[-1], 0.0, -mean_returns
    )
