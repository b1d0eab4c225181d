"""Signals during a run: Ctrl-C and SIGTERM become an interrupt the run can finish its
segment on, and are recorded in case native code swallows the exception."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM stopped a run. Every row it logged was written first; the
    message says how far it got and where the rows are. A ``KeyboardInterrupt``, so code
    that catches Ctrl-C catches it too. ``checkpoints`` is the directory that resumes it,
    where it saved one."""

    def __init__(self, message: str, checkpoints: str | None = None):
        super().__init__(message)
        self.checkpoints = checkpoints


def keyboard_interrupt(signal_name: str) -> KeyboardInterrupt:
    """The interrupt a signal raises: Ctrl-C's says nothing more, as Python's own; others
    name their signal."""
    return KeyboardInterrupt("" if signal_name == "SIGINT" else signal_name)


def shown(interrupt: KeyboardInterrupt) -> str:
    """The signal an interrupt came from, as the run's messages name it."""
    return str(interrupt) or "Ctrl-C"


@contextlib.contextmanager
def interrupts() -> Iterator[list[str]]:
    """Within the block, SIGTERM (a scheduler's pre-emption, ``kill``) interrupts the main
    thread as Ctrl-C does, so that the run's cleanup runs; elsewhere it is left alone.

    Both signals are also recorded in the list the block gets, which the run checks after
    every segment: a ``KeyboardInterrupt`` raised while the main thread is inside native
    code can be cleared there (a run under load once went on to its end after Ctrl-C), and
    the record still stops the run. SIGINT is taken over only from Python's default handler,
    so a handler of the user's, or SIGINT ignored, is kept.
    """
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    received: list[str] = []

    def interrupt(signum: int, frame: Any) -> None:
        received.append(signal.Signals(signum).name)
        raise keyboard_interrupt(received[-1])

    signals = [signal.SIGTERM]
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signals.append(signal.SIGINT)
    previous = {s: signal.signal(s, interrupt) for s in signals}
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
