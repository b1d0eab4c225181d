"""benchmarks/learning_report.py, small: two agents, three seeds, a few thousand steps, run
as a user runs it. It checks the pipeline (rows, statistics, plots), not learning."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ajax
from ajax.stats import iqm, iqm_interval

from .interrupts import interrupting_call

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # two agents compiled in a fresh process
def test_the_learning_report_writes_rows_with_intervals_and_a_plot_per_run(tmp_path):
    out, plots = tmp_path / "learning.jsonl", tmp_path / "plots"
    command = [sys.executable, str(ROOT / "benchmarks" / "learning_report.py")]
    command += ["--agents", "PPO", "DQN", "--seeds", "3", "--n-timesteps", "4096"]
    command += ["--first-task-only", "--out", str(out), "--plots", str(plots)]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["agent"], r["env"], r["seeds"]) for r in rows] == [
        ("PPO", "CartPole-v1", 3),
        ("DQN", "CartPole-v1", 3),
    ]
    for row in rows:
        returns = np.asarray(row["returns"])
        assert returns.shape == (3, len(row["timesteps"])) and row["timesteps"][-1] <= 4096
        # The statistics are those of ajax.stats on the rounded returns, to the rounding.
        np.testing.assert_allclose(row["final_iqm"], iqm(returns[:, -1]), atol=0.01)
        np.testing.assert_allclose(row["final_interval"], iqm_interval(returns[:, -1]), atol=0.02)
        np.testing.assert_allclose(row["curve_iqm"], iqm(returns), atol=0.01)
        low, high = row["curve_interval"]
        assert np.all(np.asarray(low) <= np.asarray(row["curve_iqm"]) + 0.01)
        assert np.all(np.asarray(row["curve_iqm"]) <= np.asarray(high) + 0.01)
        assert row["commit"] and row["wall_s"] > 0
        png = plots / f"{row['agent']}_CartPole-v1.png"
        assert png.read_bytes().startswith(b"\x89PNG")
    # --table: the newest row of each agent and task, as the pages show them.
    command = [sys.executable, str(ROOT / "benchmarks" / "learning_report.py"), "--table"]
    proc = subprocess.run([*command, "--out", str(out)], cwd=ROOT, env=env, capture_output=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 4 and lines[2].startswith("| PPO | CartPole-v1 | 4,096 | 3 | ")
    low, high = rows[0]["final_interval"]
    assert f"{rows[0]['final_iqm']:.1f} [{low:.1f}, {high:.1f}]" in lines[2]


def test_a_killed_report_continues_its_run_exactly_and_sums_its_wall_time(tmp_path, monkeypatch):
    """A report with a run directory, stopped in its fourth segment, started again: the row
    is the uninterrupted report's, its ledger names both parts and counts both parts' time."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import learning_report

    run = ("CartPole-v1", {"n_envs": 2, "n_steps": 16}, 640, 64, 3)
    whole, parts = tmp_path / "whole.jsonl", tmp_path / "parts.jsonl"
    learning_report.report("PPO", run, 3, None, str(whole), tmp_path / "plots")
    runs = tmp_path / "runs"
    monkeypatch.setattr(ajax.run.host, "call_watched", interrupting_call(5, "SIGTERM"))
    with pytest.raises(ajax.RunInterrupted):
        learning_report.report("PPO", run, 3, None, str(parts), tmp_path / "plots", runs)
    monkeypatch.undo()
    assert not parts.exists()
    ledger = json.loads((runs / "PPO_CartPole-v1" / "report_ledger.json").read_text())
    assert ledger["commits"] == [learning_report.COMMIT] and ledger["wall_s"] > 0

    calls, call_watched = [], ajax.run.host.call_watched
    monkeypatch.setattr(
        ajax.run.host, "call_watched", lambda *a, **k: calls.append(a) or call_watched(*a, **k)
    )
    learning_report.report("PPO", run, 3, None, str(parts), tmp_path / "plots", runs)
    assert len(calls) == 6  # segments 5 to 10: no initialisation, nothing run twice
    (want,), (got,) = (
        [json.loads(line) for line in f.read_text().splitlines()] for f in (whole, parts)
    )
    assert got["returns"] == want["returns"] and got["final_iqm"] == want["final_iqm"]
    assert got["commit"] == learning_report.COMMIT and got["resumed_at"] == [got["commit"]]
    assert got["wall_s"] > round(ledger["wall_s"], 1)


def test_the_report_and_every_agent_page_show_each_agents_newest_row(monkeypatch):
    """The figures on the pages are copied from ``benchmarks/results/learning.jsonl`` by
    hand: each agent and task's newest row must be the one the report's summary table and
    the agent's page quote (its final IQM with the interval, and in the report its commit)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import learning_report

    newest = learning_report.newest_rows(ROOT / "benchmarks" / "results" / "learning.jsonl")
    report = (ROOT / "PERFORMANCE_REPORT.md").read_text()
    stale = []
    for (agent, env), row in newest.items():
        low, high = row["final_interval"]
        figure = f"{row['final_iqm']:.1f} [{low:.1f}, {high:.1f}]"
        page = ROOT / "docs" / "agents" / f"{agent.lower()}.md"
        in_report = any(figure in line and row["commit"] in line for line in report.splitlines())
        if not in_report or figure not in page.read_text():
            stale.append(f"{agent} on {env}: {figure} at {row['commit']}")
    assert not stale, f"pages behind learning.jsonl: {stale}"


def test_a_check_written_elsewhere_leaves_the_pages_figures_alone(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import learning_report

    pages = ROOT / "docs" / "agents" / "learning"
    assert learning_report.figures_for(ROOT / "benchmarks" / "results" / "learning.jsonl") == pages
    assert learning_report.figures_for(tmp_path / "check.jsonl") == tmp_path / "check_plots"
