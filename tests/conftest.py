"""Shared fixtures. Tests run on the CPU with a compile cache of their own, so they neither
read nor fill the user's cache; runs that several tests inspect are trained once."""

import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["AJAX_JAX_COMPILE_CACHE_DIR"] = tempfile.mkdtemp(prefix="ajax-test-cache-")

import pytest

import ajax
from ajax import PPO, LoggingConfig

#: PureJaxRL's CartPole configuration (the PPO defaults), 4 seeds, 200k steps.
CARTPOLE_SEEDS = [0, 1, 2, 3]
CARTPOLE_STEPS = 200_000


@pytest.fixture(scope="session")
def cartpole_run(tmp_path_factory):
    """PPO on CartPole-v1 over four seeds in one vmapped, logged run."""
    log_dir = tmp_path_factory.mktemp("runs")
    result = PPO(env_id="CartPole-v1", n_envs=4).train(
        seed=CARTPOLE_SEEDS,
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
    ajax._compile_cache.configure()
