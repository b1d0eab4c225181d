"""The program cache: a relaunch takes its programs from disk instead of tracing them, gets
the same results, and a key changes with everything that shapes the programs."""

import subprocess
import sys

import jax
import numpy as np
import pytest

import ajax
from ajax import PPO, SAC, LoggingConfig, _program_cache
from ajax.envs import make_env
from ajax.run import lowering

SMALL = {"env_id": "CartPole-v1", "n_envs": 2, "n_steps": 16}


@pytest.fixture
def cache(cache_env):
    """A private cache root (conftest's ``cache_env``), which the program cache shares."""
    cache_env.mkdir(parents=True, exist_ok=True)
    return cache_env


@pytest.fixture
def traces(monkeypatch):
    """How many times a run's segment was traced."""
    count = []
    original = lowering.segment_program

    def counted(*args):
        count.append(1)
        return original(*args)

    monkeypatch.setattr(lowering, "segment_program", counted)
    return count


def entries(cache):
    return sorted(cache.glob("*/programs/*.jaxexport"))


def params_of(result):
    return jax.tree.leaves(result.state.params)


def test_a_relaunch_skips_tracing_and_gets_the_same_run(cache, traces):
    first = PPO(**SMALL).train(seed=[0, 1], n_timesteps=256)
    assert len(traces) == 1 and len(entries(cache)) == 2  # init and segment
    again = PPO(**SMALL).train(seed=[3, 4], n_timesteps=256)
    assert len(traces) == 1, "the second run traced its segment again"
    alone = PPO(**SMALL).train(seed=[3, 4], n_timesteps=256, num_episode_test=3)
    assert len(traces) == 1, "no logging config: num_episode_test compiles nothing"
    PPO(**SMALL).train(seed=[3, 4], n_timesteps=512)
    assert len(traces) == 1, "the segment program does not depend on the budget"
    assert len(entries(cache)) == 3, "the init program does"
    for a, b in zip(params_of(again), params_of(alone), strict=True):
        np.testing.assert_array_equal(a, b)
    assert not all(
        np.array_equal(a, b) for a, b in zip(params_of(first), params_of(again), strict=True)
    )


def test_a_logged_run_from_the_cache_equals_one_without_it(cache, monkeypatch, tmp_path):
    def run():
        logging = LoggingConfig(log_frequency=128, log_dir=tmp_path / "logs")
        return PPO(**SMALL).train(
            seed=[0, 1], n_timesteps=256, num_episode_test=2, logging_config=logging
        )

    run()
    cached = run()
    monkeypatch.setenv("AJAX_NO_COMPILE_CACHE", "1")
    fresh = run()
    for a, b in zip(params_of(cached), params_of(fresh), strict=True):
        np.testing.assert_array_equal(a, b)
    assert cached.evaluations["episode_return"].shape == (2, 2)
    for name in ("timestep", "episode_return", "episode_length"):
        np.testing.assert_array_equal(cached.evaluations[name], fresh.evaluations[name])


def test_the_key_follows_what_shapes_the_programs():
    agent = PPO(**SMALL)
    key = _program_cache.run_key(agent, 2, None)
    assert key == _program_cache.run_key(PPO(**SMALL), 2, None)
    others = [
        _program_cache.run_key(agent, 3, None),
        _program_cache.run_key(agent, 2, 10),
        _program_cache.run_key(PPO(**SMALL, learning_rate=1e-3), 2, None),
        _program_cache.run_key(PPO(**(SMALL | {"n_envs": 3})), 2, None),
        _program_cache.run_key(PPO(**SMALL, env_params={"max_steps_in_episode": 100}), 2, None),
        _program_cache.run_key(SAC(env_id="Pendulum-v1"), 2, None),
        _program_cache.key_with(key, "init", 8),
    ]
    assert len({key, *others}) == len(others) + 1
    assert _program_cache.key_with(key, "init", 8) != _program_cache.key_with(key, "init", 9)


def test_an_agent_of_your_own_is_kept_by_its_source_and_runs_ajax_cannot_vouch_for_are_not():
    class MyPPO(PPO):
        pass

    assert _program_cache.run_key(MyPPO(**SMALL), 1, None) is not None  # this file's source
    typed = {"__name__": "typed_at_a_prompt", "PPO": PPO}
    exec("class TypedPPO(PPO):\n    pass\n", typed)  # no source file to key it by
    assert _program_cache.run_key(typed["TypedPPO"](**SMALL), 1, None) is None
    instance = PPO(env_id=make_env("CartPole-v1"), n_envs=2, n_steps=16)
    assert _program_cache.run_key(instance, 1, None) is None


@pytest.mark.slow
def test_a_truncated_entry_warns_and_is_replaced(cache, traces):
    reference = PPO(**SMALL).train(seed=0, n_timesteps=256)
    entry = max(entries(cache), key=lambda path: path.stat().st_size)  # the segment's
    entry.write_bytes(entry.read_bytes()[:1000])
    with pytest.warns(UserWarning, match="unreadable"):
        result = PPO(**SMALL).train(seed=0, n_timesteps=256)
    assert len(traces) == 2
    for a, b in zip(params_of(reference), params_of(result), strict=True):
        np.testing.assert_array_equal(a, b)
    PPO(**SMALL).train(seed=0, n_timesteps=256)
    assert len(traces) == 2, "the rewritten entry served the third run"


def test_an_unwritable_cache_costs_a_warning_not_the_run(cache, traces):
    """A file where the programs' directory should be. (A cache root that cannot be made at
    all is warned of once, at import: tests/test_cache_faults.py.)"""
    blocker = ajax._compile_cache.cache_dir() / "programs"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("a file where the program cache's directory should be")
    with pytest.warns(UserWarning, match="could not write"):
        result = PPO(**SMALL).train(seed=0, n_timesteps=256)
    assert result.n_timesteps == 256


@pytest.mark.slow
def test_a_relaunched_process_traces_nothing(cache):
    """Two fresh processes: the second finds the first's programs and never traces its
    segment (ajax.run.lowering.segment_program is not called)."""
    code = (
        "import ajax, ajax.run.lowering as lowering\n"
        "calls = []\n"
        "original = lowering.segment_program\n"
        "lowering.segment_program = lambda *a: calls.append(1) or original(*a)\n"
        f"ajax.PPO(**{SMALL!r}).train(seed=[0, 1], n_timesteps=256)\n"
        "print(len(calls))\n"
    )
    env = {"AJAX_JAX_COMPILE_CACHE_DIR": str(cache), "JAX_PLATFORMS": "cpu"}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
        )
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr
    assert [r.stdout.split()[-1] for r in runs] == ["1", "0"]


FAMILY = """
from gymnax.environments.classic_control.cartpole import CartPole

from ajax.envs.gymnax_adapter import GymnaxAdapter
from ajax.envs.registry import register_family

SCALE = {scale}


class ScaledCartPole(CartPole):
    def step_env(self, key, state, action, params):
        obs, state, reward, done, info = super().step_env(key, state, action, params)
        return obs, state, reward * SCALE, done, info


def make(name):
    env = ScaledCartPole()
    return GymnaxAdapter(env, env.default_params, f"mine/{{name}}")


register_family("mine", lambda: ["Scaled"], make)
"""


@pytest.mark.slow  # three fresh processes
def test_an_edit_to_a_registered_environments_module_is_compiled_anew(cache, tmp_path):
    """A family added with register_family is keyed by its module's source: a relaunch is
    served while the module is unchanged, and traces anew once it is edited."""
    code = (
        "import ajax, ajax.run.lowering as lowering, my_family\n"
        "calls = []\n"
        "original = lowering.segment_program\n"
        "lowering.segment_program = lambda *a: calls.append(1) or original(*a)\n"
        "ajax.PPO(env_id='mine/Scaled', n_envs=2, n_steps=16).train(seed=0, n_timesteps=256)\n"
        "print(len(calls))\n"
    )
    env = {
        "AJAX_JAX_COMPILE_CACHE_DIR": str(cache),
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(tmp_path),
    }

    def traced(scale):
        (tmp_path / "my_family.py").write_text(FAMILY.format(scale=scale))
        run = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
        )
        assert run.returncode == 0, run.stderr
        return run.stdout.split()[-1]

    assert [traced(1.0), traced(1.0), traced(2.0)] == ["1", "0", "1"]
