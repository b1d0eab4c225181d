"""The command line: train with a run directory, list, cache."""

import json

import pytest

from ajax.cli import main


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
    assert (run / "result" / "state.msgpack").exists()
    assert "final eval return" in out and "run directory" in out


@pytest.mark.slow  # two whole runs, through the command line
def test_train_checkpoints_and_resume_continues_the_run(tmp_path, capsys):
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
    assert "finalevalreturn" in out
    assert len((run / "metrics.csv").read_text().splitlines()) == 1 + 4
    assert main(["train", *base[:-1], "32", "--resume", str(run)]) == 2
    assert "anotherrun(hyperparameters" in "".join(capsys.readouterr().out.split())
    assert main(["train", "--resume", str(tmp_path)]) == 2
    assert "holdsnocompleteAjaxcheckpoint" in "".join(capsys.readouterr().out.split())


def test_bad_env_params_fail_with_the_fix(capsys):
    base = ["train", "PPO", "--env", "CartPole-v1", "--n-timesteps", "256"]
    assert main([*base, "--env-param", "max_steps_in_episode"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().out
    assert main([*base, "--env-param", "gravity_on_mars=3.7"]) == 2
    assert "gravity_on_mars" in capsys.readouterr().out


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
    assert str(cache_env) in capsys.readouterr().out
    assert main(["cache", "prune", "--max-bytes", "0"]) == 0
    assert "deleted 1,000 bytes" in capsys.readouterr().out
    assert not (stale / "abc-cache").exists()


def test_a_bad_hang_floor_is_refused_before_training(capsys):
    code = main(
        ["train", "PPO", "--env", "CartPole-v1", "--n-timesteps", "256", "--hang-floor-s", "0"]
    )
    assert code == 2
    assert "floor_s must be a positive number" in capsys.readouterr().out


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


def _failure_line(argv, capsys):
    """The one line ``ajax`` prints for a run that failed on the machine, checking that it
    exits with status 1 and prints no traceback."""
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in captured.out + captured.err
    lines = [
        line
        for line in captured.out.splitlines()
        if line.strip() and not line.startswith("Training")
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
