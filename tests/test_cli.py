"""The command line: train with a run directory, eval, plot, list, cache."""

import contextlib
import dataclasses
import io
import json
import os
import re
import subprocess
import sys

import pytest

import ajax
from ajax.cli import main
from ajax.plotting import differing_settings, panels, runs_in
from ajax.result import read_meta

from .interrupts import interrupting_call


def test_train_writes_a_complete_run_directory(tmp_path, capsys):
    code = main(
        [
            "train",
            "PPO",
            "--env",
            "CartPole-v1",
            "--seeds",
            "2",
            "--n-timesteps",
            "256",
            "--n-envs",
            "2",
            "--n-steps",
            "16",
            "--log-frequency",
            "64",
            "--log-dir",
            str(tmp_path),
            "--run-name",
            "cli",
            "--env-param",
            "max_steps_in_episode=100",
            "--no-anneal-lr",
            "--hidden-sizes",
            "32",
            "32",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "1 on each of 2 devices" in " ".join(out.split())
    run = tmp_path / "cli"
    config = json.loads((run / "config.json").read_text())
    assert config["hyperparameters"]["anneal_lr"] is False
    assert config["hyperparameters"]["hidden_sizes"] == [32, 32]
    assert config["seeds"] == [0, 1] and config["n_envs"] == 2
    assert config["env_params"] == {"max_steps_in_episode": 100}
    rows = (run / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + 4 * 2
    png = (run / "learning_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    saved = json.loads((run / "result" / "result.json").read_text())
    assert (run / "result" / saved["state_file"]).exists()
    assert "final eval return" in out and "run directory" in out
    assert "steps/s over all seeds, evaluations included" in " ".join(out.split())


@pytest.mark.slow  # two whole runs, through the command line
def test_train_checkpoints_and_resume_continues_the_run(tmp_path, capsys, monkeypatch):
    """--checkpoint-every saves into the run directory; --resume continues from there, and
    refuses flags that describe another run."""
    base = ["PPO", "--env", "CartPole-v1", "--n-envs", "2", "--n-steps", "16"]
    flags = ["--n-timesteps", "256", "--log-frequency", "64", "--log-dir", str(tmp_path)]
    assert main(["train", *base, *flags, "--run-name", "ck", "--checkpoint-every", "3"]) == 0
    run = tmp_path / "ck"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["3"]
    capsys.readouterr()
    assert main(["train", "--resume", str(run)]) == 0
    out = "".join(capsys.readouterr().out.split())  # rich wraps long lines, even in words
    assert f"Resumingtherunin{run / 'checkpoints'}aftersegment3" in out
    assert "finalevalreturn" in out and "steps/soverallseeds" in out
    assert len((run / "metrics.csv").read_text().splitlines()) == 1 + 4
    # Flags that describe a run are refused, not ignored: --n-timesteps would not extend it.
    assert main(["train", *base, "--n-timesteps", "512", "--resume", str(run)]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "so --env, --n-envs, --n-steps, --n-timesteps cannot change it: leave them out" in out
    assert main(["train", "SAC", "--resume", str(run)]) == 2
    assert "arunofPPO,notSAC" in "".join(capsys.readouterr().out.split())
    assert main(["train", "--resume", str(tmp_path)]) == 2
    out = "".join(capsys.readouterr().out.split())
    assert (
        "holdsnocompleteAjaxcheckpoint" in out
        and "(ajaxtrain:arunstartedwith--checkpoint-everyN)" in out
    )
    # A finished run resumed runs no step, and prints no rate for it.
    done = ["--n-timesteps", "64", "--log-frequency", "64", "--log-dir", str(tmp_path)]
    assert main(["train", *base, *done, "--run-name", "done", "--checkpoint-every", "1"]) == 0
    capsys.readouterr()
    # The run's own agent may be named, and the watchdog's floor given.
    assert main(["train", "PPO", "--resume", str(tmp_path / "done"), "--hang-floor-s", "60"]) == 0
    out = "".join(capsys.readouterr().out.split())
    assert "finalevalreturn" in out and "steps/soverallseeds" not in out
    # SIGTERM during segment 2: the line says how to go on from the command line.
    monkeypatch.setattr(ajax.run.host, "call_watched", interrupting_call(3, "SIGTERM"))
    stopped = [*flags, "--run-name", "stopped", "--checkpoint-every", "1"]
    assert main(["train", *base, *stopped]) == 130
    out = "".join(capsys.readouterr().out.split())
    assert f"(ajaxtrain--resume{tmp_path / 'stopped' / 'checkpoints'})" in out


def test_bad_env_params_fail_with_the_fix(capsys):
    base = ["train", "PPO", "--env", "CartPole-v1", "--n-timesteps", "256"]
    assert main([*base, "--env-param", "max_steps_in_episode"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().out
    assert main([*base, "--env-param", "gravity_on_mars=3.7"]) == 2
    assert "gravity_on_mars" in capsys.readouterr().out
    assert main([*base, "--env-param", "max_steps_in_episode=abc"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "max_steps_in_episode takes a number like its default, 500, not the text 'abc'" in out
    assert main([*base, "--env-param", "max_steps_in_episode=50.5"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "max_steps_in_episode takes a whole number like its default, 500, not 50.5." in out


def test_list_shows_agents_and_env_ids(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert all(
        name in out
        for name in ("PPO", "DQN", "PQN", "SAC", "TD3", "REDQ", "APO", "APG", "UDRL", "ASAC", "AVG")
    )
    assert "gymnax/CartPole-v1" in out and "gymnax/Pendulum-v1" in out


def test_cache_info_and_prune(cache_env, capsys):
    stale = cache_env / "some-machine"
    stale.mkdir(parents=True)
    (stale / "abc-cache").write_bytes(b"x" * 1000)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"root: {cache_env}\n" in out and "enabled: yes" in out
    assert main(["cache", "prune", "--max-bytes", "0"]) == 0
    assert "deleted 1,000 bytes" in capsys.readouterr().out
    assert not (stale / "abc-cache").exists()


def test_cache_info_says_when_the_cache_is_off_and_why(cache_env, monkeypatch, capsys):
    cache_env.parent.joinpath("a-file").write_text("")
    monkeypatch.setenv("AJAX_JAX_COMPILE_CACHE_DIR", str(cache_env.parent / "a-file"))
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"enabled: no ({cache_env.parent / 'a-file'}/" in out
    assert "cannot be made; set AJAX_JAX_COMPILE_CACHE_DIR elsewhere)" in out
    monkeypatch.setenv("AJAX_NO_COMPILE_CACHE", "1")
    assert main(["cache", "info"]) == 0
    assert "enabled: no (AJAX_NO_COMPILE_CACHE is set)" in capsys.readouterr().out


def test_a_bad_hang_floor_is_refused_before_training(capsys):
    code = main(
        ["train", "PPO", "--env", "CartPole-v1", "--n-timesteps", "256", "--hang-floor-s", "0"]
    )
    assert code == 2
    assert "--hang-floor-s must be a positive number of seconds, got 0." in capsys.readouterr().out
    run = ["train", "PPO", "--env", "CartPole-v1"]
    assert main([*run, "--checkpoint-every", "0"]) == 2
    assert "--checkpoint-every must be a positive number of evaluations" in capsys.readouterr().out
    assert main([*run, "--seed-start", "-3"]) == 2
    assert "--seed-start must be a seed, 0 or more, got -3." in capsys.readouterr().out
    # In the flag's words, not LoggingConfig's.
    assert main([*run, "--log-frequency", "0"]) == 2
    assert "log_frequency must be a positive integer, got 0; e.g. --log-frequency 10000." in (
        capsys.readouterr().out
    )


class Compiled(Exception):
    """Raised in place of compiling: the command line got as far as the run's programs."""


def compiling(*args, **kwargs):
    raise Compiled


@pytest.mark.parametrize(
    "argv",
    [
        ["--env", "CartPole-v1", "PPO", "--n-steps", "16"],
        ["--n-steps", "16", "--env", "CartPole-v1", "PPO"],
        ["--hidden-sizes", "32", "32", "--no-anneal-lr", "--n-steps", "16", "PPO"],
    ],
    ids=["env-first", "hyperparameter-first", "list-and-switch-first"],
)
def test_options_may_come_before_the_agent(argv, tmp_path, monkeypatch):
    """Flags before the agent's name, its hyperparameters' included, parse as after it: the
    run gets as far as compiling, with the flags' values in its config."""
    from ajax import loop

    monkeypatch.setattr(loop, "lower_run", compiling)
    if "--env" not in argv:
        argv = ["--env", "CartPole-v1", *argv]
    flags = ["--n-timesteps", "256", "--n-envs", "2", "--log-dir", str(tmp_path)]
    with pytest.raises(Compiled):
        main(["train", *argv, *flags, "--run-name", "early"])
    config = json.loads((tmp_path / "early" / "config.json").read_text())
    assert config["agent"] == "PPO" and config["n_envs"] == 2
    assert config["hyperparameters"]["n_steps"] == 16


def test_the_budget_is_checked_before_the_first_line_and_its_rounding_shown(
    tmp_path, monkeypatch, capsys
):
    """A budget or seed that train() would refuse is refused alone, with no "Training" line
    before it; a budget of no whole number of iterations says what runs instead."""
    from ajax import loop

    monkeypatch.setattr(loop, "lower_run", compiling)
    base = ["train", "PPO", "--env", "CartPole-v1", "--n-envs", "2", "--n-steps", "16"]
    base += ["--log-dir", str(tmp_path)]
    for bad in (["--n-timesteps", "20"], ["--seed-start", "-1"]):
        assert main([*base, *bad]) == 2
        out = capsys.readouterr().out
        assert "Training" not in out and len(out.strip().splitlines()) == 1, out
    with pytest.raises(Compiled):
        main([*base, "--n-timesteps", "100"])
    assert "96 steps per seed in whole iterations of 32, not 100" in capsys.readouterr().out
    with pytest.raises(Compiled):
        main([*base, "--n-timesteps", "96"])
    assert "whole iterations" not in capsys.readouterr().out


def test_counts_may_be_written_1e4_and_a_bad_flag_shows_its_own_agents_usage(
    tmp_path, monkeypatch, capsys
):
    """Budgets and sizes as RL papers write them (2e3, 1e4) are whole numbers; a flag that
    does not parse is reported with the named agent's usage, not every agent's flags."""
    from ajax import loop

    monkeypatch.setattr(loop, "lower_run", compiling)
    argv = ["train", "DQN", "--env", "CartPole-v1", "--n-timesteps", "2e3", "--buffer-size"]
    argv += ["1e4", "--log-dir", str(tmp_path), "--run-name", "sci"]
    with pytest.raises(Compiled):
        main(argv)
    config = json.loads((tmp_path / "sci" / "config.json").read_text())
    assert config["n_timesteps"] == 2000 and config["hyperparameters"]["buffer_size"] == 10_000
    capsys.readouterr()
    for bad, message in (
        (["--n-timesteps", "2.5"], "'2.5' is not a whole number"),
        (["--hidden-sizes"], "expected at least one argument"),
    ):
        with pytest.raises(SystemExit):
            main(["train", "PPO", "--env", "CartPole-v1", *bad])
        err = capsys.readouterr().err
        assert message in err and "--n-epochs" in err and "--free-nats" not in err, err


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (
            ["train", "PPO", "--total-timesteps", "1e5"],
            "--total-timesteps: did you mean --n-timesteps?",
        ),
        (["train", "PPO", "--num-envs=8"], "--num-envs: did you mean --n-envs?"),
        (
            ["sweep", "PPO", "--env", "CartPole-v1", "--buffer-size", "10"],
            "--buffer-size is a hyperparameter of ASAC, DQN, DreamerV3, REDQ, SAC, TD3, TDMPC2, "
            "not of PPO (ajax sweep PPO --help lists PPO's)",
        ),
        (["eval", "runs/x", "--num-episodes", "3"], "--num-episodes: did you mean --episodes?"),
        (["plot", "runs/x", "--outptu", "a.png"], "--outptu: did you mean --output?"),
    ],
)
def test_an_unknown_flag_names_the_flag_meant(argv, hint, capsys):
    """Other libraries' names for a flag (SB3's and CleanRL's total_timesteps) and another
    agent's hyperparameters are refused with what was likely meant, before anything runs."""
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err.splitlines()[-1]
    assert "unrecognized arguments: " in err and err.endswith(hint), err


def _failure_line(argv, capsys):
    """The one line ``ajax`` prints for a run that failed on the machine, checking that it
    exits with status 1 and prints no traceback."""
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in captured.out + captured.err
    said = ("Training", "steps per seed in whole iterations")  # the run's opening lines
    lines = [
        line
        for line in captured.out.splitlines()
        if line.strip() and not any(part in line for part in said)
    ]
    assert len(lines) == 1, captured.out
    return lines[0]


def test_an_unwritable_log_dir_is_one_line_and_a_failure(monkeypatch, capsys):
    from ajax import loop

    monkeypatch.setattr(loop, "lower_run", compiling)
    # The command as written: --n-timesteps defaults to train's 100,000.
    argv = ["train", "PPO", "--env", "CartPole-v1", "--log-dir", "/proc/forbidden"]
    line = _failure_line(argv, capsys)
    assert "Cannot write logs to /proc/forbidden" in line and "--log-dir" in line


@pytest.mark.parametrize(
    "error, cause, fix",
    [
        (OSError(28, "No space left on device", "/data/x.csv"), "No space left", "--log-dir"),
        (MemoryError("This run needs 17.6 GiB. Lower buffer_size."), "17.6 GiB", "buffer_size"),
        (MemoryError(), "Out of memory", "--buffer-size"),
        ("log writer", "the 3 rows not written are in", "--log-dir"),
    ],
    ids=["os-error", "memory-check", "bare-memory-error", "log-writer"],
)
def test_a_run_failing_on_the_machine_is_one_line_and_a_failure(
    error, cause, fix, monkeypatch, capsys
):
    """OSError, LogWriterError and MemoryError from a run: one line with the cause and the
    fix, exit status 1, no traceback."""
    from ajax import loop
    from ajax.logging.writer import LogWriterError

    if error == "log writer":
        error = LogWriterError(
            "Writing logs to /data/runs/x failed (OSError: No space left on device); the 3 "
            "rows not written are in /tmp/ajax-unwritten.jsonl.",
            None,
        )

    def failing(*args, **kwargs):
        raise error

    monkeypatch.setattr(loop, "train", failing)
    line = _failure_line(["train", "PPO", "--env", "CartPole-v1", "--n-timesteps", "512"], capsys)
    assert cause in line and fix in line, line


def test_version(capsys):
    import ajax

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ajax {ajax.__version__}\n"


def test_n_envs_help_names_each_agents_default(capsys):
    from ajax import AGENTS

    with pytest.raises(SystemExit) as exit:
        main(["train", "PQN", "--help"])
    assert exit.value.code == 0
    assert "(default: 32, PQN's own" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert all(f"{name} {cls.default_n_envs}" in out for name, cls in AGENTS.items())


def test_every_agents_help_lists_each_hyperparameter_with_its_doc(capsys):
    # APG's learning_rate doc cites "10%", which argparse read as a format and crashed on.
    from ajax import AGENTS

    for name, cls in AGENTS.items():
        with pytest.raises(SystemExit) as exit:
            main(["train", name, "--help"])
        assert exit.value.code == 0, name
        out = "".join(capsys.readouterr().out.split())  # wrapped at spaces and hyphens
        for field in dataclasses.fields(cls.Config):
            assert "".join(field.metadata["doc"].split()) in out, (name, field.name)


def test_train_without_an_env_suggests_one_the_agent_runs_on(capsys):
    from ajax import AGENTS

    for name, cls in AGENTS.items():
        assert main(["train", name]) == 2
        captured = capsys.readouterr()
        assert f"--env is required: the environment id, e.g. --env {cls.example_env}." in (
            captured.out + captured.err
        )
        cls(env_id=cls.example_env)  # refused, were it the wrong kind


@pytest.fixture(scope="module")
def five_seed_runs(tmp_path_factory):
    """Two small CartPole runs saved by ajax train, of 5 and 2 seeds, one step size apart;
    the 5-seed run's closing lines."""
    log_dir = tmp_path_factory.mktemp("runs")
    base = ["train", "PPO", "--env", "CartPole-v1", "--n-timesteps", "256", "--n-envs", "2"]
    base += ["--n-steps", "16", "--log-frequency", "64", "--log-dir", str(log_dir)]
    outputs = []
    for name, extra in (
        ("five", ["--seeds", "5"]),
        ("two", ["--seeds", "2", "--learning-rate", "0.001"]),
    ):
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert main([*base, *extra, "--run-name", name]) == 0
        outputs.append(out.getvalue())
    return log_dir / "five", log_dir / "two", " ".join(outputs[0].split())


def test_a_five_seed_run_ends_with_the_iqm_and_its_interval(five_seed_runs):
    *_, out = five_seed_runs
    assert re.search(
        r"final IQM over 5 seeds: -?[\d.]+ \[-?[\d.]+, -?[\d.]+\] \(95% bootstrap", out
    )


def test_eval_prints_each_seeds_mean_and_std_and_the_iqm(five_seed_runs, capsys):
    five, two, _ = five_seed_runs
    assert main(["eval", str(five), "--episodes", "3"]) == 0
    raw = capsys.readouterr().out
    assert raw.startswith("PPO on gymnax/CartPole-v1: 3 episodes\n"), raw  # one line, unwrapped
    out = " ".join(raw.split())
    assert "mean return" in out and "std" in out
    assert re.search(r"IQM over 5 seeds: [\d.]+ \[[\d.]+, [\d.]+\]", out)
    assert main(["eval", str(two / "result"), "--episodes", "5", "--seed-index", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert re.search(r"IQM over 5 episodes: [\d.]+ \[[\d.]+, [\d.]+\]", out)
    # Under five scores, as a run's summary, the mean alone: a bootstrap over two seeds
    # would call [a, b] a 95% interval.
    assert main(["eval", str(two), "--episodes", "3"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert re.search(r"mean over 2 seeds: [\d.]+$", out) and "IQM" not in out, out
    assert main(["eval", str(two), "--episodes", "1", "--seed-index", "0"]) == 0
    assert re.search(r"mean over 1 episode: [\d.]+$", capsys.readouterr().out.strip())


def test_eval_refuses_a_bad_seed_index_and_a_directory_without_a_run(
    five_seed_runs, tmp_path, capsys
):
    five, *_ = five_seed_runs
    assert main(["eval", str(five), "--seed-index", "5"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert out == "--seed-index 5 is out of range: the run has 5 seeds, indices 0..4."
    assert main(["eval", str(tmp_path)]) == 2
    assert "holds no saved Ajax result" in capsys.readouterr().out
    # --episodes 0 was taken for the default; it is refused, as a negative count is.
    assert main(["eval", str(five), "--episodes", "0"]) == 2
    assert "--episodes must be a positive number, got 0." in capsys.readouterr().out


def test_train_refuses_a_run_name_already_taken_in_one_line(five_seed_runs, monkeypatch, capsys):
    """The same --run-name again: exit status 2 before compiling, one line naming the fix,
    and the earlier run's files as they were."""
    from ajax import loop

    five, *_ = five_seed_runs
    before = {p: p.read_bytes() for p in five.rglob("*") if p.is_file()}
    monkeypatch.setattr(loop, "lower_run", compiling)
    argv = ["train", "DQN", "--env", "CartPole-v1", "--log-dir", str(five.parent)]
    assert main([*argv, "--run-name", five.name]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "already holds a run" in out and "--run-name NAME, or --resume DIR" in out
    assert "Traceback" not in out
    assert {p: p.read_bytes() for p in five.rglob("*") if p.is_file()} == before


def test_the_program_prints_a_warning_as_its_message_alone(tmp_path):
    """Run as the program, a warning before the run (a budget inside the warm-up) is one
    line of its message on standard error, without Python's file and source line. The run
    is then refused (its directory taken), so nothing compiles."""
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "config.json").write_text("{}")
    argv = ["train", "TDMPC2", "--env", "Pendulum-v1", "--n-timesteps", "500"]
    argv += ["--log-dir", str(tmp_path), "--run-name", "taken"]
    env = os.environ | {"JAX_PLATFORMS": "cpu", "COLUMNS": "400"}
    done = subprocess.run(
        [sys.executable, "-m", "ajax.cli", *argv], capture_output=True, text=True, env=env
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "warning: n_timesteps=500 ends within TDMPC2's warm-up" in done.stderr
    assert "cli.py" not in done.stderr and "UserWarning" not in done.stderr, done.stderr


def test_a_mujoco_gl_that_breaks_mujocos_import_is_refused_with_the_fix(tmp_path):
    """MuJoCo loads the OpenGL library ``MUJOCO_GL`` names as it is imported, which Brax does
    first thing, even for a run that draws nothing. Where that fails (here a value MuJoCo
    does not know; OSMesa not installed fails the same way, inside PyOpenGL), the run is
    refused naming the variable and the fix, before anything is written or compiled."""
    argv = ["train", "PPO", "--env", "brax/inverted_pendulum", "--n-timesteps", "64"]
    env = os.environ | {"JAX_PLATFORMS": "cpu", "COLUMNS": "400", "MUJOCO_GL": "bogus"}
    done = subprocess.run(
        [sys.executable, "-m", "ajax.cli", *argv, "--log-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "MUJOCO_GL=bogus" in out and "unset MUJOCO_GL to train without drawing" in out, out
    assert "Traceback" not in out and not any(tmp_path.iterdir())


def test_plot_overlays_runs_labelled_by_what_differs(five_seed_runs, tmp_path, capsys):
    five, two, _ = five_seed_runs
    out = tmp_path / "c.png"
    assert main(["plot", str(five), str(two), "-o", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG") and out.stat().st_size > 10_000
    labels = differing_settings([read_meta(five), read_meta(two)])
    assert labels == ["PPO learning_rate=0.00025", "PPO learning_rate=0.001"]
    # A value as Optuna suggests it is shown as the sweep's own lines show it.
    drawn = [
        {"agent": "PPO", "env_id": "CartPole-v1", "n_envs": 4, "hyperparameters": {"lr": lr}}
        for lr in (0.0002314575594054932, 0.001)
    ]
    assert differing_settings(drawn) == ["PPO lr=0.0002315", "PPO lr=0.001"]
    # A run on another task gets a panel of its own: returns of two tasks share no scale.
    other = tmp_path / "acrobot"
    other.mkdir()
    config = json.loads((two / "config.json").read_text()) | {"env_id": "gymnax/Acrobot-v1"}
    (other / "config.json").write_text(json.dumps(config))
    (other / "metrics.jsonl").write_text((two / "metrics.jsonl").read_text())
    by_env = panels([read_meta(five), read_meta(two), *runs_in(other)])
    assert {env: [label for _, label in runs] for env, runs in by_env.items()} == {
        "gymnax/CartPole-v1": [
            "PPO learning_rate=0.00025 (5 seeds)",
            "PPO learning_rate=0.001 (2 seeds)",
        ],
        "gymnax/Acrobot-v1": ["PPO (2 seeds)"],
    }
    assert main(["plot", str(five), str(two), str(other), "-o", str(out)]) == 0
    width = int.from_bytes(out.read_bytes()[16:20], "big")  # the PNG header's
    assert width > 1.4 * 770, width  # two panels side by side, where one is 770 pixels
    # The path printed is the file written: a .png where no format is named, a directory's
    # curves.png, in folders made for it; brackets are not taken for the console's markup
    # (which dropped "[lr=1e-3]" and raised on "[/x]").
    capsys.readouterr()
    given_written = [("noext", "noext.png"), ("", "curves.png"), ("a/b/c.png", "a/b/c.png")]
    given_written += [("[lr=1e-3]/c.png",) * 2, ("[/x]/c.png",) * 2]
    for given, written in given_written:
        assert main(["plot", str(two), "-o", str(tmp_path / given)]) == 0
        assert capsys.readouterr().out.split() == ["wrote", str(tmp_path / written)]
        assert (tmp_path / written).read_bytes().startswith(b"\x89PNG")


def test_eval_records_a_video_of_a_run_saved_by_train(five_seed_runs, tmp_path, capsys):
    five, *_ = five_seed_runs
    gif = tmp_path / "cp.gif"
    assert main(["eval", str(five), "--video", str(gif), "--seed-index", "2"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    frames = int(re.search(r"wrote (\d+) frames of 1 episode\(s\)", out).group(1))
    assert gif.read_bytes().startswith(b"GIF8") and frames >= 8
    assert main(["eval", str(five), "--video", str(tmp_path / "cp.avi")]) == 2
    assert ".gif" in capsys.readouterr().out
    # A path that cannot be written is refused before the episodes run: status 1, one line.
    (tmp_path / "file").write_text("")
    assert main(["eval", str(five), "--video", str(tmp_path / "file" / "cp.gif")]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith(f"record_video cannot write {tmp_path / 'file' / 'cp.gif'}: ")
    assert "Give a path in a directory you can write." in out


def _config_of(argv, tmp_path, monkeypatch, name):
    """The config.json of the run ``ajax train argv`` starts, stopped where it compiles."""
    from ajax import loop

    monkeypatch.setattr(loop, "lower_run", compiling)
    with pytest.raises(Compiled):
        main(["train", *argv, "--log-dir", str(tmp_path), "--run-name", name])
    return json.loads((tmp_path / name / "config.json").read_text())


def test_a_config_file_sets_hyperparameters_and_flags_override_it(tmp_path, monkeypatch):
    path = tmp_path / "ppo.yaml"
    path.write_text("learning_rate: 1e-3\nhidden_sizes: [32, 32]\nn_steps: 16\n")
    argv = ["PPO", "--env", "CartPole-v1", "--config", str(path), "--n-steps", "32"]
    config = _config_of(argv, tmp_path, monkeypatch, "yaml")
    hyperparameters = config["hyperparameters"]
    # 1e-3 is text to YAML 1.1: read as the float the field holds.
    assert hyperparameters["learning_rate"] == 1e-3
    assert hyperparameters["hidden_sizes"] == [32, 32] and hyperparameters["n_steps"] == 32
    json_path = tmp_path / "ppo.json"
    json_path.write_text('{"gamma": 0.98}')
    argv = ["PPO", "--env", "CartPole-v1", "--config", str(json_path)]
    assert _config_of(argv, tmp_path, monkeypatch, "json")["hyperparameters"]["gamma"] == 0.98


def test_a_runs_own_config_repeats_the_run(tmp_path, monkeypatch):
    argv = ["PPO", "--env", "CartPole-v1", "--env-param", "max_steps_in_episode=100"]
    argv += ["--n-envs", "2", "--seeds", "3", "--seed-start", "4", "--n-timesteps", "512"]
    argv += ["--log-frequency", "128", "--num-episode-test", "3", "--gamma", "0.95"]
    argv += ["--tensorboard", "--checkpoint-every", "2", "--checkpoint-keep", "3"]
    first = _config_of(argv, tmp_path, monkeypatch, "first")
    again = ["--config", str(tmp_path / "first" / "config.json")]
    second = _config_of(again, tmp_path, monkeypatch, "second")
    differing = {k for k in first if first[k] != second[k]}
    assert differing == {"logging", "log_dir", "checkpoint"}
    assert first["logging"] | {"run_name": "second"} == second["logging"]
    assert second["logging"]["tensorboard"] and not second["logging"]["wandb"]
    dir_of = {"dir": str(tmp_path / "second" / "checkpoints")}
    assert first["checkpoint"] | dir_of == second["checkpoint"] == {"every": 2, "keep": 3} | dir_of
    # Flags still override it.
    third = _config_of([*again, "--gamma", "0.9"], tmp_path, monkeypatch, "third")
    assert third["hyperparameters"]["gamma"] == 0.9 and third["seeds"] == [4, 5, 6]


@pytest.mark.parametrize(
    ("text", "argv", "message"),
    [
        (
            "learning_rat: 0.001",
            ["PPO"],
            "'learning_rat' is not a hyperparameter of PPO; did you mean learning_rate?",
        ),
        (
            "gamma: 0.9",
            [],
            "Name the agent CONFIG sets hyperparameters for, e.g. ajax train PPO --config CONFIG.",
        ),
        (
            "- 1\n- 2",
            ["PPO"],
            "CONFIG must hold a mapping of hyperparameter names to values, got list.",
        ),
        ("gamma: [", ["PPO"], "CONFIG is not valid YAML"),
        (
            "n_timesteps: 2048",
            ["PPO"],
            "CONFIG: 'n_timesteps' is a setting of the run, not a hyperparameter of PPO: give "
            "it as --n-timesteps",
        ),
        (
            "learning_rate: fast",
            ["PPO"],
            "CONFIG: learning_rate takes a float like its default, 0.00025, not the text 'fast'.",
        ),
    ],
    ids=["unknown-name", "no-agent", "not-a-mapping", "bad-yaml", "run-setting", "text"],
)
def test_a_bad_config_file_is_refused_before_anything_runs(text, argv, message, tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    assert main(["train", *argv, "--env", "CartPole-v1", "--config", str(path)]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert message.replace("CONFIG", str(path)) in out
