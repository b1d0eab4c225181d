"""TD-MPC2: its settings from the task, its planning step at every preset (traced only), the
plan carried and reset per copy, its memory estimate, observations standardised where asked,
and two probes on a small model, the second a grid that also shows a sweep reading every
batchable field inside its program."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ajax import TDMPC2
from ajax.agents.tdmpc2 import PRESETS
from ajax.run.plan import state_bytes

from .grids import assert_read_inside, moved_sweep
from .probes import ContinuingOrRewardIsAction, FarObservationReward, _Probe
from .states import initial_state

#: The tiny model and planner, a larger step size and fast targets: the probes are tiny
#: problems.
PROBE = dict(
    size="tiny",
    batch_size=32,
    learning_starts=64,
    learning_rate=1e-3,
    tau=0.1,
    gradient_steps=4,
    buffer_size=4096,
)


def test_the_discount_and_seeding_come_from_the_episode_length():
    agent = TDMPC2("Pendulum-v1")  # episodes of 200 steps
    assert agent.config.gamma == pytest.approx(0.975)
    assert agent.config.learning_starts == 1000
    assert agent.pretrain_updates == 1000
    stated = TDMPC2("Pendulum-v1", gamma=0.9, learning_starts=2000, gradient_steps=4)
    assert (stated.config.gamma, stated.config.learning_starts) == (0.9, 2000)
    assert stated.pretrain_updates == 500


def test_bad_settings_are_refused_with_the_fix(monkeypatch):
    with pytest.raises(ValueError, match=r"not a TD-MPC2 preset.*'1m'.*'317m', 'cpu', 'tiny'"):
        TDMPC2("Pendulum-v1", size="2m")
    with pytest.raises(ValueError, match="learning_starts to at least 9"):
        TDMPC2("Pendulum-v1", n_envs=4, learning_starts=8)
    TDMPC2("Pendulum-v1", n_envs=4, learning_starts=9)
    # A swept discount of 0 would be 0, not the episode length's: refused before compiling.
    monkeypatch.setattr("ajax.loop.lower_run", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises(ValueError, match=r"gamma=0 cannot be swept.*\(0\.975 here\)"):
        TDMPC2("Pendulum-v1").train(seed=0, n_timesteps=2_000, sweep={"gamma": [0.0, 0.9]})


@pytest.mark.parametrize("size", sorted(PRESETS))
def test_a_planning_step_has_the_right_shapes_at_every_preset(size):
    agent = TDMPC2("Pendulum-v1", n_envs=2, size=size, buffer_size=16)
    env = agent.env_copies(2)
    state = jax.eval_shape(lambda key: agent.init(key, env, 1), jax.random.PRNGKey(0))
    action, carry = jax.eval_shape(
        lambda s, key: agent.act(s.params, s.cursor.obs, s.cursor.carry, key, False),
        state,
        jax.random.PRNGKey(1),
    )
    assert action.shape == (2, 1)
    assert carry.shape == state.cursor.carry.shape == (2, agent.config.horizon, 1)
    assert jax.tree.leaves(state.target_q)[0].shape[0] == PRESETS[size].num_q
    latent = state.params["dynamics"]["params"]["Dense_2"]["kernel"].shape[-1]
    assert latent == PRESETS[size].latent_dim


def test_the_memory_estimate_holds_the_sequence_store_networks_and_optimisers():
    agent = TDMPC2("Pendulum-v1", buffer_size=10_000)
    env = agent.env_copies(1)
    state = jax.eval_shape(lambda key: agent.init(key, env, 1), jax.random.PRNGKey(0))
    total, buffers = state_bytes(state)
    nbytes = lambda tree: sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree))  # noqa: E731
    # Each row: obs (3), action, reward, terminated, truncated (runs stop at episode ends)
    # and the true next obs (3), as float32.
    assert nbytes(state.buffer.storage) == 10_000 * 4 * (3 + 1 + 1 + 1 + 1 + 3) <= buffers
    networks = nbytes(state.params) + nbytes(state.target_q) + nbytes(state.opt_state)
    # Adam keeps two moments per parameter, and the Q targets a copy of the Q-functions.
    assert nbytes(state.opt_state) >= 2 * nbytes(state.params)
    assert total >= buffers + networks


def test_the_model_optimiser_is_the_references_two_clipped_adams():
    """One vector's Adam, then the step sizes: the reference's Adam for the encoder at
    ``encoder_lr_scale`` times the rate and one for the rest, after one global-norm clip."""
    settings = {"learning_rate": 3e-3, "encoder_lr_scale": 0.3, "grad_clip_norm": 2.0}
    ours = TDMPC2("Pendulum-v1", **settings)._model_optimizer
    keys = iter(jax.random.split(jax.random.key(0), 16))
    params = {
        "encoder": {"w": jax.random.normal(next(keys), (5, 3))},
        "q": {"w": jax.random.normal(next(keys), (4,)), "b": jnp.ones(2)},
    }
    labels = {"encoder": {"w": "encoder"}, "q": {"w": "rest", "b": "rest"}}
    reference = optax.chain(
        optax.clip_by_global_norm(2.0),
        optax.multi_transform(
            {"encoder": optax.adam(3e-3 * 0.3), "rest": optax.adam(3e-3)}, labels
        ),
    )
    state, ours_state = reference.init(params), ours.init(params)
    # One program each: op by op, every operation of the updates compiles on its own.
    reference_update, our_update = (jax.jit(o.update) for o in (reference, ours))
    for _ in range(3):
        grads = jax.tree.map(lambda x: 10 * jax.random.normal(next(keys), x.shape), params)
        want, state = reference_update(grads, state, params)
        got, ours_state = our_update(grads, ours_state, params)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5), got, want)


class _RandomEnds(_Probe):
    """Episodes that end at random (probability one half per step): copies fall out of step."""

    def __init__(self):
        super().__init__(continuous=True)

    def _transition(self, obs, t, action):
        return 0.0, jnp.asarray(False), obs

    def step(self, key, state, action):
        state, obs, reward, _, truncated, info = super().step(key, state, action)
        return state, obs, reward, jax.random.bernoulli(key), truncated, info


def test_the_plan_is_carried_and_reset_per_copy_and_the_bursts_step_is_random():
    agent = TDMPC2(_RandomEnds(), n_envs=8, **PROBE)
    state, env = initial_state(agent)
    start = agent.config.learning_starts
    # A plan carried from the step before, non-zero everywhere.
    state = state.replace(
        cursor=state.cursor.replace(carry=jnp.full_like(state.cursor.carry, 0.5)),
        steps=jnp.full_like(state.steps, start),
    )
    collect = jax.jit(lambda s: agent._collect(s, env, agent._explorer_at))
    after, transitions = collect(state)
    done = np.asarray(transitions.done[0])
    carry = np.asarray(after.cursor.carry)
    assert 0 < done.sum() < 8
    np.testing.assert_array_equal(carry[done], 0.0)
    # Elsewhere the plan moved one step on: the last step is the fresh zero.
    assert np.all(np.abs(carry[~done][:, :-1]).sum(axis=(1, 2)) > 0)
    np.testing.assert_array_equal(carry[~done][:, -1], 0.0)
    # The iteration at learning_starts, whose updates are the burst, steps at random as the
    # reference's step at seed_steps: other parameters, the same actions. The next plans.
    other = state.replace(params=jax.tree.map(lambda x: x + 1.0, state.params))
    for steps, random in ((start, True), (start + 8, False)):
        at = lambda s, n=steps: s.replace(steps=jnp.full_like(s.steps, n))  # noqa: E731
        actions = [np.asarray(collect(at(s))[1].action) for s in (state, other)]
        assert np.array_equal(*actions) == random, steps


def test_an_end_the_termination_head_foresees_cuts_a_sequences_value():
    """With ``episodic`` a sequence's rewards after the first latent the termination head
    calls an end count nothing, nor does the Q-value at its end (the reference's
    ``_estimate_value``); a head that calls none leaves the value as without it."""
    ended = TDMPC2("Pendulum-v1", n_envs=2, size="tiny", episodic=True, buffer_size=16)
    plain = TDMPC2("Pendulum-v1", n_envs=2, size="tiny", buffer_size=16)
    actions = jax.random.uniform(jax.random.key(1), (5, 3, 1), minval=-1.0, maxval=1.0)

    # Random weights everywhere (the reward and Q heads start at zero), drawn on the host.
    shapes = jax.eval_shape(ended._init_params, jax.random.key(0), jnp.zeros((1, 3)))
    rng = np.random.default_rng(0)
    params = jax.tree.map(lambda x: rng.normal(0.0, 0.3, x.shape).astype(x.dtype), shapes)

    @jax.jit
    def values(params, key):
        z = ended._encode(params, jnp.ones((1, 3)))[0]

        def value_with_head_at(logit):  # a termination head whose logit is ``logit`` everywhere
            out = lambda x: jnp.full_like(x, logit) if x.shape == (1,) else x  # noqa: E731
            zero = lambda x: jnp.zeros_like(x) if x.shape[-1:] == (1,) else x  # noqa: E731
            head = jax.tree.map(lambda x: out(zero(x)), params["termination"])
            return ended._trajectory_value(params | {"termination": head}, z, actions, key)

        latents = jnp.broadcast_to(z, (5, *z.shape))
        first = ended.bins.decode(ended._reward_logits(params, latents, actions[:, 0]))
        # Both heads in one trace of the planner's value.
        cut, kept = jax.vmap(value_with_head_at)(jnp.array([20.0, -20.0]))
        return cut, first, kept, plain._trajectory_value(params, z, actions, key)

    cut, first, kept, without = values(params, jax.random.key(0))
    assert np.all(np.abs(np.asarray(first)) > 1e-3)
    np.testing.assert_allclose(cut, first, rtol=1e-5)
    np.testing.assert_allclose(kept, without, rtol=1e-5)
    assert np.all(np.abs(np.asarray(kept) - np.asarray(cut)) > 1e-3)


def test_normalised_observations_far_from_unit_scale_are_read():
    """Observations of 900 and 1100 (rewards -1 and +1, one step each), as target-gym's
    altitudes in metres: with ``normalize_observations`` the model sees them standardised, as
    ``result.observe`` shows, and its Q-functions read their rewards. Without it they read
    900 and 1100 alike: the LayerNorm after the encoder's first layer divides out the scale
    of one input far from 0 (docs/agents/tdmpc2.md)."""
    agent = TDMPC2(
        FarObservationReward(continuous=True), n_envs=2, normalize_observations=True, **PROBE
    )
    result = agent.train(seed=[0, 1], n_timesteps=512)
    seen = jnp.stack([result.observe(jnp.asarray([raw])) for raw in (1100.0, 900.0)], axis=1)
    np.testing.assert_allclose(seen[..., 0], [[1.0, -1.0]] * 2, atol=0.1)
    value = jax.jit(jax.vmap(agent.value))(result.state.params, seen)
    np.testing.assert_allclose(value, [[1.0, -1.0]] * 2, atol=0.15)


@pytest.fixture(scope="module")
def probe_grid():
    """The probes' run, as the first configuration of a grid whose second moves every
    batchable field (tests/grids.py): one program serves both probes and the sweep's check.
    Steps from +1 end their episode, so the agent is ``episodic``, as the reference asks."""
    agent = TDMPC2(ContinuingOrRewardIsAction(), n_envs=2, episodic=True, gamma=0.75, **PROBE)
    train = dict(seed=[0, 1], n_timesteps=512)
    return agent, agent.train(sweep=moved_sweep(agent), **train), train


@pytest.fixture(scope="module")
def readings(probe_grid):
    """What the probes read of the grid's first configuration, both seeds in one program (op
    by op, every operation of the planner would compile on its own): at -1 the Q-values of
    action 0.3; at +1 the planned action and the prior's; and the termination head's
    probabilities after actions -1, 0 and 1 from each observation."""
    agent, params = probe_grid[1].result(0).agent, probe_grid[1].result(0).state.params
    actions = jnp.array([[-1.0], [0.0], [1.0]])

    def read(params, key):
        def end_probability(obs):
            z = agent._encode(params, jnp.full((3, 1), obs))
            return jax.nn.sigmoid(
                agent._termination_logits(params, agent._next(params, z, actions))
            )

        at_one = jnp.ones((1, 1))
        planned = agent.act(params, at_one, agent.initial_carry(params, 1), key, True)[0]
        return {
            "q": agent.q_values(params, -at_one, jnp.array([[0.3]])),
            "planned": planned[0, 0],
            "prior": agent.policy(params, at_one).mode()[0, 0],
            "ended": end_probability(1.0),
            "went_on": end_probability(-1.0),
        }

    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    return jax.tree.map(np.asarray, jax.jit(jax.vmap(read))(params, keys))


def test_q_learns_a_constant_reward_within_ten_percent(readings):
    """At -1 the reward is 1 on every step and the episodes are cut at 4 steps: Q is
    1 / (1 - gamma) only where the cuts bootstrap."""
    np.testing.assert_allclose(readings["q"], 1 / (1 - 0.75), rtol=0.1)


def test_the_planned_action_finds_the_largest_reward(readings):
    assert np.all(readings["planned"] > 0.9), readings["planned"]
    assert np.all(readings["prior"] > 0.9), readings["prior"]


def test_the_termination_head_foresees_the_ends_and_only_them(readings):
    assert np.all(readings["ended"] > 0.9), readings["ended"]
    assert np.all(readings["went_on"] < 0.1), readings["went_on"]


@pytest.mark.slow
def test_every_batchable_field_is_read_inside_the_program(probe_grid, monkeypatch):
    agent, grid, train = probe_grid
    assert_read_inside(agent, grid, monkeypatch, **train)
