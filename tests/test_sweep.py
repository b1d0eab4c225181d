"""``ajax sweep``: search spaces checked before anything compiles, a study on SQLite, two
workers sharing one study on a real PostgreSQL server, and a worker killed mid-trial."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

import ajax
from ajax import PPO
from ajax.cli import main
from ajax.studies import StudySpec, check_spec, grids, read_space, storage

ROOT = Path(__file__).resolve().parents[1]
#: A trial of two PPO iterations on CartPole: two seeds, evaluated after each iteration.
TRIAL = ["--env", "CartPole-v1", "--seeds", "2", "--n-timesteps", "1024", "--log-frequency", "512"]
SPACE = {
    "learning_rate": {"low": 1e-4, "high": 1e-2, "log": True},
    "ent_coef": {"low": 0.0, "high": 0.02},
}


def write_space(tmp_path, space=SPACE) -> str:
    path = tmp_path / "space.json"
    path.write_text(json.dumps(space))
    return str(path)


def trials(url: str, name: str) -> list:
    return optuna.load_study(study_name=name, storage=url).get_trials(deepcopy=False)


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"learning_rte": {"low": 1e-4, "high": 1e-3}}, "did you mean learning_rate"),
        ({"n_steps": {"low": 64.0, "high": 256.5}}, "whole number"),
        ({"gamma": {"low": 0.9, "high": 1.5}}, "gamma=1.5 is out of range"),
        ({"learning_rate": {"low": 0.0, "high": 1e-3, "log": True}}, "low must be > 0"),
        ({"learning_rate": {"low": 1e-3, "high": 1e-4}}, "low < high"),
        ({"anneal_lr": {"low": 0, "high": 1}}, "search it with {choices"),
        ({"gamma": [0.9, 0.99]}, "gamma needs {low: ..., high: ...}"),
        ({"learning_rate": {"low": 1e-4, "high": 1e-3, "logg": True}}, "unknown keys"),
    ],
)
def test_a_bad_space_is_refused_naming_the_fix(space, message):
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("(", r"\(")):
        read_space(space, PPO)


def test_a_space_file_or_storage_that_cannot_be_read_is_refused_in_one_line(tmp_path, capsys):
    bad = tmp_path / "space.yaml"
    bad.write_text("learning_rate: {low: 1e-4, high: [\n")
    with pytest.raises(ValueError, match=rf"{bad} is not valid YAML"):
        read_space(bad, PPO)
    for url, reason in [
        ("postgres://x", "Can't load plugin"),
        (f"sqlite:///{tmp_path}/missing/dir/s.db", "unable to open database file"),
    ]:
        with pytest.raises(ValueError, match=rf"Cannot open the study storage .*{reason}"):
            storage(url)
    # Showing a study of a database file that does not exist creates none.
    none = tmp_path / "none.db"
    assert main(["sweep", "--show", "--storage", f"sqlite:///{none}", "--study", "s"]) == 2
    assert f"No study storage at {none} (" in capsys.readouterr().out
    assert not none.exists()
    argv = ["sweep", "PPO", *TRIAL, "--space", str(bad), "--storage", f"sqlite:///{none}"]
    assert main(argv) == 2 and "is not valid YAML" in capsys.readouterr().out
    # Evaluation flags are refused in their own words, before the study is opened.
    good = tmp_path / "good.yaml"
    good.write_text("learning_rate: {low: 1e-4, high: 1e-3}\n")
    argv[argv.index(str(bad))] = str(good)
    for flag in ("--log-frequency", "--num-episode-test"):
        assert main([*argv, flag, "0"]) == 2
        assert capsys.readouterr().out.strip() == f"{flag} must be positive."
    assert not none.exists()


def test_a_space_is_read_with_yaml_numbers_and_layer_choices(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text(
        "learning_rate: {low: 1e-4, high: 1e-2, log: true}\n"
        "n_epochs: {low: 1, high: 8}\n"
        "hidden_sizes: {choices: [[64, 64], [128]]}\n"
    )
    space = read_space(path, PPO)
    assert space["learning_rate"] == {"low": 1e-4, "high": 1e-2, "log": True}
    assert space["n_epochs"] == {"low": 1, "high": 8, "log": False}
    assert space["hidden_sizes"] == {"choices": [[64, 64], [128]]}


def test_a_study_whose_trials_cannot_build_is_refused_before_compiling(tmp_path):
    spec = StudySpec(
        "PPO", "CartPole-v1", read_space({"activation": {"choices": ["tanh", "nope"]}}, PPO)
    )
    with pytest.raises(ValueError, match="nope"):
        check_spec(spec)
    both = StudySpec("PPO", "CartPole-v1", read_space(SPACE, PPO), fixed={"ent_coef": 0.0})
    with pytest.raises(ValueError, match="ent_coef is both fixed"):
        check_spec(both)
    # The command line refuses the same, with exit status 2 and no run directory.
    space = write_space(tmp_path, {"gamma": {"low": 0.9, "high": 2.0}})
    url = f"sqlite:///{tmp_path / 's.db'}"
    argv = ["sweep", "PPO", *TRIAL, "--space", space, "--storage", url, "--log-dir", str(tmp_path)]
    assert main(argv) == 2
    assert not (tmp_path / "PPO_CartPole-v1").exists()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"log_frequency": 0}, "log_frequency must be a positive"),
        ({"num_episode_test": 0}, "num_episode_test must be a positive"),
        ({"seeds": 0}, "seeds must be a positive"),
        # The searched rollout's long end makes an iteration of 4 x 512 steps.
        ({"n_timesteps": 1024}, "less than one iteration of PPO, which takes 2048"),
    ],
)
def test_a_study_whose_run_settings_every_trial_fails_on_is_refused(settings, message):
    """Settings no trial can run with are refused once, before the study opens: as trials
    each would fail at once and be replaced, a worker looping without end."""
    space = read_space({"n_steps": {"low": 16, "high": 512}}, PPO)
    spec = StudySpec("PPO", "CartPole-v1", space, **({"n_timesteps": 4096} | settings))
    with pytest.raises(ValueError, match=message):
        check_spec(spec)


def test_a_worker_whose_trials_keep_failing_stops(tmp_path, monkeypatch, capsys):
    """Failed trials are replaced; a failure every trial meets stops the worker once its
    last max(n_trials, 5) trials failed, naming the error, with exit status 1."""
    from ajax import studies

    def failing(spec, params, directories):
        return [MemoryError("this machine cannot hold the run")] * len(params), len(params)

    monkeypatch.setattr(studies, "train_trials", failing)
    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    argv = ["sweep", "PPO", *TRIAL, "--space", write_space(tmp_path), "--storage", url]
    assert main([*argv, "--study", "failing", "--n-trials", "2", "--batch", "3"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "last 5 trials all failed, the last with: this machine cannot hold the run" in out
    # Three rounds of two asked (failed trials do not count): the check is between rounds.
    assert [t.state for t in trials(url, "failing")] == [TrialState.FAIL] * 6
    # --show says why, and that there is nothing to rank or plot.
    assert (
        main(["sweep", "--show", "--storage", url, "--study", "failing", "-o", str(tmp_path)]) == 0
    )
    out = " ".join(capsys.readouterr().out.split())
    assert "6 fail" in out and "the latest failed trial, 5: this machine cannot hold" in out
    assert "no trial has completed yet: no best trials, and no plots" in out


def test_a_study_whose_trial_directory_is_taken_is_refused_before_compiling(
    tmp_path, monkeypatch, capsys
):
    """A new study writing where another study's trial is (the same name, the same log
    directory): refused before any trial compiles, naming --log-dir; the old run kept."""
    from ajax import loop

    def no_compile(*args, **kwargs):
        raise AssertionError("a trial compiled before its directory was found taken")

    monkeypatch.setattr(loop, "lower_run", no_compile)
    taken = tmp_path / "again" / "trial_0000"
    taken.mkdir(parents=True)
    (taken / "config.json").write_text('{"agent": "PPO"}')
    url = f"sqlite:///{tmp_path / 'sweep.db'}"
    argv = ["sweep", "PPO", *TRIAL, "--space", write_space(tmp_path), "--storage", url]
    argv += ["--study", "again", "--n-trials", "1", "--log-dir", str(tmp_path)]
    assert main(argv) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "trial_0000 already holds a run" in out and "ajax sweep --log-dir" in out
    assert (taken / "config.json").read_text() == '{"agent": "PPO"}'


def test_trials_differing_only_in_batchable_values_share_a_grid():
    batchable = PPO.batchable()
    asked = [
        {"learning_rate": 1e-3, "n_epochs": 4},
        {"learning_rate": 3e-4, "n_epochs": 2},
        {"learning_rate": 1e-4, "n_epochs": 4},
        {"learning_rate": 2e-4, "hidden_sizes": (64,)},
    ]
    assert "learning_rate" in batchable and "n_epochs" not in batchable
    assert grids(asked, batchable) == [[0, 2], [1], [3]]


@pytest.mark.slow
def test_a_grid_memory_refuses_runs_its_trials_one_by_one(tmp_path, monkeypatch, capsys):
    check = ajax.run.lowering.check_memory

    def refuse_grids(shape, held, available=None, unit="seeds", **kwargs):
        if unit != "seeds":
            raise MemoryError("a grid this machine cannot hold")
        check(shape, held, available, unit, **kwargs)

    monkeypatch.setattr(ajax.run.lowering, "check_memory", refuse_grids)
    url, name = f"sqlite:///{tmp_path / 'sweep.db'}", "refused"
    argv = [*TRIAL, "--space", write_space(tmp_path), "--storage", url, "--study", name]
    assert main(["sweep", "PPO", *argv, "--n-trials", "2", "--log-dir", str(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # unwrapped
    assert out.count("for 2 trials, one by one") == 2 and "for a grid" not in out, out
    assert [t.state for t in trials(url, name)] == [TrialState.COMPLETE] * 2
    assert sorted(p.name for p in (tmp_path / name).iterdir()) == ["trial_0000", "trial_0001"]


@pytest.mark.slow
def test_a_six_trial_study_on_sqlite(tmp_path, capsys):
    url, name = f"sqlite:///{tmp_path / 'sweep.db'}", "ppo_cp"
    argv = [*TRIAL, "--space", write_space(tmp_path), "--storage", url, "--study", name]
    assert main(["sweep", "PPO", *argv, "--n-trials", "6", "--log-dir", str(tmp_path)]) == 0
    # Both hyperparameters are batchable: the worker asks 4 trials, trains them as one grid,
    # then the last 2 as another.
    out = " ".join(capsys.readouterr().out.split())  # unwrapped
    assert out.count("for a grid of 4") == 4 and out.count("for a grid of 2") == 2, out
    done = trials(url, name)
    assert [t.state for t in done] == [TrialState.COMPLETE] * 6
    # The grids' own directories are split into the trials' and removed.
    assert sorted(p.name for p in (tmp_path / name).iterdir()) == [
        f"trial_{n:04d}" for n in range(6)
    ]
    for t in done:
        # Each trial's directory holds its config, metrics and result, as a run of its own;
        # its value is the mean of its two seeds' final evaluations (the IQM from five).
        run_dir = Path(t.user_attrs["run_dir"])
        assert run_dir == (tmp_path / name / f"trial_{t.number:04d}").absolute()
        config = json.loads((run_dir / "config.json").read_text())
        assert "sweep" not in config and config["log_dir"] == str(run_dir)
        assert config["hyperparameters"]["learning_rate"] == pytest.approx(
            t.params["learning_rate"]
        )
        header, *rows = (run_dir / "metrics.csv").read_text().splitlines()
        assert "config" not in header.split(",") and len(rows) == 2 * 2  # 2 seeds x 2 evals
        result = ajax.load(run_dir)
        assert result.agent.config.ent_coef == pytest.approx(t.params["ent_coef"])
        final = np.asarray(result.evaluations["episode_return"])[:, -1]
        assert t.value == pytest.approx(final.mean())
    capsys.readouterr()
    out_dir = tmp_path / "plots"
    assert main(["sweep", "--show", "--storage", url, "--study", name, "-o", str(out_dir)]) == 0
    shown = capsys.readouterr().out
    assert "6 complete" in shown
    best = max(done, key=lambda t: t.value)
    assert f"{best.value:.2f}" in shown
    assert f"trial {best.number}: {best.user_attrs['run_dir']}\n" in shown  # whole, to copy
    assert (out_dir / f"{name}_history.png").stat().st_size > 0
    assert (out_dir / f"{name}_importances.png").stat().st_size > 0
    # Another agent's or space's worker is refused rather than mixed into the study.
    other = write_space(tmp_path, {"gamma": {"low": 0.9, "high": 0.99}})
    argv = ["sweep", "PPO", *TRIAL, "--space", other, "--storage", url, "--study", name]
    assert main(argv) == 2
    assert "runs other settings (space: the study's {" in capsys.readouterr().out


@pytest.fixture(scope="module")
def postgres_url():
    """A PostgreSQL server's URL: CI's (``AJAX_TEST_POSTGRES_URL``, which ``.ci/run``
    starts), else one this module starts and stops with ``.ci/postgres``."""
    url = os.environ.get("AJAX_TEST_POSTGRES_URL")
    if url:
        yield url
        return
    started = subprocess.run([ROOT / ".ci" / "postgres", "start"], capture_output=True, text=True)
    if started.returncode != 0:
        pytest.skip(f"no PostgreSQL server could be started: {started.stderr.strip()}")
    url, directory = started.stdout.split()
    yield url
    subprocess.run([ROOT / ".ci" / "postgres", "stop", directory], check=True)


def worker(argv: list[str], log_dir: Path) -> subprocess.Popen:
    """An ``ajax sweep`` worker in a process of its own."""
    return subprocess.Popen(
        [sys.executable, "-m", "ajax.cli", "sweep", "PPO", *argv, "--log-dir", str(log_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ | {"COLUMNS": "200"},
    )


@pytest.mark.slow
def test_two_workers_share_one_postgresql_study(tmp_path, postgres_url):
    name = f"shared_{os.getpid()}_{time.time_ns()}"
    # Grids of two trials, each long enough (seconds) that one worker cannot run the whole
    # study while the other starts.
    argv = [*TRIAL, "--n-timesteps", "8192", "--space", write_space(tmp_path)]
    argv += ["--storage", postgres_url, "--study", name, "--n-trials", "6", "--batch", "2"]
    workers = [worker(argv, tmp_path / f"w{i}") for i in range(2)]
    outputs = [w.communicate(timeout=600)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    done = trials(postgres_url, name)
    # Every trial recorded once: numbers distinct, all complete, and those the two workers
    # ran are the study's, none lost. Workers that count the study together may each ask a
    # batch of the trials left.
    numbers = sorted(t.number for t in done)
    assert numbers == list(range(len(numbers))) and 6 <= len(numbers) <= 8
    assert all(t.state == TrialState.COMPLETE for t in done)
    ran = sorted(
        int(line.split()[1].rstrip(":"))
        for out in outputs
        for line in out.splitlines()
        if line.startswith("trial ")
    )
    assert ran == numbers
    assert all(any(line.startswith("trial ") for line in out.splitlines()) for out in outputs)
    for t in done:
        assert Path(t.user_attrs["run_dir"], "result").is_dir()


@pytest.mark.slow
def test_a_killed_worker_leaves_its_trials_failed_and_the_study_usable(tmp_path):
    url, name = f"sqlite:///{tmp_path / 'sweep.db'}", "killed"
    # Two trials asked at once, which differ in n_epochs (not batchable) unless drawn alike:
    # one trains while the other waits, and the kill must fail both.
    space = write_space(tmp_path, SPACE | {"n_epochs": {"low": 1, "high": 8}})
    # Trials long enough (seconds of compiling, then of running) to be killed inside one.
    argv = ["--env", "CartPole-v1", "--seeds", "2", "--n-timesteps", "500000"]
    argv += ["--space", space, "--storage", url, "--study", name, "--n-trials", "2"]
    argv += ["--batch", "2"]
    killed = worker([*argv, "--heartbeat-s", "1"], tmp_path)
    deadline, running = time.monotonic() + 300, []
    while not running and time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            running = [t for t in trials(url, name) if t.state == TrialState.RUNNING]
        except KeyError:  # the study is not created yet
            continue
    assert running, "the worker never started its trial"
    time.sleep(2)  # heartbeats recorded
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert [t.state for t in trials(url, name)] == [TrialState.RUNNING] * 2
    # Once the heartbeats are older than their grace (twice 1 s), the next look fails both.
    time.sleep(3)
    optuna.storages.fail_stale_trials(optuna.load_study(study_name=name, storage=storage(url, 1)))
    assert [t.state for t in trials(url, name)] == [TrialState.FAIL] * 2
    # The study goes on: a new worker on it replaces the failed trials.
    assert main(["sweep", "PPO", *argv, "--log-dir", str(tmp_path)]) == 0
    assert [t.state for t in trials(url, name)] == [TrialState.FAIL] * 2 + [TrialState.COMPLETE] * 2
