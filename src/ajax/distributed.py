"""One run across several processes, on one host or many: JAX's multi-controller runtime.

Every process runs the same script with the same run (agent, seeds, budget) and calls
:func:`initialize` first, before any JAX operation. The run's seeds are then split over the
devices of every process (:func:`ajax._devices.seed_mesh`), each device running its share
with nothing exchanged but the few summaries each segment reports, which every process
gathers. Process 0 alone writes the run directory, its logs and its checkpoints; every
process returns the whole result. A CPU's collectives go through gloo, the CPU
implementation jaxlib ships.
"""

from __future__ import annotations

import json
import threading
import warnings
import zlib
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ajax.envs.core import SEED_AXIS

__all__ = ["initialize", "is_writer"]


def initialize(
    coordinator_address: str,
    num_processes: int,
    process_id: int,
    local_device_ids: list[int] | None = None,
    timeout_s: int = 300,
) -> None:
    """Join a run of ``num_processes`` processes as process ``process_id``, whose
    coordinator (process 0's host) listens at ``coordinator_address`` (``HOST:PORT``).
    Call it in every process, after ``import ajax`` and before any JAX operation: JAX fixes
    its devices at its first operation. ``local_device_ids`` limits this process to some of
    its host's accelerators (as :func:`jax.distributed.initialize`).

    Every process must join within ``timeout_s`` seconds. JAX then ends a process still
    waiting with a native abort that blames "another task" that died; just before it, this
    warns which run was not joined and how to start its processes."""
    host, _, port = str(coordinator_address).rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(
            f"The coordinator address {coordinator_address!r} is not HOST:PORT: give process "
            "0's host name or address and a free port, e.g. 10.0.0.1:7777."
        )
    for name, value in (("num_processes", num_processes), ("process_id", process_id)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer, got {value!r}.")
    if num_processes < 1 or not 0 <= process_id < num_processes:
        raise ValueError(
            f"process_id={process_id} is not one of the run's {num_processes} processes: "
            f"number them 0 to {num_processes - 1}, with the coordinator's host as 0."
        )
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int) or timeout_s < 1:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}.")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    margin = min(5.0, timeout_s / 2)
    warning = threading.Timer(
        timeout_s - margin,
        _not_joined,
        (coordinator_address, num_processes, process_id, timeout_s),
    )
    warning.daemon = True
    warning.start()
    try:
        jax.distributed.initialize(
            coordinator_address,
            num_processes=num_processes,
            process_id=process_id,
            local_device_ids=local_device_ids,
            initialization_timeout=timeout_s,
        )
    finally:
        warning.cancel()


def _not_joined(address: str, num_processes: int, process_id: int, timeout_s: int) -> None:
    warnings.warn(
        f"ajax: process {process_id} of a run of {num_processes} processes has waited nearly "
        f"{timeout_s} s at the coordinator {address} for the others; if they have not joined "
        "by then, JAX stops this process. Start every process with the same --coordinator "
        f"and --num-processes {num_processes}, each with its own --process-id (0 to "
        f"{num_processes - 1}, 0 on the coordinator's host), within {timeout_s} s of each "
        "other, and check that the others can reach that address.",
        stacklevel=1,
    )


def check_same_run(run_config: dict[str, Any]) -> None:
    """Refuse, in every process of a run across processes, a run its processes were given
    differently (another budget, seeds, hyperparameters): they would compile other programs
    or stop at other points, and a collective that one process calls and another does not
    fails in the transport ("Gloo AllGather failed") or waits. Each process's settings, but
    for where process 0 writes, are gathered as digests: a collective every process calls
    before anything else."""
    if jax.process_count() == 1:
        return
    logging = run_config.get("logging") or {}
    checkpoint = run_config.get("checkpoint") or {}
    settings = {
        k: v for k, v in run_config.items() if k not in ("logging", "log_dir", "checkpoint")
    }
    settings |= {
        "log_frequency": logging.get("log_frequency"),
        "checkpoint": checkpoint.get("every"),
    }
    digests = np.array(
        [zlib.crc32(json.dumps(v, sort_keys=True).encode()) for v in settings.values()], np.uint32
    )
    every = np.asarray(multihost_utils.process_allgather(digests))  # [processes, settings]
    differ = [name for name, column in zip(settings, every.T, strict=True) if len(set(column)) > 1]
    if differ:
        raise ValueError(
            f"The {jax.process_count()} processes of this run were given different "
            f"{', '.join(differ)}: start every process with the same flags (or the same "
            "train() call), but for --process-id."
        )


def is_writer() -> bool:
    """Whether this process writes the run's files: process 0, or the only process."""
    return jax.process_index() == 0


def spans_processes(mesh: Mesh | None) -> bool:
    """Whether a run on ``mesh`` has devices in other processes than this one."""
    return mesh is not None and jax.process_count() > 1


def local_places(mesh: Mesh | None, share: int) -> int:
    """The places of a run on ``mesh``, ``share`` on each device, that this process's devices
    hold."""
    if mesh is None:
        return share
    return share * sum(d.process_index == jax.process_index() for d in mesh.devices.flat)


def placed(tree: Any, mesh: Mesh | None) -> Any:
    """``tree``, the same whole-run host values in every process (leaves with the run's
    places first), as device arrays split over ``mesh`` along the places. Across processes,
    each device takes its rows of them (``jax.make_array_from_callback``): every process holds
    the whole of these small inputs, so none needs to know which rows are whose. In one
    process they stay on the host, where a program split over devices slices them as it is
    called (a device array would be sliced by a program compiled for the purpose)."""
    if not spans_processes(mesh):
        return tree
    sharding = NamedSharding(mesh, P(SEED_AXIS))
    return jax.tree.map(
        lambda x: jax.make_array_from_callback(x.shape, sharding, lambda index: x[index]), tree
    )


def state_on_devices(tree: Any, mesh: Mesh | None) -> Any:
    """A restored state (host arrays, the run's places first) on the devices the run's
    programs take it on, split over ``mesh`` along the places, one array at a time and
    copied, never aliased: the first segment then takes it in place (it is donated), and no
    host array outlives its copy. Placed on one device and aliased, a checkpoint's state was
    resharded into a second copy by the first segment while the host arrays stayed, so a
    resumed run held its state twice (PERFORMANCE_REPORT.md, "Checkpoints")."""
    if spans_processes(mesh):
        return placed(tree, mesh)
    sharding = None if mesh is None else NamedSharding(mesh, P(SEED_AXIS))
    leaves, structure = jax.tree.flatten(tree)
    del tree
    leaves.reverse()
    on_devices = []
    while leaves:
        leaf = jax.device_put(leaves.pop(), sharding, may_alias=False)
        on_devices.append(jax.block_until_ready(leaf))
    return jax.tree.unflatten(structure, on_devices)


def on_host(tree: Any, mesh: Mesh | None) -> Any:
    """``tree``'s arrays, split over ``mesh``'s devices, whole on the host of every process:
    across processes a collective, which every process must call at the same point."""
    if not spans_processes(mesh):
        return jax.device_get(tree)
    return multihost_utils.process_allgather(tree, tiled=True)
