"""The benchmark's bookkeeping: medians, the baseline comparison and the 10% flag (its
timings themselves are measured by running it, never asserted)."""

import importlib.util
import json
import os
from pathlib import Path
from unittest import mock

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "agent_bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("agent_bench", _PATH)
    module = importlib.util.module_from_spec(spec)
    # The script turns the compile cache off for its own process, not for the tests after.
    with mock.patch.dict(os.environ):
        spec.loader.exec_module(module)
    return module


def _fake_trials(bench, monkeypatch, figures):
    calls = iter(figures)
    monkeypatch.setattr(
        bench,
        "time_ajax",
        lambda name, overrides=None, **protocol: {
            "steps": 7680,
            "execution_sps": next(calls),
            "whole_run_sps": 100.0,
            "compile_s": 1.0,
        },
    )


def test_medians_and_a_recorded_baseline(bench, monkeypatch, tmp_path):
    _fake_trials(bench, monkeypatch, [900.0, 1000.0, 5000.0])
    baseline = tmp_path / "baseline.jsonl"
    kept = {"agent": "DQN", "implementation": "ajax", "execution_sps": 7.0}
    stale = {"agent": "PPO", "implementation": "ajax", "execution_sps": 1.0}
    baseline.write_text(json.dumps(kept) + "\n" + json.dumps(stale) + "\n")
    code = bench.main(
        [
            "--agents",
            "PPO",
            "--out",
            str(tmp_path / "out.jsonl"),
            "--baseline",
            str(baseline),
            "--record-baseline",
        ]
    )
    assert code == 0
    # PPO's row is replaced by the median of its trials; DQN, not run, keeps its row.
    row, dqn = [json.loads(x) for x in baseline.read_text().splitlines()]
    assert row["agent"] == "PPO" and row["execution_sps"] == 1000.0
    assert dqn == kept
    assert row["n_envs"] == 4 and row["n_timesteps"] == 8000 and row["trials"] == 3


def test_more_than_ten_percent_slower_is_flagged(bench, monkeypatch, tmp_path, capsys):
    baseline = tmp_path / "baseline.jsonl"
    baseline.write_text(
        json.dumps({"agent": "PPO", "implementation": "ajax", "execution_sps": 1000.0}) + "\n"
    )
    args = ["--agents", "PPO", "--out", str(tmp_path / "out.jsonl"), "--baseline", str(baseline)]
    _fake_trials(bench, monkeypatch, [950.0] * 3)
    assert bench.main(args) == 0
    _fake_trials(bench, monkeypatch, [850.0] * 3)
    assert bench.main(args) == 1
    assert "REGRESSION" in capsys.readouterr().err


def test_peer_trials_alternate(bench):
    order = []

    def trial(name, value):
        def run():
            order.append(name)
            return {"execution_sps": value(len(order))}

        return run

    medians = bench.alternating_medians(
        [("ajax", trial("ajax", float)), ("rejax", trial("rejax", lambda n: 10.0 * n))], 3
    )
    assert order == ["ajax", "rejax"] * 3
    assert medians == {"ajax": {"execution_sps": 3.0}, "rejax": {"execution_sps": 40.0}}


def test_goals_match_both_sides_and_judge_the_ratios(bench, monkeypatch, tmp_path, capsys):
    calls = []

    def ajax_trial(name, overrides=None, **protocol):
        calls.append(("ajax", name, overrides, protocol["n_timesteps"], protocol["seeds"]))
        return {"steps": 1, "execution_sps": 300.0, "whole_run_sps": 1.0, "compile_s": 2.0}

    def peer_trial(peer, name, n_timesteps, seeds, buffers):
        calls.append((peer, name, buffers, n_timesteps, seeds))
        return {"steps": 1, "execution_sps": 100.0, "whole_run_sps": 1.0, "compile_s": 1.0}

    monkeypatch.setattr(bench, "time_ajax", ajax_trial)
    monkeypatch.setattr(bench, "time_peer", peer_trial)
    out = tmp_path / "out.jsonl"
    assert (
        bench.main(
            ["--goals", "--agents", "DQN", "--seeds", "8", "--trials", "1", "--out", str(out)]
        )
        == 0
    )
    buffer = {"buffer_size": bench.REJAX_BUFFER}
    as_peer = [c for c in calls if c[0] == "ajax" and c[2] != buffer]
    assert ("rejax", "DQN", buffer, 10_000, 8) in calls
    assert ("ajax", "DQN", buffer, 10_000, 8) in calls
    # The run matched to rejax's networks keeps rejax's buffer too.
    assert [c[2]["buffer_size"] for c in as_peer] == [bench.REJAX_BUFFER]
    printed = capsys.readouterr().out
    assert "DQN execution time ajax/rejax 0.33 (goal <= 0.67): met" in printed
    assert "DQN compile time ajax/rejax 2.00 (goal <= 1.00): NOT met" in printed
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["seeds"] for r in rows} == {8} and all(r["goals"] for r in rows)
