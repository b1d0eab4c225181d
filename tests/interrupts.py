"""An interrupt delivered while a run's program is in flight, at a chosen call; and the wait
for programs left running on helper threads."""

import threading
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


def join_helper_threads() -> None:
    """Waits for every watched call's helper thread to end: calls a test abandoned (a hang, a
    second Ctrl-C) or whose thread is still winding down after answering."""
    for thread in threading.enumerate():
        if thread.name == "ajax-watchdog-call":
            thread.join(60)
            assert not thread.is_alive(), "a watched call's helper thread did not end"
