"""An interrupt delivered while a run's program is in flight, at a chosen call."""

from collections.abc import Callable
from typing import Any

from ajax import watchdog


def interrupting_call(n: int, signal_name: str = "") -> Callable[..., Any]:
    """A stand-in for ``ajax.loop.call_watched`` that starts the ``n``-th call (the
    initialisation is the first) and interrupts it as Ctrl-C does (``signal_name`` empty) or
    as another signal does: the program runs on, and the run gets ``CallInterrupted``."""
    calls = []

    def call_watched(fn: Callable[..., Any], *args: Any, limit_s: float) -> Any:
        calls.append(fn)
        if len(calls) == n:
            call = watchdog._Call(fn, args)
            call.start()
            raise watchdog.CallInterrupted(signal_name, call)
        return watchdog.call_watched(fn, *args, limit_s=limit_s)

    return call_watched
