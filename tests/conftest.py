"""Shared fixtures. Tests run on the CPU with a compile cache of their own, so they neither
read nor fill the user's cache; it is kept from one session to the next, so that a rerun
compiles only the programs that changed. Runs that several tests inspect are trained once.
They run with two CPU devices on any machine, so that runs of an even number of seeds are
sharded over devices (``ajax._devices``) and the others are not.

The learning tests take their seeds from the ``seeds`` fixture and check their bars through
the ``bar`` fixture, so that ``benchmarks/learning_robustness.py`` can rerun them on other
seeds (``--seed-offset``) and collect how far each result lies from its bar
(``--margins FILE``)."""

import json
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The tests' compile cache sits beside the user's (~/.cache/ajax/jax_compile_cache). Its
# entries are keyed by the programs and by Ajax's source (ajax._program_cache), so a stale
# one is never read. AJAX_TEST_COMPILE_CACHE_DIR pointed at a new directory times a session
# that compiles everything.
os.environ["AJAX_JAX_COMPILE_CACHE_DIR"] = os.environ.get(
    "AJAX_TEST_COMPILE_CACHE_DIR"
) or os.path.expanduser("~/.cache/ajax/test_compile_cache")
os.environ["AJAX_CPU_DEVICES"] = "2"

import numpy as np
import pytest

import ajax
from ajax import PPO, LoggingConfig
from ajax.video import use_egl_without_display

# MuJoCo's scenes (tests/test_video.py) are drawn with EGL on a machine without a display,
# as `ajax eval --video` draws them; MuJoCo reads the choice when Brax first imports it.
use_egl_without_display()

#: What the tests' compile cache is trimmed to when a session starts. Seven sessions on
#: 2026-12-02 (quick and whole, cold, warm and after edits) left 66 MB.
TEST_CACHE_BYTES = 1_000_000_000

#: PureJaxRL's CartPole configuration (the PPO defaults), 4 seeds, 200k steps.
CARTPOLE_STEPS = 200_000


def pytest_configure(config):
    # Trimmed once, by the controller: an xdist worker would race the other's writes.
    if not hasattr(config, "workerinput"):
        ajax._compile_cache.prune(ajax._compile_cache.cache_root(), TEST_CACHE_BYTES)


def pytest_addoption(parser):
    parser.addoption(
        "--seed-offset",
        type=int,
        default=0,
        help="shift every learning test's seeds by this much (seeds 0-3 become 4-7 with 4)",
    )
    parser.addoption(
        "--margins",
        default=None,
        help="append each learning bar's value, bar and margin to this JSON-lines file",
    )


def _seed_list(config, n):
    offset = config.getoption("--seed-offset")
    return list(range(offset, offset + n))


@pytest.fixture
def seeds(request):
    """``seeds(n)``: the n seeds a learning test runs, 0..n-1 unless ``--seed-offset``."""
    return lambda n: _seed_list(request.config, n)


class Bars:
    """Checks a learning result against its bar, and records the margin when asked."""

    def __init__(self, request):
        self._path = request.config.getoption("--margins")
        self._test = request.node.nodeid
        self._seed_offset = request.config.getoption("--seed-offset")

    def at_least(self, what, value, bar, context=None):
        """Assert ``value >= bar``; ``what`` names the statistic (e.g. "final 4-seed mean")."""
        value = float(value)
        if self._path:
            row = {
                "test": self._test,
                "what": what,
                "value": round(value, 2),
                "bar": bar,
                "margin": round(value - bar, 2),
                "seed_offset": self._seed_offset,
                "xla_flags": os.environ.get("XLA_FLAGS", ""),
                "context": None if context is None else np.round(np.ravel(context), 1).tolist(),
            }
            with open(self._path, "a") as f:
                f.write(json.dumps(row) + "\n")
        assert value >= bar, f"{what}: {value:.2f} < {bar}; {context}"


@pytest.fixture
def bar(request):
    return Bars(request)


@pytest.fixture
def learning_run(tmp_path, seeds):
    """``learning_run(agent, n_timesteps, log_frequency, num_episode_test=10, n_seeds=4)``:
    ``agent`` trained on the test's seeds in one vmapped run, evaluated every
    ``log_frequency`` steps. Returns the result and the mean evaluation return over the
    seeds at each evaluation."""

    def run(agent, n_timesteps, log_frequency, num_episode_test=10, n_seeds=4):
        result = agent.train(
            seed=seeds(n_seeds),
            n_timesteps=n_timesteps,
            num_episode_test=num_episode_test,
            logging_config=LoggingConfig(log_frequency=log_frequency, log_dir=tmp_path),
        )
        return result, result.evaluations["episode_return"].mean(axis=0)

    return run


@pytest.fixture(scope="session")
def cartpole_run(tmp_path_factory, request):
    """PPO on CartPole-v1 over four seeds in one vmapped, logged run."""
    log_dir = tmp_path_factory.mktemp("runs")
    result = PPO(env_id="CartPole-v1", n_envs=4).train(
        seed=_seed_list(request.config, 4),
        n_timesteps=CARTPOLE_STEPS,
        num_episode_test=10,
        logging_config=LoggingConfig(log_frequency=20_000, log_dir=log_dir, run_name="cartpole"),
    )
    return result


@pytest.fixture(scope="session")
def small_result():
    """A short unlogged CartPole run over two seeds: enough to act, evaluate and save."""
    return PPO(env_id="CartPole-v1", n_envs=2, n_steps=16).train(seed=[3, 5], n_timesteps=640)


@pytest.fixture
def cache_env(tmp_path, monkeypatch):
    """A private compile-cache root for one test."""
    root = tmp_path / "cache"
    monkeypatch.setenv("AJAX_JAX_COMPILE_CACHE_DIR", str(root))
    monkeypatch.delenv("AJAX_NO_COMPILE_CACHE", raising=False)
    yield root
    # Back to the tests' cache: the environment first, then JAX's option from it.
    monkeypatch.undo()
    ajax._compile_cache.configure()
