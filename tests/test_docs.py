"""The documentation site builds with ``--strict``, and every Python example in the README and
the docs runs.

Each fenced Python example is preceded by a marker naming the budget it may use in the
test, ``<!-- example: n_timesteps=4_096, log_frequency=2_048 -->``: each ``name=value`` in
the marker replaces that keyword's value in the example's code, so the example keeps its
real settings on the page and runs in seconds here."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
EXAMPLE = re.compile(r"<!-- example:(?P<budget>[^>]*)-->\s*```python\n(?P<code>.*?)```", re.S)
ENV = os.environ | {"JAX_PLATFORMS": "cpu", "NO_MKDOCS_2_WARNING": "1"}


def _build(config_dir: Path, site_dir: Path) -> subprocess.CompletedProcess:
    # Not with -q: quiet mode drops warnings before --strict counts them, and passes.
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site_dir)],
        cwd=config_dir,
        env=ENV,
        capture_output=True,
        text=True,
    )


def test_site_builds_strict(tmp_path):
    built = _build(ROOT, tmp_path / "site")
    assert built.returncode == 0, built.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    # mkdocstrings rendered the docstrings, not just the headings.
    assert "Deep Q-Network for discrete actions" in api


@pytest.mark.slow
def test_a_broken_link_fails_the_build(tmp_path):
    for name in ("docs", "mkdocs.yml"):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy
        copy(ROOT / name, tmp_path / name)
    (tmp_path / "src").symlink_to(ROOT / "src")
    with (tmp_path / "docs" / "memory.md").open("a") as f:
        f.write("\nSee [a page that does not exist](missing.md).\n")
    built = _build(tmp_path, tmp_path / "site")
    assert built.returncode != 0
    assert "missing.md" in built.stderr


def _examples():
    found = []
    for page in PAGES:
        text = page.read_text()
        marked = list(EXAMPLE.finditer(text))
        assert len(marked) == text.count("```python"), (
            f"{page.relative_to(ROOT)}: every ```python example needs an "
            "<!-- example: name=value, ... --> marker with its test budget"
        )
        for i, match in enumerate(marked):
            found.append(pytest.param(match, id=f"{page.relative_to(ROOT)}#{i}"))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("match", _examples())
def test_example_runs(match, tmp_path):
    code = match["code"]
    for setting in filter(None, (s.strip() for s in match["budget"].split(","))):
        name, value = (part.strip() for part in setting.split("="))
        code, count = re.subn(rf"\b{name}=[^,)\n]+", f"{name}={value}", code)
        assert count, f"the marker sets {name}, which the example does not use"
    ran = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=ENV, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr[-3000:]


def test_one_install_story(monkeypatch):
    """The pages and the error for a family whose library is missing give one install: the
    family's extra, from the clone. ``ajax-rl`` on the package index is not this project."""
    for page in PAGES:
        assert "ajax-rl[" not in page.read_text(), page.relative_to(ROOT)
    from ajax.envs import make_env, registry

    def not_installed():
        raise ImportError("No module named 'brax'", name="brax")

    monkeypatch.setitem(
        registry._FAMILIES, "brax", registry.Family(not_installed, registry._FAMILIES["brax"].make)
    )
    with pytest.raises(ValueError, match=r"not installed \(brax\).*pip install -e \"\.\[brax\]\""):
        make_env("brax/ant")
    environments = (ROOT / "docs" / "environments.md").read_text()
    assert 'pip install -e ".[brax]"' in environments
