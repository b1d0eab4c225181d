"""Start-up: the static id table matches each library's registry, and importing Ajax, listing
ids, refusing a mistyped one and building a gymnax environment import only what they use and
print nothing. (How long they take is measured by ``benchmarks/startup_bench.py``.)"""

import json
import subprocess
import sys

import pytest

from ajax.envs import catalog

#: Modules whose import costs seconds or prints warnings.
HEAVY = ("gymnax", "brax", "mujoco_playground", "target_gym", "seaborn", "scipy", "matplotlib")


def run_fresh(code: str) -> tuple[dict, str]:
    """Runs ``code`` in a fresh interpreter with warnings shown; returns the JSON it prints
    last and its standard error."""
    proc = subprocess.run(
        [sys.executable, "-W", "default", "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "AJAX_NO_COMPILE_CACHE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


LOADED = f"[m for m in {HEAVY!r} if m in sys.modules]"


def live_registry(family: str) -> set[str]:
    if family == "gymnax":
        import gymnax

        return set(gymnax.registered_envs)
    if family == "brax":
        from brax import envs

        return set(envs._envs)
    if family == "playground":
        from mujoco_playground import dm_control_suite

        return set(dm_control_suite.ALL_ENVS)
    if family == "playground downloads":
        from mujoco_playground import locomotion, manipulation

        return set(locomotion.ALL_ENVS) | set(manipulation.ALL_ENVS)
    from target_gym.registry import REGISTRY

    return set(REGISTRY)


@pytest.mark.parametrize(
    "family, table",
    [
        ("gymnax", catalog.GYMNAX),
        ("brax", catalog.BRAX),
        ("playground", catalog.PLAYGROUND),
        ("playground downloads", catalog.PLAYGROUND_DOWNLOADS),
        ("target_gym", catalog.TARGET_GYM),
    ],
)
def test_the_static_table_is_the_library_registry(family, table):
    assert len(set(table)) == len(table)
    assert set(table) == live_registry(family)


def test_import_list_and_refusal_load_no_environment_library():
    result, stderr = run_fresh(
        "import json, sys, io, contextlib\n"
        "import ajax\n"
        "from ajax.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as listing:\n"
        "    assert main(['list']) == 0\n"
        "try:\n"
        "    ajax.PPO(env_id='CartPol-v1')\n"
        "except ValueError as error:\n"
        "    refusal = str(error)\n"
        f"print(json.dumps({{'loaded': {LOADED}, 'refusal': refusal,\n"
        "    'listed': 'playground/CheetahRun' in listing.getvalue()}))"
    )
    assert result["loaded"] == []
    assert "Did you mean 'CartPole-v1'" in result["refusal"]
    assert result["listed"]
    assert stderr == ""


def test_a_gymnax_env_is_built_without_the_renderers_libraries():
    result, stderr = run_fresh(
        "import json, sys\n"
        "import ajax\n"
        "ajax.PPO(env_id='CartPole-v1')\n"
        f"loaded = {LOADED}\n"
        # gymnax's Pong renderer reaches seaborn through its stand-in, which imports it.
        "import seaborn\n"
        "from gymnax.environments.misc import pong\n"
        "forwarded = pong.sns.color_palette is seaborn.color_palette\n"
        "print(json.dumps({'loaded': loaded, 'forwarded': forwarded,\n"
        "    'real': type(sys.modules['seaborn']).__name__}))"
    )
    assert result["loaded"] == ["gymnax", "matplotlib"]
    assert result["forwarded"] and result["real"] == "module"
    assert stderr == ""


def test_target_gym_is_built_without_its_dependencies_warnings():
    result, stderr = run_fresh(
        "import json, sys\n"
        "import ajax\n"
        "env = ajax.make_env('target_gym/cstr')\n"
        "print(json.dumps({'id': env.env_id}))"
    )
    assert result["id"] == "target_gym/cstr"
    assert "Warning" not in stderr, stderr


def test_a_run_compiles_its_two_programs_and_nothing_else():
    # In a fresh process every eager JAX operation compiles a program of its own, for tens
    # of milliseconds; a run's set-up makes its seeds' keys inside its programs and its
    # other inputs on the host, so the init and the segment are all that a run compiles
    # (once the options check, made once per process, is done).
    compiled, _ = run_fresh(
        "import json, logging, tempfile\n"
        "import jax, ajax\n"
        "from ajax._xla import compiler_options\n"
        "names = []\n"
        "class Compiles(logging.Handler):\n"
        "    def emit(self, record):\n"
        "        message = record.getMessage()\n"
        "        if message.startswith('Finished XLA compilation of '):\n"
        "            names.append(message.split(' of ', 1)[1].split(' in ')[0])\n"
        "logging.getLogger('jax').addHandler(Compiles())\n"
        "jax.config.update('jax_log_compiles', True)\n"
        "agent = ajax.PPO(env_id='CartPole-v1', n_envs=2, n_steps=16)\n"
        "compiler_options(agent), compiler_options(agent, runs_once=True)\n"
        "names.clear()\n"
        "with tempfile.TemporaryDirectory() as log_dir:\n"
        "    config = ajax.LoggingConfig(log_frequency=64, log_dir=log_dir)\n"
        "    agent.train(seed=[0, 3], n_timesteps=128, num_episode_test=2, logging_config=config)\n"
        "print(json.dumps(names))"
    )
    assert len(compiled) == 2, compiled
