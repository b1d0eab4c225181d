"""How long a fresh process takes to import Ajax, build an agent, refuse a mistyped id and
list the ids: each case run in its own interpreter, trials alternating between cases,
medians reported.

    JAX_PLATFORMS=cpu python benchmarks/startup_bench.py --trials 5 \\
        --out benchmarks/results/startup.jsonl [--label NAME]

It times the ``ajax`` that Python imports: put another commit's ``src`` on ``PYTHONPATH`` (and
name it with ``--label``) to time that one.

The time is the interpreter's whole wall time, start-up included, as a user at a shell sees
it. The compile cache is left alone: nothing here compiles.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime

from records import emit

#: case -> the code a fresh interpreter runs.
CASES = {
    "python alone": "pass",
    "import ajax": "import ajax",
    "import ajax, PPO on CartPole-v1": "import ajax; ajax.PPO(env_id='CartPole-v1')",
    "mistyped id refused": (
        "import ajax\n"
        "try:\n"
        "    ajax.PPO(env_id='CartPol-v1')\n"
        "except ValueError as error:\n"
        "    assert 'CartPole-v1' in str(error)\n"
    ),
    "ajax list": "import sys; from ajax.cli import main; sys.exit(main(['list']))",
}


def time_case(code: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        stdout=subprocess.DEVNULL,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out", default=None, help="JSON-lines file to append the rows to")
    parser.add_argument(
        "--label", default="working tree", help="what is timed (a commit on PYTHONPATH, say)"
    )
    args = parser.parse_args()
    times: dict[str, list[float]] = {case: [] for case in CASES}
    for _ in range(args.trials):
        for case, code in CASES.items():
            times[case].append(time_case(code))
    date = datetime.now(UTC).date().isoformat()
    for case, trials in times.items():
        emit(
            {
                "label": args.label,
                "case": case,
                "median_s": round(statistics.median(trials), 3),
                "trials_s": [round(t, 3) for t in trials],
                "date": date,
            },
            args.out,
        )


if __name__ == "__main__":
    main()
