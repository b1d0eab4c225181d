"""Where the benchmark scripts put a summary: one JSON line on standard output, and appended
to a JSON-lines file when one is named."""

from __future__ import annotations

import json
from pathlib import Path


def emit(summary: dict, out: str | Path | None) -> None:
    print(json.dumps(summary), flush=True)
    if out:
        with open(out, "a") as f:
            f.write(json.dumps(summary) + "\n")
