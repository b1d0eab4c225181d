"""The agent bench runs as its users run it: a script in a process of its own, writing one row
per agent and implementation. No test imports from ``benchmarks/``: the scripts are tools,
and what they time is measured by running them, never asserted."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_bench_writes_a_row_per_agent(tmp_path):
    out = tmp_path / "rows.jsonl"
    # One trial of one PPO iteration (4 copies x 128 steps). A budget other than the
    # protocol's is a measurement of its own, so no baseline is read or flagged.
    command = [sys.executable, str(ROOT / "benchmarks" / "agent_bench.py")]
    command += ["--agents", "PPO", "--trials", "1", "--n-timesteps", "512"]
    command += ["--out", str(out), "--baseline", str(tmp_path / "no_baseline.jsonl")]
    ran = subprocess.run(
        command,
        cwd=tmp_path,
        env=os.environ | {"JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 1
    row = rows[0]
    assert (row["agent"], row["implementation"], row["task"]) == ("PPO", "ajax", "CartPole-v1")
    assert (row["n_timesteps"], row["steps"], row["trials"], row["seeds"]) == (512, 512, 1, 1)
    for key in ("execution_sps", "whole_run_sps", "compile_s"):
        assert isinstance(row[key], float) and row[key] > 0, key
    # The machine and its date travel with the figures.
    assert {"date", "cpu", "cores", "jax", "backend", "devices"} <= row.keys()
    assert not (tmp_path / "no_baseline.jsonl").exists()
