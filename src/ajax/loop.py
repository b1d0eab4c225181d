"""The run's host loop: ``train`` and ``resume`` check their inputs, plan the run, lower and
compile its two programs (:mod:`ajax.run`), then execute the segments one after another
(:class:`ajax.run.host.HostRun` hands each segment's summaries to the log writer, the
progress callback and the checkpointer).

``train`` compiles two programs once: ``init`` (every seed's initial state) and ``segment``
(a loop of agent iterations whose count is an argument, then, with a logging config, an
evaluation). One compiled segment serves every segment of the run, the shorter last one too,
and each segment's state is donated to the next. With a logging config the run stops at
every ``log_frequency`` boundary (rounded down to whole iterations); no host callback is
compiled in, so a logged run is served by the compile cache like any other.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

from ajax._version import __version__
from ajax._xla import compiler_options
from ajax.agent_registry import agent_from_config
from ajax.checkpoint import FORMAT as CHECKPOINT_FORMAT
from ajax.checkpoint import HOST_COPIES as CHECKPOINT_HOST_COPIES
from ajax.checkpoint import (
    Checkpoint,
    CheckpointConfig,
    checkpoint_directory,
    latest_checkpoint,
)
from ajax.distributed import check_same_run, is_writer, on_host, spans_processes
from ajax.logging import LoggingConfig, run_directory
from ajax.logging.sinks import wandb_mode
from ajax.result import TrainResult, env_class, env_spaces, environment_for
from ajax.run.host import HostRun, Progress, divergences
from ajax.run.lowering import lower_run, seeds_only
from ajax.run.plan import RunPlan, plan_run, positive_int, seeds_of, warn_if_only_warmup
from ajax.run.supervise import RunInterrupted, interrupts
from ajax.serialization import as_json
from ajax.sweep import Sweep, SweepResult, configurations, place_values
from ajax.watchdog import Watchdog

__all__ = ["RunInterrupted", "resume", "train"]


def train(
    agent: Any,
    seed: int | Sequence[int] = 0,
    n_timesteps: int = 100_000,
    num_episode_test: int = 10,
    logging_config: LoggingConfig | None = None,
    progress: Progress | None = None,
    watchdog: Watchdog | None = None,
    checkpoint: CheckpointConfig | None = None,
    sweep: Sweep | None = None,
) -> TrainResult | SweepResult:
    """Train ``agent`` once per seed, all seeds in one vmapped program.

    Args:
        agent: an Ajax agent (its environment, copies and hyperparameters).
        seed: one seed or a list; results gain a leading seed axis either way.
        n_timesteps: environment steps per seed, over all copies (rounded down to whole
            iterations).
        num_episode_test: deterministic episodes per evaluation (with a logging config).
        logging_config: evaluate and log every ``log_frequency`` steps; None compiles no
            evaluation at all.
        progress: called after each segment with (timesteps done, total, latest summary).
        watchdog: how long a compiled program may run before the run is declared hung and
            stopped with :class:`ajax.RunHungError`; ``Watchdog()`` (20 times the median
            segment, at least 10 minutes) when None.
        checkpoint: save the whole training state every ``checkpoint.every`` segments, which
            :func:`ajax.resume` continues exactly (needs a logging config, whose
            ``log_frequency`` ends each segment).
        sweep: batchable hyperparameters to sweep in the same two programs, every
            configuration with every seed: a mapping of names to lists of values (their
            product), or a list of mappings (those configurations). Returns a
            :class:`ajax.sweep.SweepResult`. See :mod:`ajax.sweep`.
    """
    seeds = seeds_of(seed)
    configs = None if sweep is None else configurations(agent, sweep)
    num_episode_test = positive_int("num_episode_test", num_episode_test, "num_episode_test=10")
    n_timesteps = positive_int("n_timesteps", n_timesteps, "n_timesteps=100_000")
    if logging_config is not None and not isinstance(logging_config, LoggingConfig):
        raise TypeError("logging_config must be an ajax.LoggingConfig or None.")
    _check_hooks(progress, watchdog)
    if checkpoint is not None and not isinstance(checkpoint, CheckpointConfig):
        raise TypeError("checkpoint must be an ajax.CheckpointConfig or None.")
    if checkpoint is not None and logging_config is None:
        raise ValueError(
            "Checkpoints are saved between segments, and without a logging config the whole "
            "run is one segment. Give a logging_config: its log_frequency ends each segment, "
            "and CheckpointConfig.every counts them."
        )
    plan = plan_run(agent, n_timesteps, logging_config)
    warn_if_only_warmup(agent, n_timesteps, plan)
    _check_wandb(logging_config)
    run_config = {
        "agent": agent.name,
        "env_id": agent.env_id,
        "env_registered": agent.registered_env_id is not None,
        "env_class": env_class(agent.env),
        "env_spaces": env_spaces(agent.env),
        "env_params": agent.env_params,
        "n_envs": agent.n_envs,
        "hyperparameters": agent.hyperparameters(),
        "seeds": seeds,
        "n_timesteps": n_timesteps,
        "num_episode_test": num_episode_test,
        "logging": None if logging_config is None else dataclasses.asdict(logging_config),
        "log_dir": None,
        "checkpoint": None,
    }
    if configs is not None:
        run_config["sweep"] = {"configs": configs}
    if checkpoint is not None:
        run_config["checkpoint"] = {"every": checkpoint.every, "keep": checkpoint.keep}
    check_same_run(as_json(run_config))
    directory = None
    if logging_config is not None:
        # A plain directory name, as LoggingConfig asks of a run_name: a family's "/" and
        # whatever a user's own environment id holds become "-".
        name = f"{agent.name}_{re.sub(r'[^A-Za-z0-9._=+-]+', '-', agent.env_id).strip('-')}"
        directory = run_directory(logging_config, name, claim=is_writer())
        run_config["log_dir"] = str(directory.absolute())
    if checkpoint is not None:
        run_config["checkpoint"]["dir"] = str(checkpoint_directory(checkpoint, directory))
    return _run(agent, plan, as_json(run_config), progress, watchdog, None)


def _check_wandb(logging_config: LoggingConfig | None) -> None:
    """Refuses, before anything compiles, a W&B run that could not start (see
    :func:`ajax.logging.sinks.wandb_mode`)."""
    if logging_config is not None and logging_config.wandb:
        wandb_mode(logging_config)


def _check_hooks(progress: Any, watchdog: Any) -> None:
    """Refuse, before anything compiles, a watchdog that is none and a progress callback
    that cannot take what the run passes it after each segment."""
    if watchdog is not None and not isinstance(watchdog, Watchdog):
        raise TypeError("watchdog must be an ajax.Watchdog or None.")
    if progress is None:
        return
    try:
        inspect.signature(progress).bind(0, 1, {})
    except TypeError:
        raise TypeError(
            f"progress must be a function of (timesteps done, total, latest summary), called "
            f"after each segment, or None; got {progress!r}."
        ) from None
    except ValueError:
        pass  # a callable whose signature Python cannot read: called as it is


def resume(
    path: str | Path,
    agent: Any | None = None,
    progress: Progress | None = None,
    watchdog: Watchdog | None = None,
    env: Any | None = None,
) -> TrainResult | SweepResult:
    """Continue a run from its latest complete checkpoint, and return what ``train`` would
    have (a :class:`ajax.sweep.SweepResult` for a sweep's run): the final state is the
    uninterrupted run's, bit for bit, and the run directory's logs are rewritten from the
    checkpoint, then continued, with no row missing or twice.

    Args:
        path: the run directory, or the checkpoint directory (``CheckpointConfig.dir``).
        agent: the agent, if given; it must be the checkpointed run's (name, environment,
            copies, hyperparameters). By default the agent is rebuilt from the checkpoint.
        progress: as for :func:`train`.
        watchdog: as for :func:`train`.
        env: the environment, needed only for a run on an environment object rather than a
            registered id (as for :func:`ajax.load`); its spaces must be those of the run.

    Refuses a checkpoint written by another version of Ajax, or that does not fit ``agent``.
    """
    _check_hooks(progress, watchdog)
    if agent is not None and env is not None:
        raise ValueError("Pass resume() an agent or an env, not both: the agent has its env.")
    found = latest_checkpoint(path)
    meta = found.meta
    written_by = meta.get("ajax_version")
    if meta.get("format") != CHECKPOINT_FORMAT or written_by != __version__:
        raise ValueError(
            f"The checkpoint in {found.directory} was written by Ajax {written_by} in "
            f"checkpoint format {meta.get('format')}; this is Ajax {__version__}, which reads "
            f"format {CHECKPOINT_FORMAT} and whose programs may compute differently, so it "
            "cannot continue the run exactly. Resume it with the Ajax that wrote it (version "
            f"{written_by}, checkpoint format {meta.get('format')})."
        )
    config = meta["run_config"]
    if agent is None:
        how = f"ajax.resume({str(path)!r}, env=...)"
        agent = agent_from_config(config, environment_for(config, env, found.directory, how))
    mine = {
        "agent": agent.name,
        "env_id": agent.env_id,
        "env_params": agent.env_params,
        "n_envs": agent.n_envs,
        "hyperparameters": agent.hyperparameters(),
    }
    detail = "; ".join(_differences(config, mine))
    if detail:
        raise ValueError(
            f"The checkpoint in {found.directory} is of another run ({detail}). Resume it "
            "with its own agent, or leave agent out to rebuild it from the checkpoint."
        )
    here = {"checkpoint": config["checkpoint"] | {"dir": str(found.directory)}}
    # A run directory that holds its own checkpoints, moved or copied elsewhere, resumes where
    # it now is: its logs and result go there, not to the directory it was trained in.
    if config["log_dir"] is not None and Path(config["checkpoint"]["dir"]) == (
        Path(config["log_dir"]) / "checkpoints"
    ):
        here["log_dir"] = str(found.directory.parent)
    config = config | here
    logging_config = LoggingConfig(**config["logging"])
    plan = plan_run(agent, config["n_timesteps"], logging_config)
    _check_wandb(logging_config)
    return _run(agent, plan, config, progress, watchdog, found)


def _differences(checkpoint: dict[str, Any], given: dict[str, Any], where: str = ""):
    """``name: checkpoint X, given Y`` for each entry of ``given`` that differs from the
    checkpoint's, compared as JSON (a tuple as the list it was saved as); a mapping's
    entries one by one, so that one changed hyperparameter is named alone."""
    for name, value in given.items():
        saved = checkpoint.get(name)
        if isinstance(value, dict) and isinstance(saved, dict):
            yield from _differences(saved, value | {k: None for k in saved.keys() - value}, name)
        elif as_json(value) != as_json(saved):
            yield f"{where}{'.' if where else ''}{name}: checkpoint {saved!r}, given {value!r}"


def _run(
    agent: Any,
    plan: RunPlan,
    run_config: dict[str, Any],
    progress: Progress | None,
    watchdog: Watchdog | None,
    start: Checkpoint | None,
) -> TrainResult | SweepResult:
    """The run ``run_config`` describes, from its start or from checkpoint ``start``."""
    run = HostRun(plan, run_config, progress, watchdog, start)
    seeds = run.seeds
    sweep = run_config.get("sweep")
    places = [label["seed"] for label in run.labels]
    values = None if sweep is None else place_values(sweep["configs"], run.labels)
    with interrupts() as received:
        try:
            start_s = time.perf_counter()
            # A resumed run starts from its checkpoint, and compiles no initialisation.
            programs = lower_run(
                agent,
                places,
                plan,
                run_config["num_episode_test"],
                evaluate=run_config["logging"] is not None,
                compile_init=start is None,
                values=values,
                host_copies=0 if run_config["checkpoint"] is None else CHECKPOINT_HOST_COPIES,
            )
            segment = programs.segment.compile(compiler_options(agent))
            init = None if start is not None else programs.init_compiled.result()
            compile_s = time.perf_counter() - start_s
            run_start = time.perf_counter()
            state, health = run.initial(init, programs, start)
            state, health = run.segments(segment, programs, state, health, received)
        except KeyboardInterrupt as interrupt:
            raise run.interrupted(interrupt) from None
        finally:
            run.close()
    run_s = time.perf_counter() - run_start

    if spans_processes(programs.mesh):
        # Every process's result is the whole run's, on one of its own devices.
        state = jax.device_put(on_host(state, programs.mesh), jax.local_devices()[0])
    if programs.places > len(places):
        # Without the first seed's copies, gathered on one device: a slice of the sharded
        # state would be replicated on every device.
        state = seeds_only(jax.device_put(state, jax.local_devices()[0]), len(places))
    result = TrainResult.from_history(
        agent=agent,
        state=state,
        seeds=places,
        n_timesteps=run.total,
        history=run.history,
        diverged=divergences(
            on_host(health, programs.mesh), run.labels, programs.metric_names, plan
        ),
        timings={
            "compile_s": compile_s,
            "run_s": run_s,
            "total_s": compile_s + run_s,
            "timesteps_run": run.total - plan.timesteps_after(0 if start is None else start.step),
        },
        log_dir=None if run.writer is None else str(run.writer.directory),
    )
    return result if sweep is None else SweepResult.split(result, sweep["configs"], seeds)
