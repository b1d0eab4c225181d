"""Every environment family on every path a user takes: a run of three seeds sharded over
two devices (one place padded), evaluated, saved and loaded in a fresh process, checkpointed
and resumed, and trained from the command line. The cells are in ``tests/families.py``."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import ajax
from ajax import CheckpointConfig, LoggingConfig

from .families import CELLS, LOG_FREQUENCY, N_TIMESTEPS, NUM_EPISODE_TEST, SEEDS, behaviour

ROOT = Path(__file__).resolve().parent.parent


def assert_same_state(got, want):
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def run(args: list[str]) -> subprocess.CompletedProcess:
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.mark.slow  # eight families, each a run, a fresh process and a command-line run
@pytest.mark.parametrize("cell", CELLS, ids=lambda cell: cell.name)
def test_a_family_trains_evaluates_saves_resumes_and_runs_from_the_command_line(cell, tmp_path):
    assert jax.local_device_count() == 2  # conftest: the seeds are sharded, one place padded
    result = cell.agent().train(
        seed=SEEDS,
        n_timesteps=N_TIMESTEPS,
        num_episode_test=NUM_EPISODE_TEST,
        logging_config=LoggingConfig(
            log_frequency=LOG_FREQUENCY, log_dir=tmp_path, run_name="python"
        ),
        checkpoint=CheckpointConfig(every=1, keep=2),
    )
    assert {leaf.shape[0] for leaf in jax.tree.leaves(result.state)} == {len(SEEDS)}
    assert result.evaluations["episode_return"].shape == (len(SEEDS), 2)
    assert np.isfinite(result.evaluations["episode_return"]).all()
    original = behaviour(result)
    assert np.isfinite(original["returns"]).all()

    saved = result.save(tmp_path / "saved")
    fresh = tmp_path / "fresh.json"
    run([sys.executable, "-m", "tests.families", cell.name, str(saved), str(fresh)])
    assert json.loads(fresh.read_text()) == original

    # The first of the two checkpoints continues to the same final state.
    run_dir = Path(result.log_dir)
    shutil.rmtree(run_dir / "checkpoints" / "2")
    env = None if cell.own is None else cell.env()
    if env is not None:
        with pytest.raises(ValueError, match=r"environment object.*ajax\.resume\(.*env=\.\.\.\)"):
            ajax.resume(run_dir)
    assert_same_state(ajax.resume(run_dir, env=env).state, result.state)

    if cell.own is not None:
        return  # the command line takes registered ids
    ajax_command = str(Path(sys.executable).parent / "ajax")
    cli_run = tmp_path / "cli"
    run([ajax_command, "train", *cell.cli_args(), "--log-dir", str(tmp_path), "--run-name", "cli"])
    assert_same_state(ajax.load(cli_run / "result").state, result.state)
