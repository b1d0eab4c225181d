"""Checkpoints and exact resume: a resumed run ends where the uninterrupted one does, bit for
bit, with the same logged rows, each once."""

import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import jax
import numpy as np
import pytest

import ajax
from ajax import DQN, PPO, SAC, UDRL, CheckpointConfig, LoggingConfig
from ajax.cli import main

from .interrupts import interrupting_call
from .tensorboard_reader import read_scalars

#: On the tests' two devices: two places each, the last a copy of the first seed, which a
#: checkpoint leaves out and a resume puts back.
SEEDS = [0, 1, 2]
#: Ten segments of two PPO iterations each.
STEPS, FREQUENCY = 640, 64


def small_ppo():
    return PPO(env_id="CartPole-v1", n_envs=2, n_steps=16)


def crash_after(steps):
    """A progress callback that fails once the run has done ``steps``: a crash mid-run."""

    def crash(done, total, means):
        if done == steps:
            raise RuntimeError("the machine went away")

    return crash


def crash_after_seven_segments(config):
    """The small PPO run, checkpointed every 2 segments (the last 2 kept), crashing after 7."""
    with pytest.raises(RuntimeError, match="went away"):
        small_ppo().train(
            seed=SEEDS,
            n_timesteps=STEPS,
            logging_config=config,
            checkpoint=CheckpointConfig(every=2, keep=2),
            progress=crash_after(7 * FREQUENCY),
        )


def rows_of(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


def assert_same_run(resumed, reference, row_keys=("timestep", "seed")):
    """The final states are bitwise equal, and so are the evaluations and the logged rows
    (each ``row_keys`` once)."""
    for got, want in zip(
        jax.tree.leaves(resumed.state), jax.tree.leaves(reference.state), strict=True
    ):
        assert np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    for key, want in reference.evaluations.items():
        np.testing.assert_array_equal(resumed.evaluations[key], want)
    got, want = rows_of(resumed.log_dir), rows_of(reference.log_dir)
    assert len({tuple(r[k] for k in row_keys) for r in got}) == len(got)
    assert got == want


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run the resumed ones must reproduce."""
    config = LoggingConfig(
        log_frequency=FREQUENCY, log_dir=tmp_path_factory.mktemp("runs"), run_name="whole"
    )
    return small_ppo().train(seed=SEEDS, n_timesteps=STEPS, logging_config=config)


def test_a_run_that_crashed_resumes_exactly_from_its_latest_checkpoint(tmp_path, reference):
    """A crash after 7 segments (an error in the progress callback) with checkpoints every 2
    and the last 2 kept: the run resumes from segment 6 and ends as the uninterrupted one."""
    config = LoggingConfig(
        log_frequency=FREQUENCY, log_dir=tmp_path, run_name="crashed", tensorboard=True
    )

    crash_after_seven_segments(config)
    checkpoints = tmp_path / "crashed" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir() if p.name.isdigit()) == ["4", "6"]
    assert len(rows_of(tmp_path / "crashed")) == 7 * len(SEEDS)

    # tensorboardX names an event file by the second it opens: a resume within the same
    # second would overwrite the crashed run's file, rather than add one as a later one does.
    time.sleep(1.1)
    seen = []
    resumed = ajax.resume(tmp_path / "crashed", progress=lambda done, *_: seen.append(done))
    assert seen == [FREQUENCY * k for k in range(7, 11)]
    assert resumed.log_dir == str(tmp_path / "crashed")
    assert_same_run(resumed, reference)
    # Its timings cover the steps it ran, not those before the checkpoint.
    assert reference.timings["timesteps_run"] == STEPS
    assert resumed.timings["timesteps_run"] == STEPS - 6 * FREQUENCY
    # TensorBoard drops the interrupted run's events from the replayed rows on.
    for i, seed in enumerate(SEEDS):
        scalars = read_scalars(tmp_path / "crashed" / "tensorboard" / f"seed_{seed}")
        want = reference.evaluations["episode_return"][i]
        assert [t for t, _ in scalars["episode_return"]] == [FREQUENCY * k for k in range(1, 11)]
        np.testing.assert_allclose([v for _, v in scalars["episode_return"]], want, rtol=1e-6)
    # The checkpoint directory resumes too, and a finished run resumes to its result at once.
    again = ajax.resume(checkpoints)
    assert_same_run(again, reference)
    assert again.timings["timesteps_run"] == 0


def test_a_moved_run_directory_resumes_where_it_now_is(tmp_path, reference):
    """A run directory moved elsewhere (another disk, another machine) after a crash resumes
    there: its logs, checkpoints and result, not in the directory it was trained in."""
    config = LoggingConfig(log_frequency=FREQUENCY, log_dir=tmp_path / "before", run_name="run")
    crash_after_seven_segments(config)
    shutil.move(tmp_path / "before", tmp_path / "after")
    resumed = ajax.resume(tmp_path / "after" / "run")
    assert resumed.log_dir == str(tmp_path / "after" / "run")
    assert not (tmp_path / "before").exists()
    checkpoints = tmp_path / "after" / "run" / "checkpoints"
    assert sorted(int(p.name) for p in checkpoints.iterdir() if p.name.isdigit()) == [8, 10]
    assert_same_run(resumed, reference)


def test_an_interrupt_finishes_the_segment_in_flight_and_checkpoints_it(
    tmp_path, reference, monkeypatch
):
    """Ctrl-C during segment 4 (with checkpoints every 3): the segment finishes, its rows are
    written and it is checkpointed, and the error says how to resume."""
    # The initialisation, then segments 1-4.
    monkeypatch.setattr(ajax.run.host, "call_watched", interrupting_call(5, "SIGTERM"))
    config = LoggingConfig(log_frequency=FREQUENCY, log_dir=tmp_path, run_name="stopped")
    with pytest.raises(ajax.RunInterrupted) as stopped:
        small_ppo().train(
            seed=SEEDS,
            n_timesteps=STEPS,
            logging_config=config,
            checkpoint=CheckpointConfig(every=3),
        )
    checkpoints = tmp_path / "stopped" / "checkpoints"
    assert f"ajax.resume({str(checkpoints)!r})" in str(stopped.value)
    assert stopped.value.checkpoints == str(checkpoints)
    assert "after 256 of 640 steps" in str(stopped.value)
    assert sorted(p.name for p in checkpoints.iterdir() if p.name.isdigit()) == ["3", "4"]
    monkeypatch.undo()
    assert_same_run(ajax.resume(tmp_path / "stopped"), reference)


def test_an_agent_with_an_acting_carry_resumes_exactly(tmp_path):
    """UDRL acts on a command that each step updates (the return and the horizon left), so
    its copies' carries are mid-episode at a checkpoint: a run crashed after 3 of 5 segments
    and resumed ends as the uninterrupted one. The step size and updates make its policy
    heed the command within the run: a near-uniform one acts alike on any command, and the
    run would end the same with its carries lost (zeroed at the resume, it did)."""

    def train(name, progress=None):
        agent = UDRL(
            env_id="CartPole-v1",
            n_envs=2,
            n_steps=8,
            n_updates=32,
            learning_starts=32,
            learning_rate=1e-2,
        )
        config = LoggingConfig(log_frequency=64, log_dir=tmp_path, run_name=name)
        return agent.train(
            seed=[0, 1],
            n_timesteps=320,
            num_episode_test=2,
            logging_config=config,
            checkpoint=None if progress is None else CheckpointConfig(every=1, keep=1),
            progress=progress,
        )

    reference = train("whole")
    with pytest.raises(RuntimeError, match="went away"):
        train("crashed", crash_after(3 * 64))
    resumed = ajax.resume(tmp_path / "crashed")
    carries = np.asarray(resumed.state.cursor.carry)
    assert carries.shape == (2, 2, 2) and np.all(np.isfinite(carries))
    assert_same_run(resumed, reference)


@pytest.mark.slow  # a grid's three programs
def test_a_sweep_resumes_exactly_and_the_command_line_sends_it_to_python(tmp_path, capsys):
    """A grid's places (configurations times seeds, padded to fill the devices) are
    checkpointed as a run's seeds are: a crashed sweep resumes to the uninterrupted one's
    end. Its result is a grid of runs, which ``ajax train --resume`` cannot save as one."""

    def train(name, **kwargs):
        config = LoggingConfig(log_frequency=FREQUENCY, log_dir=tmp_path, run_name=name)
        return small_ppo().train(
            seed=SEEDS,
            n_timesteps=STEPS,
            logging_config=config,
            sweep={"gamma": [0.9, 0.95, 0.99]},
            **kwargs,
        )

    reference = train("whole")
    with pytest.raises(RuntimeError, match="went away"):
        train("crashed", checkpoint=CheckpointConfig(every=2), progress=crash_after(7 * 64))
    resumed = ajax.resume(tmp_path / "crashed")
    assert resumed.configs == reference.configs
    for got, want in zip(resumed.results, reference.results, strict=True):
        assert_same_run(got, want, row_keys=("timestep", "config", "seed"))
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "crashed")]) == 2
    assert "ajax.resume(" in "".join(capsys.readouterr().out.split())


def test_resume_refuses_another_run_or_another_version(tmp_path, reference, monkeypatch):
    """Also: a run directory leads resume to checkpoints given another dir."""
    config = LoggingConfig(log_frequency=FREQUENCY, log_dir=tmp_path, run_name="r")
    checkpoint = CheckpointConfig(every=5, keep=1, dir=tmp_path / "elsewhere")
    small_ppo().train(seed=SEEDS, n_timesteps=STEPS, logging_config=config, checkpoint=checkpoint)
    run = tmp_path / "r"
    # The run directory leads to checkpoints kept elsewhere.
    assert_same_run(ajax.resume(run), reference)
    # Only the hyperparameter that differs is named (not hidden_sizes, saved as a list).
    with pytest.raises(
        ValueError, match=r"another run \(hyperparameters.gamma: checkpoint 0.99, given 0.9\)"
    ):
        ajax.resume(run, agent=PPO(env_id="CartPole-v1", n_envs=2, n_steps=16, gamma=0.9))
    with pytest.raises(ValueError, match=r"another run \(n_envs: checkpoint 2, given 4"):
        ajax.resume(run, agent=PPO(env_id="CartPole-v1", n_envs=4, n_steps=16))
    monkeypatch.setattr(ajax.loop, "__version__", "9.9.9")
    with pytest.raises(ValueError, match=r"written by Ajax .* this is Ajax 9\.9\.9.*Resume it"):
        ajax.resume(run)
    monkeypatch.undo()
    # The same version with another layout of the state (the format) is refused too.
    monkeypatch.setattr(ajax.loop, "CHECKPOINT_FORMAT", 99)
    with pytest.raises(ValueError, match=r"format 2; this is Ajax .* reads format 99.*format 2\)"):
        ajax.resume(run)
    monkeypatch.undo()
    # A fresh run (in a run directory of its own) into a directory holding checkpoints
    # refuses it, before compiling.
    monkeypatch.setattr(ajax.loop, "lower_run", lambda *a: pytest.fail("compiled"))
    fresh = LoggingConfig(log_frequency=FREQUENCY, log_dir=tmp_path, run_name="fresh")
    with pytest.raises(ValueError, match=r"already holds checkpoints.*ajax\.resume"):
        small_ppo().train(
            seed=SEEDS, n_timesteps=STEPS, logging_config=fresh, checkpoint=checkpoint
        )
    with pytest.raises(FileNotFoundError, match="holds no complete Ajax checkpoint"):
        ajax.resume(tmp_path)


def test_checkpoint_configs_are_checked_before_compiling(tmp_path, monkeypatch):
    monkeypatch.setattr(ajax.loop, "lower_run", lambda *a: pytest.fail("compiled"))
    for bad in ({"every": 0}, {"keep": -1}, {"every": 1.5}, {"keep": True}):
        with pytest.raises(ValueError, match="must be a positive integer"):
            CheckpointConfig(**bad)
    with pytest.raises(ValueError, match="without a logging config the whole run is one segment"):
        small_ppo().train(n_timesteps=STEPS, checkpoint=CheckpointConfig())
    with pytest.raises(TypeError, match=r"ajax\.CheckpointConfig"):
        small_ppo().train(n_timesteps=STEPS, checkpoint={"every": 1})
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    config = LoggingConfig(log_frequency=FREQUENCY, log_dir=tmp_path, run_name="r")
    with pytest.raises(OSError, match=r"Cannot write checkpoints to .*a-file"):
        small_ppo().train(
            n_timesteps=STEPS, logging_config=config, checkpoint=CheckpointConfig(dir=blocker)
        )


def test_a_checkpoint_copies_the_state_once_and_keeps_no_copy_while_the_run_goes_on(tmp_path):
    # A replay buffer of 200,000 transitions over two seeds (split over the CPU's devices):
    # about 21 MB of state, checkpointed after each of four segments. The run gathered the
    # state to the host before the checkpointer copied it (and Orbax copied that), and the
    # gathered copy stayed on the state's arrays while the next segment ran: four copies at
    # once, where the checkpointer's and Orbax's are all a checkpoint needs.
    agent = DQN(env_id="CartPole-v1", buffer_size=200_000, learning_starts=256)

    def run(name):
        config = LoggingConfig(log_frequency=256, log_dir=tmp_path, run_name=name)
        checkpoint = CheckpointConfig(every=1)
        return agent.train(
            seed=[0, 1], n_timesteps=1024, logging_config=config, checkpoint=checkpoint
        )

    run("warm-up")  # what a first run imports and caches stays out of the count
    tracemalloc.start()
    try:
        result = run("counted")
        peak = tracemalloc.get_traced_memory()[1]
        # Not the run's: the interpreter's table of interned strings (pathlib interns a
        # path's parts), which grows by megabytes at once whenever the process has interned
        # enough; the tests before this one in its process decide whether it grows here.
        interning = tracemalloc.Filter(False, pathlib.__file__)
        traces = tracemalloc.take_snapshot().filter_traces([interning]).traces
        held = sum(trace.size for trace in traces)
    finally:
        tracemalloc.stop()
    state_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(result.state))
    assert peak < 2.5 * state_bytes and held < 0.1 * state_bytes, (peak, held, state_bytes)


def test_a_resumed_run_lets_go_of_the_state_it_restored(tmp_path):
    # The same run, its last checkpoint removed so that resuming runs a segment and saves
    # one. The restored arrays were placed on one device, aliased, and resharded into a copy
    # by the first segment, and stayed in host memory for the rest of the run: with a
    # checkpoint's two copies, three times the state, where two are all it needs.
    agent = DQN(env_id="CartPole-v1", buffer_size=200_000, learning_starts=256)
    config = LoggingConfig(log_frequency=256, log_dir=tmp_path, run_name="r")
    checkpoint = CheckpointConfig(every=1, keep=3)
    first = agent.train(seed=[0, 1], n_timesteps=1024, logging_config=config, checkpoint=checkpoint)
    shutil.rmtree(tmp_path / "r" / "checkpoints" / "4")
    tracemalloc.start()
    try:
        resumed = ajax.resume(tmp_path / "r")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    state_bytes = sum(leaf.nbytes for leaf in jax.tree.leaves(resumed.state))
    assert peak < 2.5 * state_bytes, (peak, state_bytes)
    assert_same_run(resumed, first)


#: name: (the agent in the child's source, the same here, log frequency, budget): 40 segments
#: of about 0.2 s, and 60 of about 0.1 s, on the 2-core CI machine.
SAC_SETTINGS = "buffer_size=4000, learning_starts=200, batch_size=32, hidden_sizes=(32, 32)"
KILLED_RUNS = {
    "PPO": (
        "ajax.PPO(env_id='CartPole-v1', n_envs=4, n_steps=32)",
        lambda: PPO(env_id="CartPole-v1", n_envs=4, n_steps=32),
        4096,
        4096 * 40,
    ),
    "SAC": (
        f"ajax.SAC(env_id='Pendulum-v1', {SAC_SETTINGS})",
        lambda: SAC(
            env_id="Pendulum-v1",
            buffer_size=4000,
            learning_starts=200,
            batch_size=32,
            hidden_sizes=(32, 32),
        ),
        100,
        100 * 60,
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KILLED_RUNS))
def test_a_run_killed_at_a_random_point_resumes_bitwise(tmp_path, name):
    """A run in a fresh process, checkpointing every segment, is killed with SIGKILL at a
    random moment once its third segment is recorded; resumed here, it ends with the final
    state, evaluations and logged rows of the same run uninterrupted."""
    source, build, frequency, steps = KILLED_RUNS[name]
    reference = build().train(
        seed=SEEDS,
        n_timesteps=steps,
        num_episode_test=2,
        logging_config=LoggingConfig(log_frequency=frequency, log_dir=tmp_path, run_name="whole"),
    )
    code = (
        "import ajax\n"
        f"config = ajax.LoggingConfig(log_frequency={frequency}, log_dir={str(tmp_path)!r},\n"
        "    run_name='killed')\n"
        f"{source}.train(seed={SEEDS}, n_timesteps={steps}, num_episode_test=2,\n"
        "    logging_config=config, checkpoint=ajax.CheckpointConfig(every=1, keep=2),\n"
        "    progress=lambda done, total, means: print('recorded', done, flush=True))\n"
        "print('finished', flush=True)\n"
    )
    # The child shares this process's compile cache, so it compiles little.
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    recorded = 0
    for line in proc.stdout:
        recorded += line.startswith("recorded")
        if recorded == 3:
            break
    assert recorded == 3, "the child ended before recording 3 segments"
    delay = random.uniform(0.0, 1.0)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    rest = proc.stdout.read()
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert "finished" not in rest, f"the run ended before the kill ({delay:.2f} s after)"
    resumed = ajax.resume(tmp_path / "killed")
    assert_same_run(resumed, reference)
