"""The tree stays formatted and lint-clean (ruff, configured in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_and_format():
    for args in (["check", "."], ["format", "--check", "."]):
        out = subprocess.run(
            [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stdout + out.stderr
