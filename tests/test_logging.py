"""Logging: a row per seed at every boundary, every sink, and nothing lost on interrupt."""

import csv
import json
import logging
import math
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import ajax
from ajax import PPO, LoggingConfig

from .interrupts import interrupting_call
from .tensorboard_reader import read_scalars


def _csv_rows(path):
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_rows_at_every_boundary_for_every_seed(cartpole_run):
    directory = cartpole_run.log_dir
    seeds = cartpole_run.seeds
    rows = _csv_rows(Path(directory) / "metrics.csv")
    timesteps = sorted({int(r["timestep"]) for r in rows})
    # 200k steps of 512 per iteration: 390 iterations, a boundary every 39 (19,968 steps).
    assert timesteps == [19_968 * k for k in range(1, 11)]
    assert len(rows) == 10 * len(seeds)
    assert {int(r["seed"]) for r in rows} == set(seeds)
    csv_returns = np.array(
        [[float(r["episode_return"]) for r in rows if int(r["seed"]) == s] for s in seeds]
    )
    np.testing.assert_allclose(csv_returns, cartpole_run.evaluations["episode_return"], rtol=1e-6)
    lines = [json.loads(x) for x in (Path(directory) / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == len(rows) and {"train/policy_loss", "train/episode_return"} <= set(
        lines[0]
    )
    config = json.loads((Path(directory) / "config.json").read_text())
    assert config["agent"] == "PPO" and config["seeds"] == seeds


@pytest.fixture(scope="module")
def tiny_agent():
    return PPO(env_id="CartPole-v1", n_envs=2, n_steps=16)


def test_last_partial_segment_is_logged_too(tiny_agent, tmp_path):
    config = LoggingConfig(log_frequency=96, log_dir=tmp_path, run_name="partial")
    result = tiny_agent.train(seed=[0, 1], n_timesteps=224, logging_config=config)
    # 7 iterations of 32 steps, 3 per segment: boundaries at 96 and 192, then the end at 224.
    np.testing.assert_array_equal(result.evaluations["timestep"], [96, 192, 224])
    rows = _csv_rows(tmp_path / "partial" / "metrics.csv")
    assert [int(r["timestep"]) for r in rows] == [96, 96, 192, 192, 224, 224]


def test_interrupted_run_keeps_every_row_it_produced(tiny_agent, tmp_path):
    config = LoggingConfig(log_frequency=32, log_dir=tmp_path, run_name="interrupted")
    seen = []

    def interrupt_after_three(done, total, summary):
        seen.append(done)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tiny_agent.train(
            seed=[0, 1], n_timesteps=320, logging_config=config, progress=interrupt_after_three
        )
    rows = _csv_rows(tmp_path / "interrupted" / "metrics.csv")
    timesteps = [int(r["timestep"]) for r in rows]
    # Every row reported before the interrupt is on disk; the segment that was running then
    # is written too if it had finished.
    assert timesteps in ([32, 32, 64, 64, 96, 96], [32, 32, 64, 64, 96, 96, 128, 128])
    assert all(r["episode_return"] not in ("", "nan") for r in rows)
    jsonl = (tmp_path / "interrupted" / "metrics.jsonl").read_text().splitlines()
    assert len(jsonl) == len(rows)


def test_tensorboard_and_wandb_offline_sinks(tiny_agent, tmp_path, monkeypatch):
    """The W&B run takes its mode from WANDB_MODE where the config leaves it unset."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    config = LoggingConfig(
        log_frequency=64, log_dir=tmp_path, run_name="sinks", tensorboard=True, wandb=True
    )
    tiny_agent.train(seed=[0, 1], n_timesteps=128, logging_config=config)
    scalars = read_scalars(tmp_path / "sinks" / "tensorboard" / "seed_1")
    assert [step for step, _ in scalars["episode_return"]] == [64, 128]
    wandb_runs = list((tmp_path / "sinks" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(wandb_runs) == 1 and wandb_runs[0].stat().st_size > 0


def test_tensorboard_takes_a_nan_without_a_warning_for_it(tmp_path, caplog):
    """Training metrics are NaN through a warm-up: each is written, and none floods the log."""
    from ajax.logging.sinks import TensorBoardSink

    sink = TensorBoardSink(tmp_path)
    with caplog.at_level(logging.WARNING):
        sink.write({"timestep": 10, "seed": 0, "train/critic_loss": float("nan")})
        sink.write({"timestep": 20, "seed": 0, "train/critic_loss": 0.5})
    sink.close()
    assert caplog.records == []
    (first, second) = read_scalars(tmp_path / "seed_0")["train/critic_loss"]
    assert first[0] == 10 and math.isnan(first[1]) and second == (20, 0.5)


def test_a_sweep_saved_apart_keeps_each_curve_and_leaves_its_wandb_run(
    tiny_agent, tmp_path, monkeypatch
):
    """Each configuration's directory gets its TensorBoard curves; the sweep's one W&B run
    cannot be split, so it stays where it was, with the rest of the sweep's files gone."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    config = LoggingConfig(
        log_frequency=64,
        log_dir=tmp_path,
        run_name="grid",
        tensorboard=True,
        wandb=True,
        wandb_mode="offline",
    )
    grid = tiny_agent.train(
        seed=[0, 1], n_timesteps=128, logging_config=config, sweep={"gamma": [0.9, 0.99]}
    )
    grid.save_apart([tmp_path / "low", tmp_path / "high"])
    for c, name in enumerate(["low", "high"]):
        scalars = read_scalars(tmp_path / name / "tensorboard" / "seed_1")
        np.testing.assert_allclose(
            [value for _, value in scalars["episode_return"]],
            grid.result(c).evaluations["episode_return"][1],
            rtol=1e-6,
        )
    assert [p.name for p in (tmp_path / "grid").iterdir()] == ["wandb"]


SWEEP_ROWS = [
    {"timestep": 10, "config": c, "seed": s, "episode_return": 10.0 * c + s}
    for c in (0, 1)
    for s in (0, 1)
]


def test_tensorboard_and_wandb_keep_a_sweeps_configurations_apart(tmp_path, monkeypatch):
    """A sweep's configurations share their seeds: each place is a curve of its own."""
    from ajax.logging import sinks

    tensorboard = sinks.TensorBoardSink(tmp_path)
    for row in SWEEP_ROWS:
        tensorboard.write(row)
    tensorboard.close()
    for c in (0, 1):
        for s in (0, 1):
            scalars = read_scalars(tmp_path / f"config_{c}" / f"seed_{s}")
            assert scalars == {"episode_return": [(10, 10.0 * c + s)]}

    logged = []

    class Run:
        log = logged.append

    class Wandb:
        def init(**kwargs):
            return Run

    monkeypatch.setattr(sinks, "_import_wandb", lambda: Wandb)
    wandb = sinks.WandbSink(tmp_path, "ajax", "offline", "sweep", {})
    for row in SWEEP_ROWS:
        wandb.write(row)
    assert logged == [
        {f"config_{c}/seed_{s}/episode_return": 10.0 * c + s, "timestep": 10}
        for c in (0, 1)
        for s in (0, 1)
    ]


@pytest.fixture
def no_wandb_login(tmp_path, monkeypatch):
    """A machine where W&B finds no API key: none in the environment, .netrc or settings."""
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "netrc").write_text("")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))


class Compiled(Exception):
    pass


def compiling(*args, **kwargs):
    """A stand-in for lower_run: the run got as far as compiling."""
    raise Compiled


def test_an_online_wandb_run_without_a_login_is_refused_before_anything_compiles(
    tiny_agent, tmp_path, monkeypatch, no_wandb_login
):
    from ajax import loop

    monkeypatch.setattr(loop, "lower_run", compiling)
    config = LoggingConfig(log_frequency=64, log_dir=tmp_path / "runs", wandb=True)
    with pytest.raises(ValueError, match=r"no API key.*`wandb login`.*wandb_mode='offline'"):
        tiny_agent.train(n_timesteps=128, logging_config=config)
    assert not (tmp_path / "runs").exists()
    # Offline, by the config or by WANDB_MODE, needs no login: the run goes on to compile.
    with pytest.raises(Compiled):
        tiny_agent.train(n_timesteps=128, logging_config=replace(config, wandb_mode="offline"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    with pytest.raises(Compiled):
        tiny_agent.train(n_timesteps=128, logging_config=config)
    monkeypatch.setenv("WANDB_MODE", "shared-typo")
    with pytest.raises(ValueError, match=r"WANDB_MODE='shared-typo' is not a mode"):
        tiny_agent.train(n_timesteps=128, logging_config=config)


def test_the_command_line_refuses_an_online_wandb_run_without_a_login_in_one_line(
    tmp_path, monkeypatch, capsys, no_wandb_login
):
    from ajax import loop
    from ajax.cli import main

    monkeypatch.setattr(loop, "lower_run", compiling)
    base = ["train", "PPO", "--env", "CartPole-v1", "--n-timesteps", "512"]
    base += ["--log-dir", str(tmp_path / "runs"), "--wandb"]
    assert main(base) == 2
    out = capsys.readouterr().out
    assert "no API key" in out and "--wandb-mode offline" in out and len(out.splitlines()) == 1
    with pytest.raises(Compiled):
        main([*base, "--wandb-mode", "offline"])


@pytest.mark.parametrize("run_name", ["run", None])
def test_an_unwritable_log_dir_fails_before_anything_compiles(tmp_path, monkeypatch, run_name):
    """Named or dated, a run directory that cannot be made is refused with the fix."""
    from ajax import loop

    def no_compile(*args, **kwargs):
        raise AssertionError("the run compiled before finding its log directory unwritable")

    monkeypatch.setattr(loop, "lower_run", no_compile)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    config = LoggingConfig(log_frequency=64, log_dir=blocker, run_name=run_name)
    with pytest.raises(OSError, match=r"Cannot write logs to .*a-file/\S+ .*log_dir you can write"):
        PPO(env_id="CartPole-v1", n_envs=2, n_steps=16).train(
            n_timesteps=128, logging_config=config
        )


def test_runs_started_in_the_same_second_each_claim_their_own_directory(tmp_path, monkeypatch):
    """Without a run name, the dated directory is created as it is chosen, so a second run
    choosing in the same second (a shell loop starting seeds in parallel) takes the next
    suffix rather than the first run's directory; a process that writes nothing claims none."""
    from ajax.logging import run_directory

    monkeypatch.setattr("time.strftime", lambda _: "20261207-120000")
    config = LoggingConfig(log_frequency=64, log_dir=tmp_path)
    first, second = (run_directory(config, "PPO_CartPole-v1") for _ in range(2))
    stamped = "PPO_CartPole-v1_20261207-120000"
    assert [first.name, second.name] == [stamped, f"{stamped}_2"]
    assert first.is_dir() and second.is_dir()
    elsewhere = run_directory(config, "PPO_CartPole-v1", claim=False)
    assert elsewhere.name.endswith("_3") and not elsewhere.exists()


def test_a_new_run_in_a_taken_run_directory_is_refused_before_anything_compiles(
    cartpole_run, monkeypatch
):
    """A fresh run given the directory of a finished one (its run_name again) stops before
    compiling, and every file of the finished run stays as it was."""
    from ajax import loop
    from ajax.logging import RunDirectoryTaken

    def no_compile(*args, **kwargs):
        raise AssertionError("the run compiled before finding its directory taken")

    monkeypatch.setattr(loop, "lower_run", no_compile)
    taken = Path(cartpole_run.log_dir)
    before = {p: p.read_bytes() for p in taken.rglob("*") if p.is_file()}
    config = LoggingConfig(log_frequency=64, log_dir=taken.parent, run_name=taken.name)
    with pytest.raises(RunDirectoryTaken, match=r"already holds a run .*another run_name"):
        PPO(env_id="CartPole-v1", n_envs=2, n_steps=16).train(
            n_timesteps=128, logging_config=config
        )
    assert {p: p.read_bytes() for p in taken.rglob("*") if p.is_file()} == before


def test_a_sink_failing_mid_run_stops_it_and_loses_no_row(tmp_path, monkeypatch):
    """The CSV sink fails from the third row on (a full disk, say): the run stops with an
    error naming the directory and a fallback file, and every row produced is either in
    metrics.jsonl or in that file."""
    from ajax.logging import sinks
    from ajax.logging.writer import LogWriterError

    written = []
    original = sinks.CSVSink.write

    def full_disk(self, row):
        if len(written) >= 2:
            raise OSError(28, "No space left on device")
        written.append(row)
        original(self, row)

    monkeypatch.setattr(sinks.CSVSink, "write", full_disk)
    # The fallback goes under the system's temporary directory: this test's, not /tmp.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "system-tmp"))
    config = LoggingConfig(log_frequency=128, log_dir=tmp_path, run_name="full")
    with pytest.raises(LogWriterError, match="No space left on device") as raised:
        PPO(env_id="CartPole-v1", n_envs=2, n_steps=16).train(
            seed=[0, 1], n_timesteps=1024, logging_config=config
        )
    fallback = raised.value.fallback
    assert fallback is not None and str(fallback) in str(raised.value)
    assert fallback.is_relative_to(tmp_path / "system-tmp")
    kept = [json.loads(line) for line in fallback.read_text().splitlines()]
    logged = [
        json.loads(line) for line in (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()
    ]
    assert kept[0]["timestep"] == 128 * 2 and {r["seed"] for r in kept} == {0, 1}
    steps = sorted({r["timestep"] for r in logged + kept})
    assert steps == list(range(128, steps[-1] + 1, 128)) and len(steps) >= 3


def _interruptible_run(tmp_path, log_frequency: int, seeds: list[int]):
    """A PPO run far longer than any test, in a fresh process that prints ``recorded N``
    after each segment and ``stopped: ...`` (exit 130) when interrupted; its output piped.
    The child gets Python's own Ctrl-C handler, as a script started from a shell does: in
    the full suite the worker that starts it was seen to ignore SIGINT, which a child
    inherits (some library the suite loads; not identified)."""
    import subprocess
    import sys

    code = (
        "import signal, sys, ajax\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        f"config = ajax.LoggingConfig(log_frequency={log_frequency}, "
        f"log_dir={str(tmp_path)!r}, run_name='r')\n"
        "def progress(done, total, means):\n"
        "    print('recorded', done, flush=True)\n"
        "try:\n"
        f"    ajax.PPO(env_id='CartPole-v1', n_envs=2, n_steps=16).train(seed={seeds},\n"
        "        n_timesteps=30_000_000, logging_config=config, progress=progress)\n"
        "except ajax.RunInterrupted as stopped:\n"
        "    print('stopped:', stopped, flush=True)\n"
        "    sys.exit(130)\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "AJAX_NO_COMPILE_CACHE": "1"},
    )


@pytest.mark.slow
@pytest.mark.parametrize("signame, shown", [("SIGTERM", "SIGTERM"), ("SIGINT", "Ctrl-C")])
def test_a_signal_stops_a_run_with_every_recorded_row_written(tmp_path, signame, shown):
    """A run in a fresh process gets SIGTERM (or Ctrl-C's SIGINT) once it has recorded two
    segments: it exits with RunInterrupted naming the run directory, and every row it
    recorded is on disk."""
    import signal
    import time

    proc = _interruptible_run(tmp_path, log_frequency=64, seeds=[0, 1])
    recorded = []
    deadline = time.monotonic() + 240
    while len(recorded) < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("recorded"):
            recorded.append(int(line.split()[1]))
    proc.send_signal(getattr(signal, signame))
    rest, _ = proc.communicate(timeout=120)  # a child that never exits fails here
    assert proc.returncode == 130
    recorded += [int(line.split()[1]) for line in rest.splitlines() if line.startswith("recorded")]
    assert f"stopped: The run was interrupted ({shown})" in rest and str(tmp_path / "r") in rest
    rows = [
        json.loads(line) for line in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
    ]
    assert sorted({r["timestep"] for r in rows}) == recorded
    assert len(rows) == 2 * len(recorded)


@pytest.mark.slow
def test_a_second_ctrl_c_abandons_the_segment_and_the_process_still_exits_cleanly(tmp_path):
    """Two Ctrl-Cs during a segment: the run stops without waiting for it, its rows written,
    and the script's exit waits for the abandoned program rather than abort when it returns
    while the interpreter finalises (status 134, "FATAL: exception not rethrown")."""
    import signal
    import time

    proc = _interruptible_run(tmp_path, log_frequency=300_000, seeds=[0])
    assert proc.stdout.readline().startswith("recorded 300000")
    for _ in range(2):  # both within segment 2
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 130, err
    assert "stopped: The run was interrupted (Ctrl-C) after 300,000" in out
    assert "waiting for the program in flight to finish before exiting" in err
    assert "FATAL" not in err
    rows = (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(row)["timestep"] for row in rows] == [300_000]


def test_an_interrupt_lets_the_segment_in_flight_finish_and_writes_its_rows(
    tmp_path, monkeypatch, capfd
):
    """Ctrl-C during segment 3 of a run without checkpoints: the segment finishes and its
    rows are written before the run stops (XLA cannot stop a program, and one left running
    can abort the interpreter's exit)."""
    # The initialisation, then segments 1-3.
    monkeypatch.setattr(ajax.run.host, "call_watched", interrupting_call(4))
    config = LoggingConfig(log_frequency=64, log_dir=tmp_path, run_name="stopped")
    with pytest.raises(ajax.RunInterrupted, match=r"\(Ctrl-C\) after 192 of 640 steps"):
        PPO(env_id="CartPole-v1", n_envs=2, n_steps=16).train(
            seed=[0, 1], n_timesteps=640, logging_config=config
        )
    rows = _csv_rows(tmp_path / "stopped" / "metrics.csv")
    assert [int(r["timestep"]) for r in rows] == [64, 64, 128, 128, 192, 192]
    assert "Ctrl-C: stopping once segment 3 of 10 (timesteps 128 to 192) finishes" in (
        capfd.readouterr().err
    )


def test_a_ctrl_c_that_native_code_swallows_still_stops_the_run(tmp_path):
    """A KeyboardInterrupt raised inside native code can be cleared there, and the run went
    on to its end (seen once under load). Here the progress callback swallows it, as such
    code would: the run still stops at the end of that segment, with every row written."""
    import os
    import signal
    import time

    def swallow_a_ctrl_c(done, total, means):
        if done == 64:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)  # the handler raises in here
            except KeyboardInterrupt:
                pass

    config = LoggingConfig(log_frequency=64, log_dir=tmp_path, run_name="swallowed")
    # Python's own Ctrl-C handler, which Ajax takes over (the suite's worker may have another).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(ajax.RunInterrupted, match=r"\(Ctrl-C\) after 64 of 640 steps"):
            PPO(env_id="CartPole-v1", n_envs=2, n_steps=16).train(
                seed=[0, 1], n_timesteps=640, logging_config=config, progress=swallow_a_ctrl_c
            )
    finally:
        signal.signal(signal.SIGINT, previous)
    rows = (tmp_path / "swallowed" / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 2
