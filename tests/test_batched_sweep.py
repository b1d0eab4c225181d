"""``train(..., sweep=...)``: a grid of batchable hyperparameters is one init and one segment
program; a configuration's run is the same, bit for bit, in any grid of that shape, and
agrees with its own run; refusals come before anything compiles; a second grid of the same
shape is served by the program cache; every agent's batchable fields are traced (the world
models' on their probes, in their own files)."""

import dataclasses
import json
from pathlib import Path

import jax
import numpy as np
import pytest

import ajax
from ajax import AGENTS, PPO, LoggingConfig
from ajax.agents.base import batchable_fields
from ajax.cli import main
from ajax.plotting import differing_settings, runs_in
from ajax.run.host import divergences, place_labels
from ajax.run.plan import RunPlan, seed_array
from ajax.run.program import init_program
from ajax.sweep import configurations

from .grids import assert_read_inside, moved_sweep, segments_traced
from .states import SMALL

#: Eight configurations, learning-rate-major; B shares A's configurations 4 and 5.
GRID_A = {"learning_rate": [1e-4, 3e-4, 1e-3, 3e-3], "gamma": [0.98, 0.99]}
GRID_B = {"learning_rate": [2e-4, 5e-4, 1e-3, 2e-3], "gamma": [0.98, 0.99]}
SEEDS = [0, 1]
#: Four PPO iterations of 4 copies x 128 steps, evaluated after two and after four.
STEPS, EVERY = 2048, 1024


def assert_close(swept, alone) -> None:
    """Parameters agree to the seed-determinism test's tolerance (1% of a layer's largest
    weight): a value the program takes as an argument rather than as a constant may round
    apart in the last bit, which Adam's normalised steps carry into every weight."""
    for a, b in zip(jax.tree.leaves(swept), jax.tree.leaves(alone), strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-2 * max(np.abs(b).max(), 1e-6))


def _program_compiles(events: list) -> int:
    """The run's programs among the compiles JAX reported (eager operations are named by
    their primitive)."""
    return sum(name == "jit(<unnamed function>)" for name in events)


@pytest.fixture(scope="module")
def grids(tmp_path_factory):
    """Grids A and B of PPO on CartPole-v1, the compiles of each, and the segment programs
    each traced."""
    events: list[str] = []

    def listen(event, _duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            events.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(listen)
    runs = {}
    try:
        with segments_traced() as traced:
            for name, grid in (("A", GRID_A), ("B", GRID_B)):
                events.clear()
                traced.clear()
                log_dir = tmp_path_factory.mktemp(name)
                result = PPO(env_id="CartPole-v1").train(
                    seed=SEEDS,
                    n_timesteps=STEPS,
                    num_episode_test=2,
                    logging_config=LoggingConfig(log_frequency=EVERY, log_dir=log_dir),
                    sweep=grid,
                )
                runs[name] = (result, _program_compiles(events), len(traced))
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return runs


@pytest.mark.slow
def test_a_grid_of_eight_is_one_init_and_one_segment_program(grids):
    result, compiles, _ = grids["A"]
    assert compiles == 2
    assert result.configs == configurations(PPO(env_id="CartPole-v1"), GRID_A)
    assert [c["learning_rate"] for c in result.configs[::2]] == GRID_A["learning_rate"]
    assert result.evaluations["episode_return"].shape == (8, 2, 2)
    # The rows name each place's configuration and seed.
    lines = Path(result.log_dir, "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [(r["config"], r["seed"]) for r in rows[:16]] == [
        (c, s) for c in range(8) for s in SEEDS
    ]


@pytest.mark.slow
def test_a_second_grid_of_the_same_shape_is_served_by_the_cache(grids):
    _, compiles, traced = grids["B"]
    assert traced == 0  # the program cache's exported programs, not a new trace
    assert compiles == 2  # the two programs, from the compile cache


@pytest.mark.slow
def test_a_configuration_is_the_same_run_in_any_grid_of_its_shape(grids):
    a, b = grids["A"][0], grids["B"][0]
    for c in (4, 5):
        assert a.configs[c] == b.configs[c]
        for x, y in zip(
            jax.tree.leaves(a.result(c).state), jax.tree.leaves(b.result(c).state), strict=True
        ):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(
            a.result(c).evaluations["episode_return"], b.result(c).evaluations["episode_return"]
        )
    # And the values do differ where the grids do.
    differ = [
        not np.array_equal(x, y)
        for x, y in zip(
            jax.tree.leaves(a.result(0).state.params),
            jax.tree.leaves(b.result(0).state.params),
            strict=True,
        )
    ]
    assert any(differ)


@pytest.mark.slow
def test_one_configuration_agrees_with_its_own_run_and_is_an_ordinary_result(grids, tmp_path):
    swept = grids["A"][0].result(5)
    assert swept.agent.config.learning_rate == 1e-3 and swept.agent.config.gamma == 0.99
    alone = PPO(env_id="CartPole-v1", learning_rate=1e-3, gamma=0.99).train(
        seed=SEEDS,
        n_timesteps=STEPS,
        num_episode_test=2,
        logging_config=LoggingConfig(log_frequency=EVERY, log_dir=tmp_path),
    )
    assert_close(swept.state.params, alone.state.params)
    # A run directory without a saved result plots from its logged evaluations.
    (logged,) = runs_in(alone.log_dir)
    assert logged["evaluations"]["timestep"] == [EVERY, STEPS]
    np.testing.assert_array_equal(
        logged["evaluations"]["episode_return"], alone.evaluations["episode_return"]
    )
    assert repr(grids["A"][0]) == (
        f"SweepResult(PPO on gymnax/CartPole-v1, 8 configurations of ['gamma', 'learning_rate'], "
        f"seeds={SEEDS}, log_dir={grids['A'][0].log_dir!r})"
    )
    assert repr(swept).startswith(f"TrainResult({swept.agent!r}, seeds={SEEDS}, ")
    table = grids["A"][0].summary()
    assert len(table) == 8 and table[5] == {"learning_rate": 1e-3, "gamma": 0.99} | swept.summary()
    grid = ajax.evaluate(grids["A"][0], num_episodes=2)
    assert grid.shape == (8, 2)
    np.testing.assert_array_equal(grid[5], ajax.evaluate(swept, num_episodes=2))
    swept.save(tmp_path / "saved")
    loaded = ajax.load(tmp_path / "saved")
    assert loaded.agent.config == swept.agent.config
    obs = np.zeros(4, np.float32)
    np.testing.assert_array_equal(loaded.act(obs), swept.act(obs))


@pytest.mark.slow
def test_a_sweeps_run_directory_plots_a_curve_per_configuration(grids, tmp_path, capsys):
    """Nothing is saved of a sweep but its run directory: ``ajax plot`` reads each
    configuration's curve from its rows. ``ajax train --config`` of it, which would repeat
    one configuration and drop the sweep, is refused."""
    result = grids["A"][0]
    runs = runs_in(result.log_dir)
    assert [run["hyperparameters"] for run in runs] == [
        json.loads(json.dumps(r.agent.hyperparameters())) for r in result.results
    ]
    for c, run in enumerate(runs):
        np.testing.assert_array_equal(
            run["evaluations"]["episode_return"], result.result(c).evaluations["episode_return"]
        )
    assert differing_settings(runs)[5] == "PPO learning_rate=0.001 gamma=0.99"
    out = tmp_path / "grid.png"
    assert main(["plot", result.log_dir, "-o", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG")
    capsys.readouterr()
    assert main(["train", "--config", str(Path(result.log_dir) / "config.json")]) == 2
    assert "is a sweep's run, of 8 configurations" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("sweep", "message"),
    [
        ({"n_steps": [64, 128]}, "n_steps cannot be swept in one program: an integer"),
        ({"anneal_lr": [True, False]}, "anneal_lr cannot be swept in one program: a boolean"),
        ({"activation": ["tanh", "relu"]}, "activation cannot be swept.*a string"),
        ({"hidden_sizes": [(64,), (32,)]}, "hidden_sizes cannot be swept.*layer sizes"),
        ({"init_log_std": [0.0, -1.0]}, "init_log_std cannot be swept.*Batchable fields of PPO"),
        (
            {"learnin_rate": [1e-3]},
            "no hyperparameter 'learnin_rate' \\(did you mean 'learning_rate'",
        ),
        ({"gamma": [0.9, 1.5]}, "gamma=1.5 is out of range"),
        ({"gamma": []}, "non-empty list"),
        ({}, "sweep is empty"),
        ([{"gamma": 0.9}, {"ent_coef": 0.1}], "name the same fields"),
    ],
)
def test_a_sweep_that_cannot_be_one_program_is_refused_before_compiling(
    sweep, message, monkeypatch
):
    monkeypatch.setattr("ajax.loop.lower_run", lambda *a, **k: pytest.fail("compiled"))
    with pytest.raises(ValueError, match=message):
        PPO(env_id="CartPole-v1").train(seed=0, n_timesteps=1024, sweep=sweep)


def test_a_divergence_names_its_configuration_and_seed():
    run_config = {"seeds": [3, 7], "sweep": {"configs": [{"gamma": 0.9}, {"gamma": 0.99}]}}
    labels = place_labels(run_config)
    assert labels == [
        {"config": 0, "seed": 3},
        {"config": 0, "seed": 7},
        {"config": 1, "seed": 3},
        {"config": 1, "seed": 7},
    ]
    health = {
        "diverged": np.array([False, False, True, False]),
        "iteration": np.array([0, 0, 4, 0]),
        "metric": np.array([0, 0, 1, 0]),
    }
    found = divergences(health, labels, ["loss", "params"], RunPlan(512, 10, 2))
    assert found == [{"config": 1, "seed": 3, "timestep": 2560, "metric": "params"}]


#: The world models' grids are their action probes' runs (tests/test_dreamerv3.py,
#: tests/test_tdmpc2.py), checked by tests/grids.py alone: a program of theirs compiles for
#: half a minute, and a run alone to compare with would be one more.
CHECKED_ON_THEIR_PROBES = ("DreamerV3", "TDMPC2")


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    sorted(
        n
        for n, cls in AGENTS.items()
        if batchable_fields(cls.Config) and n not in CHECKED_ON_THEIR_PROBES
    ),
)
def test_every_batchable_field_is_read_inside_the_programs(name, monkeypatch):
    """The grid of an agent's own values and every batchable field moved trains the same
    whether the agent was built with its own values or the moved ones (tests/grids.py), and
    the moved configuration learns what the agent built with those values learns alone: its
    updates agree to 1% of the largest."""
    env_id, settings = SMALL[name]
    if "learning_starts" in {f.name for f in dataclasses.fields(AGENTS[name].Config)}:
        settings = {"learning_starts": 32} | settings
    agent = AGENTS[name](env_id=env_id, **settings)
    # Four iterations and 64 steps past the warm-up.
    steps = getattr(agent.config, "learning_starts", 0) + 4 * agent.steps_per_iteration + 64
    grid = agent.train(seed=0, n_timesteps=steps, sweep=moved_sweep(agent))
    alone_agent = AGENTS[name](env_id=env_id, **settings, **grid.configs[1])
    init = init_program(alone_agent, alone_agent.env_copies(alone_agent.n_envs), 1)
    start = jax.tree.map(lambda x: x[0], init(seed_array([0]), {}).params)
    runs = (grid.result(1), alone_agent.train(seed=0, n_timesteps=steps))
    swept, alone = (
        jax.tree.leaves(jax.tree.map(lambda x, s: x[0] - s, r.state.params, start)) for r in runs
    )
    for s, a in zip(swept, alone, strict=True):
        np.testing.assert_allclose(s, a, rtol=0, atol=1e-2 * max(np.abs(a).max(), 1e-8))
    assert_read_inside(agent, grid, monkeypatch, seed=0, n_timesteps=steps)


def test_the_memory_check_counts_every_configuration(monkeypatch):
    # Each place holds a replay buffer of its own: 4 configurations x 4 seeds are 16.
    monkeypatch.setattr("ajax.run.plan.available_bytes", lambda: 1)
    monkeypatch.setattr("ajax._program_cache.load", lambda key: None)
    agent = ajax.SAC(env_id="Pendulum-v1", buffer_size=1_000)
    with pytest.raises(MemoryError, match=r"\(16 runs \(configurations x seeds\) x"):
        agent.train(seed=[0, 1, 2, 3], n_timesteps=2_000, sweep={"tau": [0.001, 0.005, 0.01, 0.02]})
