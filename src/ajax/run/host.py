"""A run's host side (:class:`HostRun`): the summaries it has recorded, where they go (the
log writer, the progress callback, the checkpointer), its calls of the compiled programs
under the watchdog, and what it says when interrupted. :func:`ajax.loop.train` drives it."""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ajax.checkpoint import Checkpoint, CheckpointConfig, Checkpointer
from ajax.distributed import is_writer, on_host, placed, spans_processes, state_on_devices
from ajax.logging import LoggingConfig, LogWriter, refuse_a_taken_directory
from ajax.run.lowering import seeds_only, with_places, with_seeds
from ajax.run.plan import RunPlan
from ajax.run.program import summaries
from ajax.run.supervise import RunInterrupted, keyboard_interrupt, shown
from ajax.watchdog import CallInterrupted, Watchdog, call_watched, dump_stacks, hang_error

#: ``progress(timestep, total, means)``: called after each segment with the steps done per
#: seed, the run's total, and each summary's mean over the seeds.
Progress = Callable[[int, int, dict[str, float]], None]


def place_labels(run_config: dict[str, Any]) -> list[dict[str, int]]:
    """What each place of a run's programs is, in order, before the padding: its seed, and
    in a sweep its configuration's index (configuration-major)."""
    seeds = run_config["seeds"]
    sweep = run_config.get("sweep")
    if sweep is None:
        return [{"seed": s} for s in seeds]
    return [{"config": c, "seed": s} for c in range(len(sweep["configs"])) for s in seeds]


def divergences(
    health: dict[str, np.ndarray], labels: list[dict[str, int]], names: list[str], plan: RunPlan
) -> list[dict[str, Any]]:
    """The places that diverged (each labelled as :func:`place_labels`), with the step of
    the iteration that diverged (its last step) and the first metric that was not finite
    there (``params`` for the parameters)."""
    return [
        label
        | {
            "timestep": int(health["iteration"][i] + 1) * plan.steps_per_iteration,
            "metric": names[int(health["metric"][i])],
        }
        for i, label in enumerate(labels)
        if health["diverged"][i]
    ]


class HostRun:
    """A run's host side: the summaries it has recorded, where they go (the log writer, the
    progress callback, the checkpointer), and its calls of the compiled programs under the
    watchdog.

    In a run of several processes (:mod:`ajax.distributed`) every process keeps the whole
    history, gathered from every device after each segment, and only process 0 writes: its
    logs, its checkpoints (gathered in every process, since gathering is collective)."""

    def __init__(
        self,
        plan: RunPlan,
        run_config: dict[str, Any],
        progress: Progress | None,
        watchdog: Watchdog | None,
        start: Checkpoint | None,
    ):
        self.plan = plan
        self.config = run_config
        self.seeds = run_config["seeds"]
        #: Each place's seed (and configuration, in a sweep), before the padding.
        self.labels = place_labels(run_config)
        self.progress = progress
        self.watchdog = watchdog or Watchdog()
        self.total = plan.n_iterations * plan.steps_per_iteration
        self.history: list[tuple[int, dict[str, np.ndarray]]] = []
        if start is not None:
            self.history = [
                (t, {k: np.asarray(v, np.float64) for k, v in summary.items()})
                for t, summary in start.meta["history"]
            ]
        self.segments_done = self.saved = 0 if start is None else start.step
        #: The devices the places are split over, once the run is lowered (:meth:`initial`).
        self.mesh = None
        self.checkpoint_every = None
        self.checkpointer = None
        if run_config["checkpoint"] is not None:
            self.checkpoint_every = run_config["checkpoint"]["every"]
        if start is None and run_config["logging"] is not None and is_writer():
            refuse_a_taken_directory(Path(run_config["log_dir"]))
        if run_config["checkpoint"] is not None and is_writer():
            checkpoint = run_config["checkpoint"]
            self.checkpointer = Checkpointer(
                Path(checkpoint["dir"]),
                CheckpointConfig(checkpoint["every"], checkpoint["keep"]),
                fresh=start is None,
            )
        self.writer = None
        if run_config["logging"] is not None and is_writer():
            # Before compiling: a log directory that cannot be written fails the run at once.
            # A resumed run's logs are rewritten from the checkpoint's summaries.
            try:
                self.writer = LogWriter(
                    LoggingConfig(**run_config["logging"]),
                    Path(run_config["log_dir"]),
                    run_config,
                    [row for t, summary in self.history for row in self._rows(t, summary)],
                )
            except BaseException:
                if self.checkpointer is not None:
                    self.checkpointer.close()
                raise

    def _rows(self, timestep: int, summary: dict[str, np.ndarray]) -> list[dict[str, Any]]:
        return [
            {"timestep": timestep} | label | {k: float(v[i]) for k, v in summary.items()}
            for i, label in enumerate(self.labels)
        ]

    def record(self, timestep: int, outputs: Any) -> None:
        """Keep a finished segment's summary, hand its rows to the writer, report progress."""
        summary = summaries(seeds_only(on_host(outputs, self.mesh), len(self.labels)))
        self.history.append((timestep, summary))
        if self.writer is not None:
            self.writer.write(self._rows(timestep, summary))
            self.writer.check()  # a sink that has failed stops the run; its rows are kept
        if self.progress is not None:
            with warnings.catch_warnings():
                # A metric with no value yet (every seed NaN) is reported as NaN.
                warnings.simplefilter("ignore", RuntimeWarning)
                means = {k: float(np.nanmean(v)) for k, v in summary.items()}
            self.progress(timestep, self.total, means)

    def finished_segment(self, index: int, timestep: int, outputs: Any, state: Any) -> None:
        """Segment ``index`` ended at ``timestep`` with ``outputs``: record it, and save
        ``state`` (the state and health) where a checkpoint is due."""
        self.record(timestep, outputs)
        self.segments_done = index + 1
        if self.checkpoint_every and self.segments_done % self.checkpoint_every == 0:
            self.save(state)

    def save(self, state: Any) -> None:
        """Checkpoint ``state`` after the segments done. Within one process the checkpointer
        copies the arrays from the devices itself, once: gathering them to the host first,
        as across processes, left that copy on the state's arrays while the next segment ran,
        beside the checkpointer's own."""
        if spans_processes(self.mesh):
            state = on_host(state, self.mesh)
        if jax.tree.leaves(state)[0].shape[0] > len(self.labels):
            state = seeds_only(state, len(self.labels))
        if self.checkpointer is not None:
            history = [[t, {k: v.tolist() for k, v in s.items()}] for t, s in self.history]
            meta = {"run_config": self.config, "history": history}
            self.checkpointer.save(self.segments_done, state, meta)
        self.saved = self.segments_done

    def watched(self, program: Callable, args: tuple, what: str, durations: list[float]) -> Any:
        """``program(*args)``, computed, its time appended to ``durations`` (the earlier
        programs of its kind, which set its limit); stops the run if it hangs (see
        ajax.watchdog)."""
        limit_s = self.watchdog.limit_s(durations)
        started = time.perf_counter()
        finished, result = call_watched(program, *args, limit_s=limit_s)
        if not finished:
            stacks = dump_stacks(None if self.writer is None else self.writer.directory)
            raise hang_error(what, time.perf_counter() - started, limit_s, stacks)
        durations.append(time.perf_counter() - started)
        return result

    def finish(self, interrupt: CallInterrupted, what: str, durations: list[float]) -> Any:
        """The result of the call ``interrupt`` arrived in, once it finishes. XLA cannot stop
        a program, and one left running that finished while the interpreter exited aborted
        the process (its thread was unwound on its way back into Python; see
        docs/reliability.md). A second interrupt abandons it."""
        sys.stderr.write(
            f"Ajax: {shown(interrupt)}: stopping once {what} finishes; "
            "a second Ctrl-C abandons it.\n"
        )
        finished, result = interrupt.call.wait(self.watchdog.limit_s(durations))
        if not finished:
            raise interrupt
        return result

    def initial(self, init: Any, programs: Any, start: Checkpoint | None) -> tuple[Any, Any]:
        """The state and health the segments start from, on the devices of ``programs``:
        the init's, or the checkpoint's."""
        self.mesh = programs.mesh
        if start is None:
            what = "the seeds' initialisation"
            inputs = placed((programs.seeds, programs.values), self.mesh)
            try:
                state = self.watched(init, inputs, what, [])
            except CallInterrupted as interrupt:
                self.finish(interrupt, what, [])
                raise
            return state, placed(programs.health, self.mesh)
        template = (
            with_seeds(programs.init.out_info, len(self.labels)),
            seeds_only(programs.health, len(self.labels)),
        )
        return state_on_devices(with_places(start.state(template), programs.places), self.mesh)

    def segments(
        self, segment: Any, programs: Any, state: Any, health: Any, received: list[str]
    ) -> tuple[Any, Any]:
        """Run the segments left, one at a time; the final state and health. An interrupt
        lets the segment in flight finish, and records and checkpoints it, before it goes
        on up."""
        lengths, per_iteration = self.plan.segment_lengths, self.plan.steps_per_iteration
        durations: list[float] = []
        seeds, values = placed((programs.seeds, programs.values), self.mesh)
        for index in range(self.segments_done, len(lengths)):
            done = sum(lengths[:index])
            first, last = done * per_iteration, (done + lengths[index]) * per_iteration
            what = f"segment {index + 1} of {len(lengths)} (timesteps {first} to {last})"
            args = (state, health, seeds, values)
            args += (np.int32(done), np.int32(lengths[index]))
            try:
                state, health, outputs = self.watched(segment, args, what, durations)
            except CallInterrupted as interrupt:
                state, health, outputs = self.finish(interrupt, what, durations)
                self.record(last, outputs)
                self.segments_done = index + 1
                if self.checkpoint_every:
                    self.save((state, health))
                raise
            # One segment in flight at a time: its few scalars are fetched before the next is
            # dispatched (the rows are written by the writer thread). Overlapping segments
            # gained nothing measurable on a CPU, and with both queued on XLA's CPU thread
            # pool a run was once seen to stall on a 2-core machine.
            self.finished_segment(index, last, outputs, (state, health))
            if received:  # an interrupt whose exception native code swallowed
                raise keyboard_interrupt(received[0])
        return state, health

    def interrupted(self, interrupt: KeyboardInterrupt) -> RunInterrupted:
        """What the run raises on ``interrupt``: how far it got, and where to find it."""
        done = self.history[-1][0] if self.history else 0
        writer, checkpointer = self.writer, self.checkpointer
        where = f"its rows are in {writer.directory}" if writer else "it logged nothing"
        checkpoints = None
        if checkpointer is not None and self.saved:
            checkpoints = str(checkpointer.directory)
            where += (
                f"; its checkpoint after {self.plan.timesteps_after(self.saved):,} steps "
                f"continues it: ajax.resume({checkpoints!r})"
            )
        return RunInterrupted(
            f"The run was interrupted ({shown(interrupt)}) after {done:,} of {self.total:,} "
            f"steps per seed; {where}.",
            checkpoints,
        )

    def close(self) -> None:
        """Write every row recorded (to the log directory, or a fallback file if that
        failed) and finish every checkpoint started; on a normal end, an error and an
        interrupt alike."""
        if self.checkpointer is not None:
            self.checkpointer.close()
        if self.writer is not None:
            self.writer.close()
