"""Seeds sharded over devices: how many devices a run splits its seeds over, the CPU devices
``import ajax`` makes, and a sharded run against the same run on one device."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from ajax import PPO, LoggingConfig, _devices, evaluate, loop
from ajax._xla import compiler_options
from ajax.run import lowering


@pytest.mark.parametrize(
    "n_seeds, n_devices, used, share",
    [
        (8, 2, 2, 4),
        (4, 2, 2, 2),
        (3, 2, 2, 2),  # a copy of the first seed fills the second device's second place
        (1, 2, 1, 1),
        (6, 4, 3, 2),
        (5, 4, 3, 2),  # 2 seeds each on 3 devices, not 2 on 2 and 1 on 1: as fast, fewer copies
        (10, 4, 4, 3),
        (7, 8, 7, 1),
        (5, 1, 1, 5),
    ],
)
def test_each_device_runs_as_few_seeds_as_any_split_allows(n_seeds, n_devices, used, share):
    assert _devices.seed_split(n_seeds, n_devices) == (used, share)


def test_one_cpu_device_per_usable_core_unless_asked(monkeypatch):
    monkeypatch.delenv(_devices.CPU_DEVICES_ENV, raising=False)
    assert _devices.requested_cpu_devices() == _devices.usable_cores()
    monkeypatch.setenv(_devices.CPU_DEVICES_ENV, "3")
    assert _devices.requested_cpu_devices() == 3
    for wrong in ("0", "two", "-1"):
        monkeypatch.setenv(_devices.CPU_DEVICES_ENV, wrong)
        with pytest.raises(ValueError, match=r"AJAX_CPU_DEVICES=.* is not a positive whole"):
            _devices.requested_cpu_devices()


def devices_after_import(before: str = "", **env: str) -> dict:
    """The CPU devices a fresh interpreter has after ``before`` (code), then ``import ajax``."""
    code = f"{before}\nimport json, jax, ajax\nprint(json.dumps({{'n': len(jax.devices())}}))"
    environment = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "AJAX_NO_COMPILE_CACHE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment | env,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_import_makes_the_cpu_devices_asked_for_and_leaves_a_users_choice():
    # This process imported ajax under conftest's AJAX_CPU_DEVICES=2.
    assert len(jax.devices()) == 2
    assert devices_after_import(AJAX_CPU_DEVICES="3") == {"n": 3}
    # XLA's own flag is the user's choice, and is kept.
    flags = "--xla_force_host_platform_device_count=1"
    assert devices_after_import(AJAX_CPU_DEVICES="3", XLA_FLAGS=flags) == {"n": 1}
    # Once JAX runs an operation its device count is fixed: the import neither fails nor
    # changes it.
    before = "import jax.numpy as jnp; jnp.zeros(1).block_until_ready()"
    assert devices_after_import(before, AJAX_CPU_DEVICES="3") == {"n": 1}


@pytest.mark.slow  # two fresh processes, each compiling a run
@pytest.mark.parametrize("gymnax_first", [False, True])
def test_a_run_after_jax_started_warns_once_that_its_seeds_share_one_device(gymnax_first):
    """gymnax runs a JAX operation as it is imported, so imported before ajax it leaves JAX
    one CPU device; a run of several seeds then says so, once, with the fix."""
    before = "import gymnax" if gymnax_first else ""
    code = (
        f"{before}\nimport json, warnings, jax, ajax\nwarnings.simplefilter('default')\n"
        "agent = ajax.PPO(env_id='CartPole-v1', n_envs=2, n_steps=8, n_minibatches=2)\n"
        "for _ in range(2):\n    agent.train(seed=[0, 1, 2, 3], n_timesteps=16)\n"
        "agent.train(seed=0, n_timesteps=16)\n"
        "print(json.dumps({'n': len(jax.devices())}))"
    )
    # The tests' compile cache (conftest), so that a rerun compiles nothing.
    environment = {"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "AJAX_CPU_DEVICES": "2"}
    environment["AJAX_JAX_COMPILE_CACHE_DIR"] = os.environ["AJAX_JAX_COMPILE_CACHE_DIR"]
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=environment
    )
    assert proc.returncode == 0, proc.stderr
    devices = json.loads(proc.stdout.strip().splitlines()[-1])["n"]
    warned = proc.stderr.count("on one CPU device, not 2")
    assert (devices, warned) == ((1, 1) if gymnax_first else (2, 0)), proc.stderr
    if gymnax_first:
        assert "Import ajax before anything that uses JAX" in proc.stderr


@pytest.fixture(scope="module")
def sharded_and_not(tmp_path_factory):
    """PPO over three seeds split over the two devices (two places each, the last a copy of
    the first seed), and the same run on one device."""
    agent = PPO(env_id="CartPole-v1", n_envs=4, n_steps=32)
    shardings = []

    def run():
        config = LoggingConfig(log_frequency=2048, log_dir=tmp_path_factory.mktemp("runs"))
        return agent.train(seed=[0, 1, 2], n_timesteps=4096, logging_config=config)

    lower_run = loop.lower_run

    def lowered(*args, **kwargs):
        programs = lower_run(*args, **kwargs)
        # With the run's options, so that the run's own compile finds it in the cache.
        compiled = programs.segment.compile(compiler_options(agent))
        shardings.append(jax.tree.leaves(compiled.input_shardings[0][0])[0])
        return programs

    loop.lower_run = lowered
    try:
        sharded = run()
        mesh = lowering.seed_mesh
        lowering.seed_mesh = lambda n_seeds: (None, n_seeds)
        try:
            alone = run()
        finally:
            lowering.seed_mesh = mesh
    finally:
        loop.lower_run = lower_run
    return sharded, alone, shardings


def test_a_run_of_three_seeds_runs_two_on_each_device(sharded_and_not):
    sharded, alone, (split, whole) = sharded_and_not
    # The state's seed axis is split over both devices, not copied to each.
    assert len(split.device_set) == 2 and not split.is_fully_replicated
    assert len(whole.device_set) == 1
    for result in (sharded, alone):
        assert result.seeds == [0, 1, 2]
        assert {x.shape[0] for x in jax.tree.leaves(result.state)} == {3}
        assert result.evaluations["episode_return"].shape == (3, 2)


def test_a_sharded_run_runs_each_seed_as_on_one_device(sharded_and_not):
    sharded, alone, _ = sharded_and_not
    np.testing.assert_array_equal(
        sharded.evaluations["episode_return"], alone.evaluations["episode_return"]
    )
    for key in ("train/episode_return", "train/episode_length"):
        np.testing.assert_array_equal(sharded.train_metrics[key], alone.train_metrics[key])
    # As for a seed alone and in a batch (test_determinism.py), the parameters agree up to
    # float rounding: the device's program is compiled apart from the one-device program.
    for a, b in zip(jax.tree.leaves(sharded.state), jax.tree.leaves(alone.state), strict=True):
        a, b = np.asarray(a), np.asarray(b)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-2 * max(np.abs(b).max(), 1e-6))


def test_a_sharded_result_evaluates_and_acts_as_one_on_one_device(sharded_and_not):
    sharded, alone, _ = sharded_and_not
    np.testing.assert_array_equal(evaluate(sharded, 3, seed=1), evaluate(alone, 3, seed=1))
    obs = np.zeros((3, 4), np.float32)
    np.testing.assert_array_equal(sharded.act(obs), alone.act(obs))
