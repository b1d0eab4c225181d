"""One run across processes (``ajax.distributed``): two processes on localhost, one CPU
device each, run four seeds as one process does; process 0 alone writes the run directory
and its checkpoints, which a single process resumes exactly."""

import os
import shutil
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

import ajax
from ajax import PPO, LoggingConfig
from ajax.cli import REFUSED, main

#: Two PPO iterations on CartPole for each of four seeds, evaluated after each.
RUN = ["--env", "CartPole-v1", "--seeds", "4", "--n-envs", "4", "--n-timesteps", "4096"]
RUN += ["--log-frequency", "2048", "--num-episode-test", "2", "--checkpoint-every", "1"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def two_process_run(log_dir, extra=((), ())) -> tuple[list[int], list[str]]:
    """``ajax train`` across two processes into ``log_dir/multi``, process ``i`` given the
    flags ``extra[i]`` too; each process's exit status and output."""
    coordinator = f"localhost:{free_port()}"
    argv = [sys.executable, "-m", "ajax.cli", "train", "PPO", *RUN, "--log-dir", str(log_dir)]
    argv += ["--run-name", "multi", "--coordinator", coordinator, "--num-processes", "2"]
    processes = [
        subprocess.Popen(
            [*argv, *extra[i], "--process-id", str(i)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=os.environ | {"AJAX_CPU_DEVICES": "1", "COLUMNS": "200"},
        )
        for i in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=300)[0] for p in processes]
    finally:
        for p in processes:
            p.kill()
    return [p.returncode for p in processes], outputs


def assert_same_run(result, reference):
    """As the determinism test asks of a seed in a batch and alone."""
    np.testing.assert_array_equal(
        result.evaluations["episode_return"], reference.evaluations["episode_return"]
    )
    for a, b in zip(jax.tree.leaves(result.state), jax.tree.leaves(reference.state), strict=True):
        b = np.asarray(b)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-2 * max(np.abs(b).max(), 1e-6))


@pytest.mark.slow
def test_two_processes_run_as_one(tmp_path):
    codes, outputs = two_process_run(tmp_path)
    assert codes == [0, 0], outputs
    # The same run in this one process: two CPU devices, two seeds on each.
    alone = PPO(env_id="CartPole-v1", n_envs=4).train(
        seed=[0, 1, 2, 3],
        n_timesteps=4096,
        num_episode_test=2,
        logging_config=LoggingConfig(2048, log_dir=tmp_path / "one"),
    )
    run_dir = tmp_path / "multi"
    assert "of 2 processes (this is process 0)" in outputs[0]
    assert "Joining a run of 2 processes at localhost:" in outputs[1]
    assert "process 1 finished; process 0 wrote the run directory" in outputs[1]
    assert "mean over seeds" not in outputs[1]  # the summary is process 0's
    assert_same_run(ajax.load(run_dir / "result"), alone)
    rows = (run_dir / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 4  # a header, then two evaluations of four seeds, once each
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["1", "2"]
    # Process 0's checkpoint after the first segment continues the run in one process.
    shutil.rmtree(run_dir / "checkpoints" / "2")
    assert_same_run(ajax.resume(run_dir), alone)


@pytest.mark.slow
def test_processes_given_different_runs_are_refused_before_compiling(tmp_path):
    """A budget and a discount given to one process only: every process refuses the run,
    naming both, where a collective called by one alone failed in the transport or hung."""
    codes, outputs = two_process_run(tmp_path, ((), ("--n-timesteps", "6144", "--gamma", "0.9")))
    assert codes == [REFUSED, REFUSED], outputs
    for out in outputs:
        assert "were given different hyperparameters, n_timesteps: start every" in out, out
    assert not (tmp_path / "multi").exists()  # refused before the run directory


def test_a_process_whose_run_is_never_joined_says_why_before_jax_stops_it():
    """Process 0 of two, alone: JAX aborts it at the deadline, blaming "another task" that
    died; before that, Ajax names the run not joined and how to start its processes."""
    code = (
        "import ajax.distributed as d; "
        f"d.initialize('localhost:{free_port()}', num_processes=2, process_id=0, timeout_s=4)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"JAX_PLATFORMS": "cpu"},
    )
    assert done.returncode != 0
    err = " ".join(done.stderr.split())
    assert "process 0 of a run of 2 processes has waited nearly 4 s" in err, err
    assert "--num-processes 2, each with its own --process-id (0 to 1" in err


def test_bad_process_flags_are_refused(capsys):
    with pytest.raises(ValueError, match="HOST:PORT"):
        ajax.distributed.initialize("localhost", 2, 0)
    with pytest.raises(ValueError, match="number them 0 to 1"):
        ajax.distributed.initialize("localhost:7777", 2, 2)
    with pytest.raises(ValueError, match="num_processes must be an integer"):
        ajax.distributed.initialize("localhost:7777", 2.0, 0)
    argv = ["train", "PPO", "--env", "CartPole-v1", "--num-processes", "2", "--process-id", "1"]
    assert main(argv) == REFUSED
    assert "need --coordinator HOST:PORT" in capsys.readouterr().out
