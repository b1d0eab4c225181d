"""Runs never wait silently: every compiled program a run executes is watched.

A deadlock inside XLA's CPU runtime leaves a process asleep at 0% CPU, with nothing said
(``docs/performance.md``, "Runs that never hang"). The run therefore waits for each program's
outputs with a time limit: when a segment takes far longer than the segments before it, the
run stops, dumps every thread's Python stack, writes the rows logged so far, and raises
:class:`RunHungError` saying where it stopped and what to report.

Each program is called, and waited for, on a helper thread while the run's thread waits on
an event with a timeout, so a finished program is noticed at once (polling ``is_ready`` would
add up to one polling interval to every segment).
"""

from __future__ import annotations

import atexit
import dataclasses
import faulthandler
import os
import statistics
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax


class RunHungError(RuntimeError):
    """A compiled program of the run made no progress for far longer than expected."""


@dataclasses.dataclass(frozen=True)
class Watchdog:
    """How long a run waits for one compiled program before it declares a hang.

    A segment may take ``factor`` times the median of the earlier segments, and never less than
    ``floor_s`` seconds; the seeds' initialisation and the first segment have only the floor.
    Past that limit a run is declared hung only if the process was idle over it (a tenth of
    a core or less, :data:`BUSY_SHARE`): a program that keeps the CPU busy is slow, not
    hung, and is waited for, so a long run without evaluations, one segment, is never
    stopped for its length.
    """

    factor: float = 20.0
    floor_s: float = 600.0

    def __post_init__(self) -> None:
        for name in ("factor", "floor_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(
                    f"Watchdog.{name} must be a positive number, got {value!r}; "
                    "e.g. Watchdog(factor=20, floor_s=600)."
                )

    def limit_s(self, earlier_s: Sequence[float]) -> float:
        """The longest wait allowed after segments that took ``earlier_s`` seconds."""
        if not earlier_s:
            return self.floor_s
        return max(self.floor_s, self.factor * statistics.median(earlier_s))


class _Call:
    """``fn(*args)`` with every array of its result computed, on a helper thread started by
    :meth:`start`.

    The call itself runs on the helper thread too: JAX may execute a cheap program inline,
    on the calling thread, instead of dispatching it.

    The helper thread lets go of the program, its inputs and its outputs before it signals,
    and :meth:`wait` takes the outcome out, so that no array is ever freed on that thread. A
    JAX array freed on a daemon thread while the interpreter exits aborts the process: its
    destructor lets go of the GIL, and a daemon thread that takes the GIL back then is
    unwound through that ``noexcept`` destructor ("FATAL: exception not rethrown"). Runs
    stopped by Ctrl-C between two of PPO's short segments ended that way 2 times in 10.
    """

    def __init__(self, fn: Callable[..., Any], args: tuple):
        self._done = threading.Event()
        self._work = [(fn, args)]
        self._outcome: list[Any] = []
        self._failure: list[BaseException] = []
        # Taken by whichever comes first: the helper thread, to run the call, or
        # :meth:`withdraw`, so that it never runs.
        self._claim = threading.Lock()

    def start(self) -> None:
        # A daemon thread: if the program never returns, neither does this thread, and it
        # must not keep the interpreter from exiting.
        threading.Thread(target=self._call, name="ajax-watchdog-call", daemon=True).start()

    def _call(self) -> None:
        if not self._claim.acquire(blocking=False):
            return
        # In flight from here, on this thread: a call withdrawn, or whose thread an interrupt
        # kept from starting, never is, and exiting never waits for it.
        _IN_FLIGHT.add(self)
        fn, args = self._work.pop()
        try:
            self._outcome.append(jax.block_until_ready(fn(*args)))
        except BaseException as error:  # re-raised on the caller's thread
            self._failure.append(error)
        finally:
            del fn, args
            _IN_FLIGHT.discard(self)
            self._done.set()

    def forsake(self) -> None:
        """Stop counting this call as in flight: it hung, and exiting must not wait for it."""
        _IN_FLIGHT.discard(self)

    def withdraw(self) -> bool:
        """True if the call had not started running, and now never will."""
        if not self._claim.acquire(blocking=False):
            return False
        self._work.clear()
        return True

    def wait(self, limit_s: float) -> tuple[bool, Any]:
        """``(True, result)``, or ``(False, None)`` if the call takes more than ``limit_s``
        seconds from now; an error raised by the call is raised here. Once it has answered
        with the result or the error, the call holds neither."""
        if not self._done.wait(limit_s):
            return False, None
        if self._failure:
            raise self._failure.pop()
        return True, self._outcome.pop()


#: The calls whose program is computing. One a second Ctrl-C abandoned is still here when
#: the interpreter exits; if its program returns while the interpreter finalises, its thread
#: is unwound on its way back into Python and the process aborts, as above.
_IN_FLIGHT: set[_Call] = set()


def in_flight() -> bool:
    """Whether a watched program is still computing (one a second Ctrl-C abandoned)."""
    return bool(_IN_FLIGHT)


@atexit.register
def _wait_for_programs_in_flight() -> None:
    """At the interpreter's exit, before it finalises, wait for a program a second Ctrl-C
    abandoned, so that the process does not abort when it returns; a Ctrl-C while waiting
    exits at once, skipping the finalisation, with status 130. (``ajax train`` exits at
    once without waiting: :func:`exit_now`.)"""
    calls = list(_IN_FLIGHT)
    if not calls:
        return
    sys.stderr.write(
        "Ajax: waiting for the program in flight to finish before exiting (XLA cannot stop "
        "it); Ctrl-C exits at once.\n"
    )
    try:
        for call in calls:
            call._done.wait()
    except KeyboardInterrupt:
        exit_now(130)


def exit_now(status: int) -> None:
    """Exit with ``status`` without the interpreter's finalisation, which a program still
    computing would abort; standard output and error are flushed first. Only for a process
    whose every file and row is written: nothing else is closed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


class CallInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, in a run) arrived while a watched call was in flight; ``call``
    is still running, and its ``wait`` gives its result."""

    def __init__(self, message: str, call: _Call):
        super().__init__(message)
        self.call = call


#: The share of one core a process must have kept busy over a wait of ``limit_s`` for its
#: program to count as working: the deadlocks the watchdog is for leave the process asleep,
#: while a long program (a run without evaluations is one segment) keeps a core or more busy
#: however long it takes.
BUSY_SHARE = 0.1


def _cpu_s() -> float:
    """CPU seconds this process has used, every thread's."""
    times = os.times()
    return times.user + times.system


def call_watched(fn: Callable[..., Any], *args: Any, limit_s: float) -> tuple[bool, Any]:
    """``fn(*args)`` with every array of its result computed: ``(True, result)``, or
    ``(False, None)`` if that takes more than ``limit_s`` seconds with the process idle (it
    used less than :data:`BUSY_SHARE` of a core meanwhile). A call still computing after
    ``limit_s`` is waited for again, as long as it keeps the CPU busy. An error raised by
    ``fn`` or while computing its result is raised here. An interrupt is raised as it came
    if the call had not started, and as :class:`CallInterrupted` if it had, with which the
    caller may still wait for the result: an interrupt may arrive anywhere in here, even
    inside ``Thread.start``."""
    call = _Call(fn, args)
    try:
        call.start()
        while True:
            before = _cpu_s()
            finished, result = call.wait(limit_s)
            if finished:
                return finished, result
            if _cpu_s() - before < BUSY_SHARE * limit_s:
                call.forsake()
                return finished, result
    except KeyboardInterrupt as interrupt:
        if call.withdraw():
            raise
        raise CallInterrupted(str(interrupt), call) from None


def dump_stacks(directory: str | Path | None) -> Path:
    """Write every thread's Python stack to ``directory/hang_stacks.txt`` (a temporary file
    without a directory) and to standard error; returns the file."""
    if directory is None:
        handle, name = tempfile.mkstemp(prefix="ajax-hang-stacks-", suffix=".txt")
        os.close(handle)
        path = Path(name)
    else:
        path = Path(directory) / "hang_stacks.txt"
    with open(path, "w") as f:
        faulthandler.dump_traceback(file=f, all_threads=True)
    sys.stderr.write(f"Ajax: the run hung; Python stacks of every thread:\n{path.read_text()}")
    sys.stderr.flush()
    return path


def hang_error(what: str, waited_s: float, limit_s: float, stacks: Path) -> RunHungError:
    """The error a hung run raises: where it stopped, and what to report."""
    import jaxlib

    return RunHungError(
        f"The run hung: {what} made no progress for {waited_s:.0f} s (its limit was "
        f"{limit_s:.0f} s). Every row logged so far was written; the Python stacks of every "
        f"thread are in {stacks}. This is a deadlock in XLA's runtime or a bug in Ajax: please "
        "report it with that file, the run's config.json (agent, hyperparameters, seeds), jax "
        f"{jax.__version__} / jaxlib {jaxlib.__version__}, and, if it happens again, the "
        f"native stacks taken while it hangs: `gdb -p {os.getpid()} -batch -ex "
        '"thread apply all bt"`. If the program is only slow, raise the limit with '
        "train(..., watchdog=ajax.Watchdog(floor_s=...))."
    )
