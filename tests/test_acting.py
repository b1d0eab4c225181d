"""The acting contract: rollouts as functions of the parameters, the acting carry and its
resets, and the public surface every agent shares."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import AGENTS as AGENTS_BY_NAME
from ajax import APG, APO, DQN, PPO, PQN, REDQ, SAC, TD3
from ajax.acting import EnvCursor, rollout, uniform_action
from ajax.envs import Discrete
from ajax.envs.wrappers import copies
from ajax.nn import EpsilonGreedy
from ajax.run.program import RunState

from .probes import ActionReward, TwoStep
from .states import SMALL, initial_state


def _cursor(env, key, carry=()):
    env_state, obs = env.reset(key)
    return EnvCursor(env_state, obs, carry)


def test_rollout_resets_the_carry_where_an_episode_ends():
    env = copies(TwoStep(), 3)
    cursor = _cursor(env, jax.random.key(0), jnp.zeros(3, jnp.int32))

    def counting(params, obs, carry, key):
        # Act, and record the carry seen at each step: the step's index in its episode.
        return jnp.zeros(3, jnp.int32), carry + 1, carry

    cursor, steps, seen = rollout(
        env, counting, None, cursor, jax.random.key(1), 5, jnp.zeros(3, jnp.int32)
    )
    np.testing.assert_array_equal(seen[:, 0], [0, 1, 0, 1, 0])
    np.testing.assert_array_equal(np.asarray(steps.done)[:, 0], [0, 1, 0, 1, 0])
    np.testing.assert_array_equal(cursor.carry, [1, 1, 1])


def test_rollout_is_differentiable_in_the_parameters():
    # ActionReward pays 1 - 4 (a - 0.5)^2 on its one step, so the gradient of the summed
    # reward of n steps on c copies at a = 0.2 is n c 8 (0.5 - 0.2).
    env = copies(ActionReward(continuous=True), 2)
    cursor = _cursor(env, jax.random.key(0))

    def total_reward(action):
        def constant(params, obs, carry, key):
            return jnp.broadcast_to(params, (2, 1)), carry, ()

        _, steps, _ = rollout(env, constant, action, cursor, jax.random.key(1), 3)
        return steps.reward.sum()

    grad = jax.grad(total_reward)(jnp.float32(0.2))
    np.testing.assert_allclose(grad, 3 * 2 * 8 * 0.3, rtol=1e-5)


class _CountingPPO(PPO):
    """PPO whose acting carry counts the steps of the current episode."""

    def initial_carry(self, params, n):
        return jnp.zeros(n, jnp.int32)

    def act(self, params, obs, carry, key, deterministic):
        action, _ = super().act(params, obs, (), key, deterministic)
        return action, carry + 1


@pytest.fixture(scope="module")
def counting_result():
    agent = _CountingPPO(env_id=TwoStep(), n_envs=2, n_steps=8, n_minibatches=2)
    return agent.train(seed=[0, 1], n_timesteps=16)


def test_act_refuses_an_agent_with_a_carry(counting_result):
    with pytest.raises(ValueError, match="act_with_carry"):
        counting_result.act(np.ones(1, np.float32))


def test_act_with_carry_moves_the_carry_on_and_resets_it_at_episode_start(counting_result):
    obs = np.ones(1, np.float32)
    carry = counting_result.initial_carry()
    np.testing.assert_array_equal(carry, [[0], [0]])
    _, carry = counting_result.act_with_carry(obs, carry, episode_start=True)
    _, carry = counting_result.act_with_carry(obs, carry, episode_start=False)
    np.testing.assert_array_equal(carry, [[2], [2]])
    _, carry = counting_result.act_with_carry(obs, carry, episode_start=[True, False])
    np.testing.assert_array_equal(carry, [[1], [3]])


AGENTS = [
    (PPO, ActionReward(), {}),
    (PPO, ActionReward(continuous=True), {}),
    (DQN, ActionReward(), {}),
    (PQN, ActionReward(), {"n_envs": 4, "n_minibatches": 4}),
    (SAC, ActionReward(continuous=True), {}),
    (TD3, ActionReward(continuous=True), {}),
    (REDQ, ActionReward(continuous=True), {}),
    (APO, ActionReward(continuous=True), {}),
]


def test_apg_has_the_surface_of_an_agent_without_a_value():
    agent = APG(env_id="ajax/PendulumTracking-v0", n_envs=2)
    state, _ = initial_state(agent, 2)
    obs = jnp.ones((5, 7))
    dist = agent.policy(state.params, obs)
    action, carry = agent.act(state.params, obs, (), jax.random.key(2), deterministic=True)
    np.testing.assert_array_equal(action, dist.mode())
    assert action.shape == (5, 1) and np.all(np.abs(action) < 1) and carry == ()
    assert not hasattr(agent, "value") and not hasattr(agent, "q_values")


@pytest.mark.parametrize(
    "agent_class, env, options",
    AGENTS,
    ids=[f"{a.__name__}-{i}" for i, (a, *_) in enumerate(AGENTS)],
)
def test_one_public_surface_over_full_params(agent_class, env, options):
    agent = agent_class(env_id=env, **options)
    state, _ = initial_state(agent)
    obs = jnp.ones((5, 1))
    dist = agent.policy(state.params, obs)
    mode, sample = dist.mode(), dist.sample(jax.random.key(1))
    assert mode.shape == sample.shape and mode.shape[0] == 5
    action, carry = agent.act(state.params, obs, (), jax.random.key(2), deterministic=True)
    np.testing.assert_array_equal(action.reshape(mode.shape), mode)
    assert carry == ()
    assert agent.value(state.params, obs).shape == (5,)
    if isinstance(env.action_space, Discrete) and hasattr(agent, "q_values"):
        q = agent.q_values(state.params, obs)
        assert q.shape == (5, 2)
        np.testing.assert_array_equal(agent.value(state.params, obs), q.max(-1))
    elif hasattr(agent, "q_values"):
        q = agent.q_values(state.params, obs, mode)
        assert q.shape == (agent.config.n_critics, 5)
        np.testing.assert_allclose(agent.value(state.params, obs), q.mean(0), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_an_iteration_keeps_every_leaf_of_the_state_typed_as_it_was(name):
    """A jitted function called on the initial state and then on a later one compiles once:
    no leaf changes its shape, dtype or weak type (gymnax Pendulum's reset made ``last_u``
    weakly typed, its step did not, and every such call compiled twice). Traced only."""
    env_id, settings = SMALL[name]
    agent = AGENTS_BY_NAME[name](env_id=env_id, **settings)
    env = agent.env_copies(agent.n_envs)
    state = jax.eval_shape(lambda key: agent.init(key, env, 10), jax.random.key(0))
    after, _ = jax.eval_shape(lambda s: agent.iteration(s, env), state)
    paths, _ = jax.tree_util.tree_flatten_with_path(state)
    for (path, before), now in zip(paths, jax.tree.leaves(after), strict=True):
        assert (before.shape, before.dtype, before.weak_type) == (
            now.shape,
            now.dtype,
            now.weak_type,
        ), f"{jax.tree_util.keystr(path)} is {before} at first, {now} after"


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_agents_state_has_what_the_run_reads(name):
    env_id, settings = SMALL[name]
    agent = AGENTS_BY_NAME[name](env_id=env_id, n_envs=2, **settings)
    env = agent.env_copies(2)
    state = jax.eval_shape(lambda key: agent.init(key, env, 1), jax.random.key(0))
    assert isinstance(state, RunState) and isinstance(state.cursor, EnvCursor)


def test_the_uniform_warm_up_draws_what_epsilon_greedy_at_one_draws():
    space = Discrete(5)
    for seed in range(4):
        key = jax.random.key(seed)
        want = EpsilonGreedy(jnp.zeros((3, 7, 5)), 1.0).sample(key)
        np.testing.assert_array_equal(uniform_action(space, key, (3, 7)), want)
