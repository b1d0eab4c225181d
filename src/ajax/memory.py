"""How much memory a run needs, checked before compiling."""

from __future__ import annotations

import os
from pathlib import Path

import jax


def available_bytes() -> int | None:
    """Memory the run's device can still give: the accelerator's limit, or the host's
    available memory on a CPU (None where neither can be read)."""
    device = jax.local_devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    try:  # Linux: free memory plus what the page cache would give back.
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:,.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def check_fits(
    estimate: int, seeds: int, per_seed_detail: str, available: int | None, unit: str = "seeds"
) -> None:
    """Refuse a run whose estimated memory exceeds what is available, saying what to lower.
    ``unit`` names what ``seeds`` counts (a sweep's places are configurations x seeds)."""
    if available is None or estimate <= available:
        return
    raise MemoryError(
        f"This run needs about {human(estimate)} ({seeds} {unit} x {per_seed_detail}), but only "
        f"{human(available)} is available. Lower what each seed stores (buffer_size for the replay "
        "agents, store_size for UDRL), run fewer seeds at once, or use a machine with more "
        "memory (docs/memory.md)."
    )
