"""The warm-up before learning (``Agent.warmup``): warm-up iterations collect and store without
computing an update, and updates begin, as in SB3, with the first iteration that ends past
``learning_starts`` steps. Without the warm-up loop the updates were computed and dropped, and
began one iteration earlier."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from ajax import DQN, PPO, SAC, TD3, UDRL, LoggingConfig
from ajax.envs.core import SEED_AXIS
from ajax.run.lowering import lower_run
from ajax.run.plan import plan_run

from .states import SMALL, initial_state


def _train_logged(agent, n_timesteps, tmp_path):
    summaries = []
    result = agent.train(
        seed=[0, 1],
        n_timesteps=n_timesteps,
        num_episode_test=1,
        logging_config=LoggingConfig(log_frequency=32, log_dir=tmp_path),
        progress=lambda done, total, summary: summaries.append(summary),
    )
    return result, [s["train/critic_loss"] for s in summaries]


def test_sac_learns_from_the_first_iteration_past_learning_starts(tmp_path):
    agent = SAC(
        env_id="Pendulum-v1",
        learning_starts=48,
        hidden_sizes=(16, 16),
        batch_size=8,
        buffer_size=256,
    )
    assert agent.warmup_iterations == 48
    # Nothing is computed and then dropped any more, so the update count says whether an
    # update ran at all.
    warm, losses = _train_logged(agent, 48, tmp_path)
    np.testing.assert_array_equal(warm.state.learner.updates, [0, 0])
    np.testing.assert_array_equal(warm.state.buffer.size, [48, 48])
    # Segments that hold no learning iteration report no update metric.
    assert all(math.isnan(x) for x in losses)
    one_more, losses = _train_logged(agent, 49, tmp_path)
    np.testing.assert_array_equal(one_more.state.learner.updates, [1, 1])
    # The second segment (steps 32-48) is 16 warm-up iterations and one learning iteration;
    # its critic loss is that iteration's.
    assert math.isnan(losses[0]) and 0 < losses[1] < 1e3


@pytest.mark.slow
def test_dqn_and_udrl_warm_up_without_updates():
    dqn = DQN(
        env_id="CartPole-v1",
        n_envs=2,
        learning_starts=64,
        gradient_steps=3,
        train_frequency=4,
        hidden_sizes=(16,),
        batch_size=8,
        buffer_size=256,
    )
    assert dqn.warmup_iterations == 8
    for steps, updates in ((64, 0), (72, 3)):
        assert int(dqn.train(seed=0, n_timesteps=steps).state.updates[0]) == updates
    udrl = UDRL(env_id="CartPole-v1", n_envs=2, n_steps=8, learning_starts=40, n_updates=2)
    # The iterations that start before step 40 are random and untrained: 3 of 16 steps each.
    assert udrl.warmup_iterations == 3
    for steps, updates in ((48, 0), (64, 2)):
        state = udrl.train(seed=0, n_timesteps=steps).state
        assert int(optax.tree_utils.tree_get(state.opt_state, "count")[0]) == updates


@pytest.mark.parametrize("under_the_seed_vmap", [True, False])
def test_td3_moves_its_actor_and_targets_on_every_second_critic_update(under_the_seed_vmap):
    """TD3's delayed actor (``policy_delay=2``, one critic update per iteration): the actor and
    the target networks move on every second iteration only, the critics on every one, and
    the actor's loss is reported on every iteration, alone and under the run's vmap."""
    agent = TD3(env_id="Pendulum-v1", **SMALL["TD3"][1], learning_starts=0)
    state, env = initial_state(agent)
    iteration = lambda s: agent.iteration(s, env)  # noqa: E731
    if under_the_seed_vmap:
        state = jax.tree.map(lambda x: x[None], state)
        iteration = jax.vmap(iteration, axis_name=SEED_AXIS)
    iteration = jax.jit(iteration)

    def moved(before, after):
        pairs = zip(jax.tree.leaves(before), jax.tree.leaves(after), strict=True)
        return any(not np.array_equal(a, b) for a, b in pairs)

    moves = []
    for _ in range(4):
        new, metrics = iteration(state)
        assert np.isfinite(metrics["actor_loss"]).all()
        old, learner = state.learner, new.learner
        moves.append(
            (
                moved(old.params["actor"], learner.params["actor"]),
                moved(old.params["critic"], learner.params["critic"]),
                moved(old.target_params, learner.target_params),
            )
        )
        state = new
    # Critic updates 1-4: the actor and the targets follow updates 2 and 4.
    assert moves == [(False, True, False), (True, True, True)] * 2


class CountsSteps:
    """An agent whose acting carry counts the steps of each copy's episode so far."""

    def initial_carry(self, params, n):
        return jnp.zeros(n, jnp.int32)

    def after_step(self, params, carry, reward):
        return carry + 1


@pytest.mark.parametrize(
    "base, settings",
    [(DQN, {"learning_starts": 64}), (PPO, {"n_steps": 16, "n_minibatches": 2})],
    ids=["replay", "on-policy"],
)
def test_collection_carries_the_acting_state_and_resets_it_where_an_episode_ends(base, settings):
    agent = type(f"StepCounting{base.__name__}", (CountsSteps, base), {})
    result = agent(env_id="CartPole-v1", n_envs=2, **settings).train(seed=0, n_timesteps=512)
    carry, env_state = result.state.cursor.carry, result.state.cursor.env_state
    np.testing.assert_array_equal(carry, env_state.running_length)
    assert (carry < 256).all()  # each copy's 256 steps ended some episodes


def test_a_replay_agent_chooses_the_row_it_stores():
    class TenfoldRewards(DQN):
        def store(self, buffer, transition):
            return buffer.add_transitions(transition.replace(reward=10 * transition.reward))

    result = TenfoldRewards(env_id="CartPole-v1", n_envs=2, learning_starts=64).train(
        seed=0, n_timesteps=512
    )
    buffer = result.state.buffer
    stored = np.asarray(buffer.storage["reward"][0, : int(buffer.size[0])])
    assert stored.size == 512 and set(stored.tolist()) == {10.0}  # CartPole pays 1 a step


class _BurstDQN(DQN):
    """DQN with a burst of updates when its warm-up ends, as TD-MPC2 has (``seed_steps``
    updates once its random seeding is over)."""

    @property
    def pretrain_updates(self) -> int:
        return 5


def test_a_burst_of_updates_runs_once_where_learning_begins(tmp_path):
    agent = _BurstDQN(
        env_id="CartPole-v1",
        n_envs=1,
        learning_starts=48,
        train_frequency=1,
        gradient_steps=1,
        hidden_sizes=(16,),
        batch_size=8,
        buffer_size=256,
    )
    assert agent.warmup_iterations == 48
    logging = LoggingConfig(log_frequency=32, log_dir=tmp_path)
    # Segments of 32 iterations: learning begins inside the second, its first iteration makes
    # the burst's updates in place of its one, and the third and fourth segments do not
    # repeat it. Two seeds share the one loop count.
    for steps, updates in ((48, 0), (49, 5), (128, 5 + 79)):
        result = agent.train(seed=[0, 1], n_timesteps=steps, logging_config=logging)
        np.testing.assert_array_equal(result.state.updates, [updates, updates])


#: A capacity no other array of these programs has, so that its copies are found by shape.
_CAPACITY = 4_099


@pytest.mark.parametrize("agent_class", [SAC, TD3])
def test_a_step_copies_no_replay_buffer_with_one_copy_and_one_update(agent_class):
    """With one copy and one update an iteration (SAC's and TD3's defaults), XLA fused the
    step's write into the buffer with the update's sampling of it and copied the stored
    arrays twice an iteration (PERFORMANCE_REPORT.md, "The replay buffer, copied"). The
    compiled segment, with its evaluation, holds no copy of one."""
    agent = agent_class(
        env_id="Pendulum-v1",
        n_envs=1,
        learning_starts=8,
        hidden_sizes=(16, 16),
        batch_size=8,
        buffer_size=_CAPACITY,
    )
    plan = plan_run(agent, 64, LoggingConfig(log_frequency=32))
    segment = lower_run(agent, [0, 1], plan, num_episode_test=1, evaluate=True).segment
    text = segment.compile().as_text()
    assert re.search(rf"\[\d+,{_CAPACITY}[,\]]", text), "the premise: the buffer is in there"
    assert not re.findall(rf"= f32\[[\d,]*\b{_CAPACITY}\b[\d,]*\]\S* copy\(", text)
