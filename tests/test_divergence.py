"""A seed whose parameters or losses become NaN or infinite is frozen, reported, and leaves
the other seeds of its batch alone."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax import DQN, LoggingConfig
from ajax.run.health import frozen, initial_health, watched_metrics

#: DQN on CartPole with a learning rate at the edge of overflow: on this JAX, seed 3's
#: Q-values overflow within the first updates and seed 0's never do (of seeds 0-7 at
#: 1.5e10, 0 and 6 survive; at 2e10 every seed overflows at its first update, at 1e10 none
#: does). At the edge the step depends on the last bits of the arithmetic, which the
#: program's other parts (the evaluation) can change, so the test does not pin it.
LEARNING_RATE = 1.5e10


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    config = LoggingConfig(log_frequency=256, log_dir=tmp_path_factory.mktemp("runs"))
    agent = DQN(env_id="CartPole-v1", learning_rate=LEARNING_RATE)
    return agent.train(seed=[0, 3], n_timesteps=3072, num_episode_test=2, logging_config=config)


def test_a_diverging_seed_is_frozen_and_reported(run):
    assert [d["seed"] for d in run.diverged] == [3], (
        f"the premise: at learning_rate={LEARNING_RATE} seed 3 diverges and seed 0 does not; "
        f"got {run.diverged}. If JAX's numerics moved, pick another rate at the edge."
    )
    (report,) = run.diverged
    # Updates start at the iteration ending at step 1,024; DQN's iteration is 256 steps.
    assert report["timestep"] >= 1024 and report["timestep"] % 256 == 0
    assert report["metric"] in {"td_loss", "q_value", "params"}
    timesteps = run.evaluations["timestep"]
    returns = run.evaluations["episode_return"]
    after = timesteps >= report["timestep"]
    assert after.any() and (~after).any()
    # Its evaluations are NaN from the segment it diverged in, finite before.
    assert np.isnan(returns[1, after]).all() and np.isfinite(returns[1, ~after]).all()
    # Its parameters are finite: those of its last evaluation; updates became no-ops.
    for leaf in jax.tree.leaves(run.state.params):
        assert np.isfinite(np.asarray(leaf)[1]).all()
    # Its training metrics are NaN from then on; the other seed's stay finite throughout.
    loss = run.train_metrics["train/td_loss"]
    seen = run.train_metrics["timestep"] >= report["timestep"] + 256
    assert np.isnan(loss[1, seen]).all()
    assert np.isfinite(returns[0]).all() and np.isfinite(loss[0, timesteps > 1024]).all()


def test_a_run_without_divergence_reports_none(small_result):
    assert small_result.diverged == []


def test_the_command_line_names_the_diverged_seed(run, tmp_path, capsys):
    from ajax.cli import _print_summary

    _print_summary(run, tmp_path)
    out = " ".join(capsys.readouterr().out.split())
    step = run.diverged[0]["timestep"]
    assert f"seed 3 diverged at step {step:,}" in out and "seed 0 diverged" not in out


class _State(NamedTuple):
    """The least of an agent's state that ``frozen`` reads."""

    params: dict


class _Agent:
    def with_params(self, state, params):
        return _State(params)


@pytest.mark.parametrize("bad", [None, np.nan, np.inf, -np.inf])
def test_parameters_gone_non_finite_in_any_leaf_freeze_the_seed_at_the_segments_start(bad):
    start = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(3, jnp.bfloat16), "step": jnp.int32(0)}
    new = {"w": jnp.ones((2, 3)), "b": jnp.ones(3, jnp.bfloat16), "step": jnp.int32(5)}
    if bad is not None:
        # The last element of the last float leaf, so a check that stops short misses it.
        new["w"] = new["w"].at[-1, -1].set(bad)
    names = watched_metrics({"loss": None})
    state, health = jax.jit(
        lambda new, start, health: frozen(_Agent(), _State(new), start, health, names, 9)
    )(new, start, {k: v[0] for k, v in initial_health(1).items()})
    assert bool(health["diverged"]) == (bad is not None)
    assert int(health["iteration"]) == (9 if bad is not None else -1)
    assert int(health["metric"]) == (names.index("params") if bad is not None else -1)
    kept = start if bad is not None else new
    for key in kept:
        np.testing.assert_array_equal(np.asarray(state.params[key]), np.asarray(kept[key]))
