"""Seeds sharded over devices: a run's seeds split over the devices it can use, each device
running the same per-seed program on its share.

On a CPU, JAX shows one device, and one program runs its kernels one after another: the
small kernels of an RL iteration (a few units wide, a few copies) keep one core busy while
the others wait. Each core made a device of its own, the seeds' shares run side by side
(PERFORMANCE_REPORT.md, "Seeds sharded over the CPU's cores"). So ``import ajax`` asks JAX
for one CPU device per core the process may use, unless

* ``AJAX_CPU_DEVICES`` says how many (``1`` keeps JAX's single device);
* the user chose already (``jax_num_cpu_devices``, or ``--xla_force_host_platform_device_count``
  in ``XLA_FLAGS``);
* JAX has started its backends, after which the count cannot change (import ajax before
  running any JAX operation to get it). Some libraries run one as they are imported
  (gymnax does), so ``import gymnax, ajax`` leaves one device; a run of several seeds
  that finds one CPU device where more were asked for warns once, naming the fix.

JAX places arrays and programs on the first device unless told otherwise, so other code
in the process runs as before; ``jax.devices()`` lists the extra devices, and code that
``pmap``s over every local device (Brax's trainers) spreads over them too.

A run gives each device as few seeds as any split allows (:func:`seed_split`): 8 seeds on 2
cores run 4 per core, 3 seeds 2 per core, the second core's second place taken by a copy of
the first seed whose results are dropped (it costs that core's time, not the run's, which
the first core's two seeds set). Accelerators are devices already: seeds spread over
several GPUs the same way.
"""

from __future__ import annotations

import os
import warnings

import jax
from jax.sharding import Mesh

from ajax.envs.core import SEED_AXIS

CPU_DEVICES_ENV = "AJAX_CPU_DEVICES"
_XLA_DEVICE_COUNT_FLAG = "xla_force_host_platform_device_count"


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system says)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def requested_cpu_devices() -> int:
    """The CPU device count to ask JAX for: ``AJAX_CPU_DEVICES`` or one per usable core."""
    text = os.environ.get(CPU_DEVICES_ENV, "").strip()
    if not text:
        return usable_cores()
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(
            f"{CPU_DEVICES_ENV}={text!r} is not a positive whole number: set it to the number of "
            "CPU devices to run seeds on (1 keeps JAX's single CPU device), or unset it."
        )
    return count


def configure() -> int | None:
    """At import: one JAX CPU device per usable core (see the module docstring). Returns the
    count set, or None where it was left to JAX or the user, or JAX had already started (it
    then refuses the setting, and :func:`_warn_if_unsplit` tells a multi-seed run why)."""
    count = requested_cpu_devices()
    if _user_chose():
        return None
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:
        return None
    return count


def _user_chose() -> bool:
    """Whether the user set JAX's CPU device count themselves."""
    flags = os.environ.get("XLA_FLAGS", "")
    return jax.config.jax_num_cpu_devices >= 0 or _XLA_DEVICE_COUNT_FLAG in flags


def _warn_if_unsplit(n_seeds: int, n_devices: int) -> None:
    """Warns (once per process, by Python's default filter) where a run of several seeds
    finds one CPU device although more were asked for: JAX started before ``import ajax``,
    and the seeds then share one core."""
    if n_seeds == 1 or n_devices > 1 or jax.default_backend() != "cpu" or _user_chose():
        return
    wanted = requested_cpu_devices()
    if wanted > 1:
        warnings.warn(
            f"Ajax runs these {n_seeds} seeds on one CPU device, not {wanted}: JAX had already "
            "run an operation when ajax was imported (some libraries do as they are imported, "
            "gymnax among them), so the CPU could no longer be split into one device per "
            "core. Import ajax before anything that uses JAX, or set "
            f"jax.config.update('jax_num_cpu_devices', {wanted}) before any JAX operation; "
            f"{CPU_DEVICES_ENV}=1 keeps one device and silences this.",
            stacklevel=3,
        )


def seed_split(n_seeds: int, n_devices: int) -> tuple[int, int]:
    """How ``n_seeds`` seeds spread over at most ``n_devices`` devices: the devices used and
    the seeds each runs, as few as any split allows, on as few devices as give that. Where
    the devices times their share exceed the seeds, the rest are places to fill."""
    share = -(-n_seeds // min(n_seeds, n_devices))
    return -(-n_seeds // share), share


def seed_mesh(n_seeds: int) -> tuple[Mesh | None, int]:
    """The devices a run of ``n_seeds`` seeds shards them over (a one-axis mesh named
    ``SEED_AXIS``; None where one device runs them all), and the seeds each device runs.

    A run of several processes (:mod:`ajax.distributed`) uses every device of every process,
    so that each process has a share to run: its seeds spread evenly over them all."""
    if jax.process_count() > 1:
        devices = jax.devices()
        return Mesh(devices, (SEED_AXIS,)), -(-n_seeds // len(devices))
    devices = jax.local_devices()
    _warn_if_unsplit(n_seeds, len(devices))
    used, share = seed_split(n_seeds, len(devices))
    return (Mesh(devices[:used], (SEED_AXIS,)) if used > 1 else None), share
