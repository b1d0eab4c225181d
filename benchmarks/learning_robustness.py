"""How far each learning test lies from its bar, across seed sets and CPU kernels.

Reruns the learning tests (``pytest -m learning``) under several conditions: the tests' own
seeds; the same seeds with ``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false`` (single-threaded
Eigen kernels; with jaxlib 0.10.2 on our 2-core machine every result came out bitwise the
same as without it); the same seeds with ``--xla_cpu_enable_fast_math=true``, which lets
LLVM reassociate and approximate floating-point operations, so every rounding can change;
and seed sets shifted by ``--seed-offset``. Each bar a test checks through the ``bar``
fixture is recorded with its value and margin; a result that crosses its bar in any
condition is a fragile test, to be fixed at the algorithm.

    JAX_PLATFORMS=cpu python benchmarks/learning_robustness.py \\
        --out benchmarks/results/learning_robustness.jsonl

Prints a Markdown table (one row per bar, one column per condition) for the report. Takes
about 10 minutes per condition on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from records import emit

ROOT = Path(__file__).resolve().parents[1]
EIGEN_OFF = "--xla_cpu_multi_thread_eigen=false"
FAST_MATH = "--xla_cpu_enable_fast_math=true"

#: name -> (seed offset, XLA_FLAGS)
CONDITIONS = {
    "seeds 0-3": (0, ""),
    "seeds 0-3, eigen 1 thread": (0, EIGEN_OFF),
    "seeds 0-3, fast math": (0, FAST_MATH),
    "seeds 4-7": (4, ""),
    "seeds 8-11": (8, ""),
}


def run_condition(
    name: str, offset: int, xla_flags: str, select: str, keyword: str | None
) -> list[dict]:
    margins = Path(tempfile.mkdtemp(prefix="ajax-margins-")) / "margins.jsonl"
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=xla_flags)
    started = time.perf_counter()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", select]
    if keyword:
        command += ["-k", keyword]
    proc = subprocess.run(
        [*command, "--seed-offset", str(offset), "--margins", str(margins)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-500:]
    print(f"{name}: {summary} ({wall:.0f} s)", file=sys.stderr, flush=True)
    rows = [json.loads(x) for x in margins.read_text().splitlines()] if margins.exists() else []
    return [dict(r, condition=name, pytest=summary) for r in rows]


def table(rows: list[dict], conditions: list[str]) -> str:
    bars: dict[tuple[str, str], dict[str, dict]] = {}
    for r in rows:
        bars.setdefault((r["test"], r["what"]), {})[r["condition"]] = r
    head = "| test | statistic | bar | " + " | ".join(conditions) + " | least margin |"
    lines = [head, "|" + " --- |" * 3 + " ---: |" * (len(conditions) + 1)]
    for (test, what), by_condition in bars.items():
        first = next(iter(by_condition.values()))
        cells, margins = [], []
        for c in conditions:
            r = by_condition.get(c)
            cells.append("not run" if r is None else f"{r['value']:.1f} ({r['margin']:+.1f})")
            if r is not None:
                margins.append(r["margin"])
        short = test.split("::", 1)[-1]
        lines.append(
            f"| {short} | {what} | {first['bar']} | "
            + " | ".join(cells)
            + f" | {min(margins):+.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conditions", nargs="+", default=list(CONDITIONS), choices=CONDITIONS)
    parser.add_argument("-m", "--select", default="learning", help="pytest marker expression")
    parser.add_argument("-k", "--keyword", default=None, help="pytest -k expression")
    parser.add_argument("--out", help="append every recorded bar to this JSON-lines file")
    args = parser.parse_args()
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    rows = []
    for name in args.conditions:
        offset, flags = CONDITIONS[name]
        for row in run_condition(name, offset, flags, args.select, args.keyword):
            row["rev"] = rev
            emit(row, args.out)
            rows.append(row)
    print(table(rows, args.conditions))


if __name__ == "__main__":
    main()
