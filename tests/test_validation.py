"""Bad input fails before compiling, with a message naming the problem and the fix."""

import re
import warnings

import gymnax
import numpy as np
import pytest

import ajax
from ajax import DQN, PPO, PQN, REDQ, SAC, TD3, TDMPC2, UDRL, LoggingConfig
from ajax.cli import main
from ajax.envs import from_gymnax
from ajax.result import episode_returns
from ajax.run.plan import plan_run, seeds_of, warn_if_only_warmup
from ajax.sweep import SweepResult, configurations


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: PPO(env_id="CartPol-v1"), r"Unknown environment id 'CartPol-v1'.*CartPole-v1"),
        (lambda: PPO(env_id="CartPole-v1", n_envs=0), r"n_envs must be a positive integer"),
        (lambda: PPO(env_id="CartPole-v1", n_envs=2.5), r"n_envs must be a positive integer"),
        (
            lambda: PPO(env_id="CartPole-v1", learning_rate=-1.0),
            r"learning_rate=-1.0 is out of range: it must be > 0",
        ),
        (
            lambda: PPO(env_id="CartPole-v1", gamma=1.5),
            r"gamma=1.5 is out of range: it must be >= 0.0 and <= 1.0",
        ),
        (lambda: PPO(env_id="CartPole-v1", n_epochs=0), r"n_epochs=0 is out of range"),
        (lambda: PPO(env_id="CartPole-v1", n_steps=12.5), r"n_steps must be a whole number"),
        (lambda: PPO(env_id="CartPole-v1", anneal_lr="yes"), r"anneal_lr must be True or False"),
        (
            lambda: PPO(env_id="CartPole-v1", learning_rat=1e-3),
            r"no hyperparameter 'learning_rat' \(did you mean 'learning_rate'\?\)",
        ),
        (
            lambda: PPO(env_id="CartPole-v1", num_envs=8),
            r"no hyperparameter 'num_envs' \(did you mean 'n_envs'\?\)",
        ),
        (
            lambda: PPO(env_id="CartPole-v1", n_envs=3, n_steps=5, n_minibatches=4),
            r"does not split into n_minibatches=4",
        ),
        (
            lambda: DQN(env_id="Pendulum-v1"),
            r"DQN supports Discrete action spaces, but gymnax/Pendulum-v1 has Box.*such as "
            r"CartPole-v1\.",
        ),
        (
            lambda: PQN(env_id="Pendulum-v1"),
            r"PQN supports Discrete action spaces, but gymnax/Pendulum-v1 has Box",
        ),
        (
            lambda: DQN(env_id="CartPole-v1", buffer_size=0),
            r"buffer_size=0 is out of range: it must be >= 1",
        ),
        (
            lambda: DQN(env_id="CartPole-v1", tau=0.0),
            r"tau=0.0 is out of range: it must be > 0.0 and <= 1.0",
        ),
        (
            lambda: PQN(env_id="CartPole-v1", n_envs=3, n_steps=5),
            r"does not split into n_minibatches=16",
        ),
        (
            lambda: SAC(env_id="CartPole-v1"),
            r"SAC supports Box action spaces, but gymnax/CartPole-v1 has Discrete.*such as "
            r"Pendulum-v1\.",
        ),
        (
            lambda: REDQ(env_id="Pendulum-v1", n_target_critics=12),
            r"n_target_critics=12 exceeds n_critics=10.*at most 10",
        ),
        (
            lambda: UDRL(env_id="CartPole-v1", last_few=40, store_size=30),
            r"last_few=40 exceeds store_size=30: the exploratory command.*at most 30",
        ),
        (
            # REDQ only overrides SAC's default; the range is SAC's, declared once.
            lambda: REDQ(env_id="Pendulum-v1", gradient_steps=0),
            r"gradient_steps=0 is out of range: it must be >= 1. The default is 20 \(critic",
        ),
        (
            # The field's help closes the message once, without a doubled full stop.
            lambda: TDMPC2(env_id="Pendulum-v1", horizon=0),
            r"The default is 3 \(steps per run, and the planner's horizon; the reference's "
            r"value\)\.$",
        ),
        (
            lambda: PQN(env_id="CartPole-v1", learning_rate=0.0),
            r"learning_rate=0.0 is out of range: it must be > 0.0. The default is 0.0001 \(RAdam",
        ),
        (
            lambda: TD3(env_id="Pendulum-v1", gradient_steps=3, policy_delay=2),
            r"gradient_steps=3 and policy_delay=2: one must divide the other",
        ),
        (
            # A string field: checked against the activations Ajax has, not at trace time.
            lambda: PPO(env_id="CartPole-v1", activation="gelu_fast"),
            r"activation='gelu_fast' is not a hidden activation; pick one of .*'tanh'",
        ),
        (
            lambda: PPO(env_id="CartPole-v1", hidden_sizes=64),
            r"hidden_sizes must be a sequence of positive layer widths, e.g. "
            r"hidden_sizes=\(64, 64\); got 64\.",
        ),
        (lambda: SAC(env_id="Pendulum-v1", hidden_sizes=(0,)), r"widths, .*; got \(0,\)"),
        (lambda: SAC(env_id="Pendulum-v1", hidden_sizes=(64.5,)), r"widths, .*; got \(64.5,\)"),
        (lambda: PPO(env_id="CartPole-v1", n_steps=float("inf")), r"n_steps must be a whole"),
        (
            lambda: PPO(env_id="CartPole-v1", env_params=[("max_steps_in_episode", 200)]),
            r"env_params must be a mapping of the environment's parameters to values",
        ),
        (lambda: LoggingConfig(log_frequency=0), r"log_frequency must be a positive number"),
        (
            lambda: LoggingConfig(log_frequency=10, run_name="a/b"),
            r"run_name 'a/b' must be a plain directory name",
        ),
    ],
)
def test_construction_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.fixture(scope="module")
def agent():
    return PPO(env_id="CartPole-v1", n_envs=4)


@pytest.fixture
def no_compiling(monkeypatch):
    """``jax.jit`` raises, so that a check shown to come first came before any compile."""

    def no_compile(*args, **kw):
        raise AssertionError("train compiled before validating its inputs")

    monkeypatch.setattr("jax.jit", no_compile)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(n_timesteps=0), r"n_timesteps must be a positive integer"),
        (dict(n_timesteps=-5), r"n_timesteps must be a positive integer"),
        (
            dict(n_timesteps=100),
            r"n_timesteps=100 is less than one iteration of PPO, which takes 512 steps",
        ),
        (dict(seed=[]), r"seed is an empty list"),
        (dict(seed=[0, -1]), r"seeds must be integers in \[0, 2\*\*32\)"),
        (dict(seed="0"), r"seeds must be integers"),
        (dict(seed=1.5), r"seeds must be integers in \[0, 2\*\*32\), got 1.5"),
        (dict(seed=[3, 0, 3]), r"seed 3 is given twice: .* Give distinct seeds"),
        (dict(num_episode_test=0), r"num_episode_test must be a positive integer"),
    ],
)
def test_train_errors_come_before_compiling(agent, kwargs, message, no_compiling):
    with pytest.raises(ValueError, match=message):
        agent.train(**({"n_timesteps": 1024} | kwargs))


def test_numpy_values_and_whole_numbers_are_taken_as_the_fields_hold_them(no_compiling):
    """What a researcher's grid is made of (np.linspace, np.int64, 1e6) is read as the
    Python numbers the fields hold, so the config hashes and records as if typed in."""
    agent = PPO(
        env_id="CartPole-v1",
        n_envs=np.int64(2),
        n_steps=16.0,
        gamma=np.float64(0.5),
        ent_coef=np.float32(0.25),
        hidden_sizes=np.array([32, 32]),
        anneal_lr=np.bool_(False),
    )
    c = agent.config
    assert type(agent.n_envs) is int and agent.n_envs == 2
    assert type(c.n_steps) is int and c.n_steps == 16
    assert type(c.ent_coef) is float and c.ent_coef == 0.25 and c.gamma == 0.5
    assert c.hidden_sizes == (32, 32) and all(type(w) is int for w in c.hidden_sizes)
    assert c.anneal_lr is False and hash(c) == hash(PPO(env_id="CartPole-v1", **vars(c)).config)
    assert seeds_of(np.arange(3)) == [0, 1, 2] and seeds_of(range(1, 3)) == [1, 2]
    swept = configurations(agent, {"learning_rate": np.array([1e-4, 1e-3])})
    assert swept == [{"learning_rate": 1e-4}, {"learning_rate": 1e-3}]
    # A whole float budget passes the checks: the run goes on to compile.
    with pytest.raises(AssertionError, match="compiled"):
        agent.train(seed=np.array([0, 1]), n_timesteps=2e3, num_episode_test=2.0)


def test_a_progress_callback_that_cannot_be_called_is_refused_before_compiling(no_compiling):
    agent = PPO(env_id="CartPole-v1", n_envs=2, n_steps=16)
    for progress in ("yes", lambda: None):
        with pytest.raises(TypeError, match=r"progress must be a function of \(timesteps done"):
            agent.train(n_timesteps=64, progress=progress)
    with pytest.raises(AssertionError, match="compiled"):
        agent.train(n_timesteps=64, progress=lambda done, total, summary: None)


def test_evaluation_refuses_a_path_and_a_bad_seed():
    with pytest.raises(TypeError, match=r"ajax.evaluate\(ajax.load\('runs/r'\)\)"):
        ajax.evaluate("runs/r")
    # The checks come before the result is read.
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*32\)"):
        episode_returns(None, num_episodes=2, seed=-1)
    with pytest.raises(ValueError, match=r"num_episodes must be a positive integer"):
        episode_returns(None, num_episodes=0)


def test_a_sweep_result_names_its_configurations():
    sweep = SweepResult([{"gamma": 0.9}, {"gamma": 0.99}], [0], ["first", "second"], {}, None, [])
    assert sweep.result(1) == "second"
    with pytest.raises(IndexError, match=r"configurations 0 to 1 \(its configs\), not 2"):
        sweep.result(2)


def test_a_run_on_an_environment_object_has_a_plain_directory_name(tmp_path, no_compiling):
    env = from_gymnax(*gymnax.make("CartPole-v1"), env_id="my cart (v2)")
    config = LoggingConfig(log_frequency=32, log_dir=tmp_path)
    with pytest.raises(AssertionError, match="compiled"):
        PPO(env_id=env, n_envs=2, n_steps=16).train(n_timesteps=64, logging_config=config)
    (directory,) = tmp_path.iterdir()
    assert re.fullmatch(r"PPO_my-cart-v2_\d{8}-\d{6}", directory.name)


def test_a_budget_within_the_warm_up_is_warned_of_before_compiling(no_compiling):
    # TD-MPC2's warm-up on a task of 10,000-step episodes is 50,000 steps: a short trial run
    # would otherwise take only random steps, with nothing to say so.
    agent = SAC(env_id="Pendulum-v1", learning_starts=1_000)
    with pytest.warns(UserWarning, match=r"n_timesteps=1000 ends within SAC's warm-up") as seen:
        warn_if_only_warmup(agent, 1_000, plan_run(agent, 1_000, None))
    assert "Raise n_timesteps to at least 1001" in str(seen[0].message)
    # Where an iteration is many steps, the first that updates ends past learning_starts.
    wide = SAC(env_id="Pendulum-v1", n_envs=256, learning_starts=1_000)
    with pytest.warns(UserWarning, match="to at least 1024"):
        warn_if_only_warmup(wide, 1_000, plan_run(wide, 1_000, None))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_only_warmup(agent, 1_001, plan_run(agent, 1_001, None))

    # Through train, it comes before any compile and points at the caller's line.
    with (
        pytest.warns(UserWarning, match="warm-up") as seen,
        pytest.raises(AssertionError, match="compiled"),
    ):
        agent.train(n_timesteps=500)
    assert seen[0].filename == __file__


def test_logging_config_must_be_a_logging_config(agent):
    with pytest.raises(TypeError, match="LoggingConfig"):
        agent.train(n_timesteps=1024, logging_config={"log_frequency": 10})


def test_cli_reports_bad_input_without_a_traceback(capsys, tmp_path):
    assert main(["train", "NoSuchAgent", "--env", "CartPole-v1", "--n-timesteps", "10"]) == 2
    assert "Unknown agent 'NoSuchAgent'" in capsys.readouterr().out
    code = main(
        [
            "train",
            "PPO",
            "--env",
            "CartPole-v1",
            "--n-timesteps",
            "1000",
            "--gamma",
            "2",
            "--log-dir",
            str(tmp_path),
        ]
    )
    assert code == 2 and "gamma=2.0 is out of range" in capsys.readouterr().out
    code = main(
        ["train", "PPO", "--env", "CartPole-v1", "--n-timesteps", "10", "--log-dir", str(tmp_path)]
    )
    assert code == 2 and "less than one iteration" in capsys.readouterr().out


def test_a_config_field_without_its_documentation_is_refused_where_the_agent_is_defined():
    from dataclasses import dataclass

    from ajax.agents.ppo import PPOConfig

    @dataclass(frozen=True)
    class Bare(PPOConfig):
        bonus: float = 0.5

    with pytest.raises(TypeError, match=r"Config declares bonus without hyperparameter"):

        class BonusPPO(PPO):
            Config = Bare
