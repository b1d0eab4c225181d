"""The persistent compile cache: where it lives, its switches, prune, and a hit across
processes."""

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import jax
import jaxlib
import pytest

from ajax import _compile_cache


def test_directory_is_per_machine_and_versions(cache_env):
    directory = _compile_cache.configure()
    assert directory.parent == cache_env
    tag = directory.name
    for part in (
        f"py{sys.version_info.major}.{sys.version_info.minor}",
        f"jax{jax.__version__}",
        f"jaxlib{jaxlib.__version__}",
    ):
        assert part in tag
    assert tag == _compile_cache.machine_tag()
    assert re.fullmatch(r"[A-Za-z0-9.+_-]+", tag)
    assert jax.config.jax_compilation_cache_dir == str(directory)
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0


@pytest.mark.parametrize(
    "model, start",
    [
        ("AMD EPYC 7B13 64-Core Processor", "AMD-EPYC-7B13-64-Core-Processor_"),
        ("Intel(R) Xeon(R) Processor", "Intel-R-Xeon-R-Processor_"),
    ],
)
def test_directory_names_the_cpu_in_safe_characters(monkeypatch, model, start):
    # Intel's model names hold parentheses, which a directory name should not.
    monkeypatch.setattr(_compile_cache, "cpu_model", lambda: model)
    assert _compile_cache.machine_tag().startswith(start)


def test_cpuinfo_fields_are_the_first_cpus(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC 9B14\nflags\t\t: fpu avx2\n\n"
        "processor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n"
    )
    assert _compile_cache.cpuinfo_field("model name", cpuinfo) == "AMD EPYC 9B14"
    assert _compile_cache.cpuinfo_field("flags", cpuinfo) == "fpu avx2"
    assert _compile_cache.cpuinfo_field("microcode", cpuinfo) is None
    assert _compile_cache.cpuinfo_field("flags", tmp_path / "absent") is None


def test_default_root_and_off_switch(monkeypatch):
    monkeypatch.delenv("AJAX_JAX_COMPILE_CACHE_DIR", raising=False)
    expected = os.path.expanduser("~/.cache/ajax/jax_compile_cache")
    assert str(_compile_cache.cache_root()) == expected
    monkeypatch.setenv("AJAX_NO_COMPILE_CACHE", "1")
    try:
        assert _compile_cache.configure() is None
        assert jax.config.jax_compilation_cache_dir is None
    finally:
        # The tests' cache again, not the user's default.
        monkeypatch.undo()
        _compile_cache.configure()


def test_the_suite_compiles_into_a_cache_apart_from_the_users():
    # conftest keeps the tests' programs out of the user's cache, from session to session.
    root = _compile_cache.cache_root()
    users = _compile_cache.DEFAULT_ROOT.expanduser()
    assert root != users and users not in root.parents and root not in users.parents
    assert _compile_cache.enabled(), "a test left AJAX_NO_COMPILE_CACHE set"
    assert Path(jax.config.jax_compilation_cache_dir).parent == root


def _entry(directory, key, size, last_used):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{key}-cache").write_bytes(b"x" * size)
    (directory / f"{key}-atime").write_bytes(int(last_used * 1e9).to_bytes(8, "little"))


def test_prune_deletes_least_recently_used_until_the_rest_fit(tmp_path):
    now = time.time()
    _entry(tmp_path / "machine-a", "old", 400, now - 300)
    _entry(tmp_path / "machine-a", "recent", 400, now - 10)
    _entry(tmp_path / "machine-b", "middle", 400, now - 100)
    before = _compile_cache.size_of(tmp_path)
    deleted = _compile_cache.prune(tmp_path, max_bytes=900)
    assert before - _compile_cache.size_of(tmp_path) == deleted
    remaining = sorted(p.name for p in tmp_path.rglob("*-cache"))
    assert remaining == ["middle-cache", "recent-cache"]
    assert not (tmp_path / "machine-a" / "old-atime").exists()
    _compile_cache.prune(tmp_path, max_bytes=420)
    assert sorted(p.name for p in tmp_path.rglob("*-cache")) == ["recent-cache"]
    assert _compile_cache.prune(tmp_path, max_bytes=10**9) == 0


_TRAIN_TWICE = textwrap.dedent(
    """
    import json, sys
    from jax import monitoring
    hits = []
    monitoring.register_event_listener(
        lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None)
    import ajax
    result = ajax.PPO(env_id="CartPole-v1", n_envs=2, n_steps=8).train(
        seed=[0, 1], n_timesteps=64,
        logging_config=ajax.LoggingConfig(log_frequency=32, log_dir=sys.argv[1]))
    print(json.dumps({"hits": len(hits), "returns": result.evaluations["episode_return"].tolist(),
                      "compile_s": result.timings["compile_s"]}))
    """
)


@pytest.mark.slow  # two whole runs in new processes
def test_a_second_process_loads_the_logged_run_from_the_cache(tmp_path):
    env = os.environ | {
        "AJAX_JAX_COMPILE_CACHE_DIR": str(tmp_path / "cache"),
        "JAX_PLATFORMS": "cpu",
    }
    env.pop("AJAX_NO_COMPILE_CACHE", None)

    def run():
        out = subprocess.run(
            [sys.executable, "-c", _TRAIN_TWICE, str(tmp_path / "runs")],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    first = run()
    entries = list((tmp_path / "cache").rglob("*-cache"))
    assert entries, "the first process wrote nothing to the cache"
    second = run()
    # Both of the run's programs (init and the logged segment) come from the cache.
    assert second["hits"] >= 2 and second["hits"] >= first["hits"] + 2
    assert second["returns"] == first["returns"]
    assert second["compile_s"] < first["compile_s"]


_COMPILE_BEFORE_IMPORT = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp
    if sys.argv[1] != "-":
        jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.jit(lambda x: x + 1)(jnp.ones(3)).block_until_ready()
    import ajax
    jax.jit(lambda x: x * 3 + 2)(jnp.ones(5)).block_until_ready()
    """
)


@pytest.mark.parametrize("earlier_dir", [False, True], ids=["no-cache-before", "other-cache"])
def test_programs_compiled_before_import_do_not_keep_the_cache_off(tmp_path, earlier_dir):
    # JAX opens its cache at the first compile: a program compiled before `import ajax`, with
    # or without a cache directory of the user's own, must not keep later programs out of
    # Ajax's directory.
    other = tmp_path / "users-own"
    env = os.environ | {
        "AJAX_JAX_COMPILE_CACHE_DIR": str(tmp_path / "ajax"),
        "JAX_PLATFORMS": "cpu",
    }
    env.pop("AJAX_NO_COMPILE_CACHE", None)
    earlier = str(other) if earlier_dir else "-"
    command = [sys.executable, "-W", "error", "-c", _COMPILE_BEFORE_IMPORT, earlier]
    subprocess.run(command, env=env, check=True)
    entries = [p.name for p in (tmp_path / "ajax").rglob("*-cache")]
    assert any(name.startswith("jit__lambda") for name in entries), entries
