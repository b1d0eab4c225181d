"""The ``ajax`` command line: ``ajax train``, ``sweep``, ``eval``, ``plot``, ``list`` and
``cache``."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

#: Markup off: messages, paths and errors print as they are (a path's "[x]" was taken for
#: a style and dropped, and an error's "[/x]" raised); colours are given as styles.
console = Console(markup=False)


#: The exit status of a run the flags describe wrongly or that Ajax refuses (an unknown agent,
#: a hyperparameter out of range, a checkpoint of another run, a hung run).
REFUSED = 2
#: The exit status of a run the machine could not hold or write (a directory that cannot be
#: written, a full disk, too little memory).
FAILED = 1
#: The exit status of a run stopped by Ctrl-C or SIGTERM.
INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose refusal of flags it does not know says which were likely meant:
    a near name (``--total-timesteps``, SB3's and CleanRL's, is ``--n-timesteps`` here), or the
    agents whose hyperparameter it is where ``agent`` has none of that name."""

    def __init__(self, *args: Any, agent: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.agent = agent

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            hints = [self._hint(token) for token in extras if token.startswith("--")]
            hints = [hint for hint in hints if hint]
            self.error(
                f"unrecognized arguments: {' '.join(extras)}" + "".join(f"; {h}" for h in hints)
            )
        return parsed

    def _hint(self, token: str) -> str | None:
        flag = token.split("=", 1)[0]
        if self.agent is not None:
            from ajax import AGENTS

            name = flag[2:].replace("-", "_")
            owners = [
                n for n, cls in sorted(AGENTS.items()) if name in cls.Config.__dataclass_fields__
            ]
            if owners:
                return (
                    f"{flag} is a hyperparameter of {', '.join(owners)}, not of {self.agent} "
                    f"({self.prog} {self.agent} --help lists {self.agent}'s)"
                )
        known = [s for action in self._actions for s in action.option_strings if s.startswith("--")]
        near = difflib.get_close_matches(flag, known, n=1, cutoff=0.75)
        return f"{flag}: did you mean {near[0]}?" if near else None


def _count(text: str) -> int:
    """An integer flag's value, also as RL budgets are often written: ``1e6``, ``100_000``."""
    from ajax._values import as_number

    number = as_number(text, int)
    if not isinstance(number, int):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return number


def _hyperparameter_flag(field: dataclasses.Field) -> tuple[str, dict[str, Any]]:
    """A Config field's flag and its ``add_argument`` keywords."""
    flag = "--" + field.name.replace("_", "-")
    default = field.default
    options: dict[str, Any] = {
        "default": None,
        # argparse formats help with %: a doc's own percent signs are escaped.
        "help": f"{field.metadata.get('doc', '')} (default: {default})".replace("%", "%%"),
    }
    if isinstance(default, bool):
        options["action"] = argparse.BooleanOptionalAction
    elif isinstance(default, tuple):
        options.update(type=_flag_type(default[0] if default else 0), nargs="+")
    else:
        options["type"] = _flag_type(default)
    return flag, options


def _flag_type(default: Any) -> Callable[[str], Any]:
    """What parses a flag whose default is ``default``."""
    return _count if type(default) is int else type(default)


def _add_hyperparameter_flags(parser: argparse.ArgumentParser, config_type: type) -> None:
    group = parser.add_argument_group(f"{config_type.__name__} hyperparameters")
    for field in dataclasses.fields(config_type):
        flag, options = _hyperparameter_flag(field)
        group.add_argument(flag, **options)


def _n_envs_help(agent_cls: type | None) -> str:
    from ajax import AGENTS

    if agent_cls is not None:
        return (
            f"environment copies per seed (default: {agent_cls.default_n_envs}, "
            f"{agent_cls.__name__}'s own; each agent has its own default)"
        )
    defaults = ", ".join(f"{name} {cls.default_n_envs}" for name, cls in sorted(AGENTS.items()))
    return f"environment copies per seed (default: the agent's own: {defaults})"


def _train_parser(agent_cls: type | None, add_help: bool = True) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ajax train",
        agent=agent_cls and agent_cls.__name__,
        description="Train an agent over several seeds in one compiled program. Options may "
        "come before or after the agent's name.",
        epilog=f"Exit status: 0 when the run finished and was saved; {FAILED} when the machine "
        f"could not hold or write it (a directory that cannot be written, a full disk, too "
        f"little memory); {REFUSED} when the flags or the run were refused; {INTERRUPTED} "
        "when Ctrl-C or SIGTERM stopped it.",
        add_help=add_help,
    )
    parser.add_argument(
        "agent", nargs="?", help="agent name, e.g. PPO (see `ajax list`); not needed with --resume"
    )
    parser.add_argument("--env", help="environment id, e.g. CartPole-v1")
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="hyperparameters from a YAML or JSON mapping, or a whole run from a run's own "
        "config.json; flags given here override the file",
    )
    parser.add_argument(
        "--env-param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment parameter, repeatable (e.g. episode_length=128, backend=positional)",
    )
    parser.add_argument("--seeds", type=_count, default=1, help="number of seeds (0 .. N-1)")
    parser.add_argument("--seed-start", type=_count, default=0, help="first seed")
    parser.add_argument(
        "--n-timesteps", type=_count, default=100_000, help="steps per seed (default: 100000)"
    )
    parser.add_argument("--n-envs", type=_count, default=None, help=_n_envs_help(agent_cls))
    parser.add_argument("--log-dir", default="runs", help="where run directories go")
    parser.add_argument("--run-name", default=None, help="run directory name")
    parser.add_argument(
        "--log-frequency", type=_count, default=None, help="steps between evaluations (budget/20)"
    )
    parser.add_argument(
        "--num-episode-test", type=_count, default=10, help="episodes per evaluation"
    )
    _add_logging_flags(parser)
    _add_reliability_flags(parser)
    _add_process_flags(parser)
    if agent_cls is not None:
        _add_hyperparameter_flags(parser, agent_cls.Config)
    return parser


def _add_process_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        default=None,
        help="run across processes: process 0's host and a free port, the same in every "
        "process (see docs/sweeps.md, 'One run across hosts')",
    )
    parser.add_argument(
        "--num-processes", type=_count, default=1, metavar="N", help="processes in the run"
    )
    parser.add_argument(
        "--process-id", type=_count, default=0, metavar="I", help="this process, 0 to N-1"
    )


def _join_processes(args: argparse.Namespace) -> None:
    """Joins the run of several processes the flags name, before anything runs on JAX."""
    if args.coordinator is None:
        if args.num_processes != 1 or args.process_id != 0:
            raise ValueError(
                "--num-processes and --process-id need --coordinator HOST:PORT, process 0's "
                "host and a free port, given to every process."
            )
        return
    from ajax import distributed

    console.print(
        f"Joining a run of {args.num_processes} processes at {args.coordinator} as process "
        f"{args.process_id}"
    )
    distributed.initialize(args.coordinator, args.num_processes, args.process_id)


def _add_logging_flags(parser: argparse.ArgumentParser) -> None:
    from ajax.logging.config import WANDB_MODES

    parser.add_argument("--tensorboard", action="store_true", help="also write TensorBoard files")
    parser.add_argument("--wandb", action="store_true", help="also log to Weights & Biases")
    parser.add_argument(
        "--wandb-mode",
        choices=WANDB_MODES,
        default=None,
        help="the W&B run's mode with --wandb (default: WANDB_MODE, else online); offline "
        "writes it under the run directory, for `wandb sync` later",
    )


def _add_reliability_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--hang-floor-s",
        type=float,
        default=None,
        help="seconds a segment may take, at the least, before the run is declared hung and "
        "stopped (default: ajax.Watchdog's, 600; a segment may also take 20x the median)",
    )
    parser.add_argument(
        "--checkpoint-every",
        type=_count,
        default=None,
        metavar="N",
        help="save the whole training state every N evaluations, into the run directory's "
        "checkpoints/ (default: no checkpoints)",
    )
    parser.add_argument(
        "--checkpoint-keep",
        type=_count,
        default=2,
        metavar="K",
        help="checkpoints kept (default 2)",
    )
    parser.add_argument(
        "--resume",
        metavar="PATH",
        default=None,
        help="continue the run in this run (or checkpoint) directory from its latest "
        "checkpoint, as it was started: it takes no flags that describe the run (an agent "
        "named with it must be the run's), only --hang-floor-s and those of a run across "
        "processes",
    )


def _first_pass(argv: Sequence[str], command_parser: Callable = _train_parser) -> Any:
    """The agent ``argv`` names, wherever it stands among the options, and its ``--config``
    file: parsed with every agent's hyperparameter flags, so that a flag's value is never
    taken for the agent. ``command_parser(agent_cls, add_help)`` is the command's parser
    (``ajax train``'s by default)."""
    from ajax import AGENTS

    parser = command_parser(None, add_help=False)
    group = parser.add_argument_group("every agent's hyperparameters")
    seen = set()
    for cls in AGENTS.values():
        for field in dataclasses.fields(cls.Config):
            flag, options = _hyperparameter_flag(field)
            if flag not in seen:
                seen.add(flag)
                group.add_argument(flag, **(options | {"type": str, "help": None}))

    def unparsed(message: str) -> None:
        raise _Unparsed(message)

    # A bad flag is left to the command's own parser, whose error shows that agent's usage,
    # not every agent's flags.
    parser.error = unparsed
    try:
        return parser.parse_known_args(argv)[0]
    except _Unparsed:
        agent = next((token for token in argv if token in AGENTS), None)
        return argparse.Namespace(agent=agent, config=None)


class _Unparsed(Exception):
    """The flags did not parse while looking for the agent's name."""


def _run_defaults(path: str, run: dict[str, Any]) -> dict[str, Any]:
    """The flags that repeat the run a ``config.json`` describes."""
    if not run.get("env_registered", True):
        raise ValueError(
            f"{path} is a run on an environment object ({run.get('env_class')}), which the "
            "command line cannot rebuild: repeat it from Python with that environment."
        )
    seeds = run["seeds"]
    if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
        raise ValueError(
            f"{path} is a run of seeds {seeds}, not a range: ajax train runs --seeds N from "
            "--seed-start; give them, or repeat the run from Python."
        )
    logging = run.get("logging") or {}
    checkpoint = run.get("checkpoint") or {}
    return {
        "env": run["env_id"],
        "n_envs": run["n_envs"],
        "env_param": [f"{name}={value!r}" for name, value in run["env_params"].items()],
        "seeds": len(seeds),
        "seed_start": seeds[0],
        "n_timesteps": run["n_timesteps"],
        "num_episode_test": run["num_episode_test"],
        "log_frequency": logging.get("log_frequency"),
        # What the run recorded, as well as what it trained: its logs and its checkpoints.
        "tensorboard": logging.get("tensorboard", False),
        "wandb": logging.get("wandb", False),
        "wandb_mode": logging.get("wandb_mode"),
        "checkpoint_every": checkpoint.get("every"),
        "checkpoint_keep": checkpoint.get("keep", 2),
    }


def _config_defaults(path: str, agent_name: str | None) -> tuple[str, dict[str, Any]]:
    """The agent a config file is for and the defaults it gives ``ajax train``'s flags: a
    mapping of hyperparameters, or a run's own ``config.json`` (its agent, environment,
    copies, seeds, budget and hyperparameters), so that a run can be repeated exactly.
    Unknown names are refused, with the nearest ones."""
    from ajax import AGENTS
    from ajax._values import read_mapping
    from ajax.agents.base import as_field_type

    data = read_mapping(path, "hyperparameter names to values")
    defaults: dict[str, Any] = {}
    hyperparameters = data
    if "agent" in data and "hyperparameters" in data:
        if agent_name not in (None, data["agent"]):
            raise ValueError(
                f"{path} is a run of {data['agent']}, not {agent_name}: leave out the agent's "
                "name, or give a file of hyperparameters alone."
            )
        if "sweep" in data:
            raise ValueError(
                f"{path} is a sweep's run, of {len(data['sweep']['configs'])} configurations, "
                "and ajax train repeats one run: repeat the sweep in Python "
                "(train(..., sweep=...)), or one configuration from the config.json that "
                "SweepResult.save_apart writes for it."
            )
        agent_name, hyperparameters = data["agent"], data["hyperparameters"]
        defaults = _run_defaults(path, data)
    if agent_name is None:
        raise ValueError(
            f"Name the agent {path} sets hyperparameters for, e.g. ajax train PPO --config {path}."
        )
    fields = {f.name: f for f in dataclasses.fields(AGENTS[agent_name].Config)}
    parser = _train_parser(None, False)
    flags = {a.dest: a.option_strings[-1] for a in parser._actions if a.option_strings}
    flags["env_id"] = flags["env"]
    for name, value in hyperparameters.items():
        if name in flags and name not in fields:
            raise ValueError(
                f"{path}: {name!r} is a setting of the run, not a hyperparameter of "
                f"{agent_name}: give it as {flags[name]} (a file of hyperparameters holds the "
                "agent's alone)."
            )
        if name not in fields:
            near = difflib.get_close_matches(name, fields, n=3)
            hint = (
                f"did you mean {' or '.join(near)}?"
                if near
                else f"its hyperparameters are {', '.join(fields)}."
            )
            raise ValueError(f"{path}: {name!r} is not a hyperparameter of {agent_name}; {hint}")
        defaults[name] = as_field_type(fields[name], value)
        default = fields[name].default
        if isinstance(defaults[name], str) and not isinstance(default, str):
            raise ValueError(
                f"{path}: {name} takes a {type(default).__name__} like its default, {default}, "
                f"not the text {value!r}."
            )
    return agent_name, defaults


def _env_params(pairs: Sequence[str]) -> dict[str, Any]:
    """``NAME=VALUE`` flags as a dict; values are Python literals (numbers, True, tuples)
    where they parse as one, else strings."""
    params = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--env-param takes NAME=VALUE, got {pair!r}.")
        try:
            params[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            params[name] = text
    return params


def _unknown(name: str | None) -> bool:
    """Whether ``name`` is given and is no agent's, said in one line."""
    from ajax import AGENTS

    if name is None or name in AGENTS:
        return False
    console.print(f"Unknown agent {name!r}. Agents: {', '.join(sorted(AGENTS))}.", style="red")
    return True


def _hyperparameters(args: argparse.Namespace, agent_cls: type) -> dict[str, Any]:
    """The hyperparameters the flags (or the config file under them) give."""
    return {
        f.name: (tuple(v) if isinstance(v, list) else v)
        for f in dataclasses.fields(agent_cls.Config)
        if (v := getattr(args, f.name)) is not None
    }


def _agent(args: argparse.Namespace, agent_cls: type) -> Any:
    """The agent the flags describe."""
    hyperparameters = _hyperparameters(args, agent_cls)
    if args.env is None:
        raise ValueError(
            f"--env is required: the environment id, e.g. --env {agent_cls.example_env}."
        )
    return agent_cls(
        env_id=args.env,
        n_envs=args.n_envs,
        env_params=_env_params(args.env_param),
        **hyperparameters,
    )


@dataclasses.dataclass
class _Launch:
    """A run ready to start: ``run(progress)`` trains and returns the result."""

    run: Callable[[Any], Any]
    #: Steps per seed, for the progress bar (None on a resumed run until its first segment).
    total: int | None
    n_seeds: int


def _fresh_run(args: argparse.Namespace, agent: Any, watchdog: Any) -> _Launch:
    """The run the flags describe, checked before anything compiles; ValueError names what
    is missing or wrong."""
    from ajax import CheckpointConfig, LoggingConfig, _devices
    from ajax.logging.sinks import wandb_mode
    from ajax.run.plan import plan_run, positive_int, seeds_of

    if agent is None:
        raise ValueError("Name an agent (e.g. ajax train PPO ...), or --resume a run.")
    if args.seeds <= 0:
        raise ValueError(f"--seeds must be a positive number of seeds, got {args.seeds}.")
    if args.log_frequency is not None:
        positive_int("log_frequency", args.log_frequency, "--log-frequency 10000")
    logging_config = LoggingConfig(
        log_frequency=(
            max(1, args.n_timesteps // 20) if args.log_frequency is None else args.log_frequency
        ),
        log_dir=args.log_dir,
        run_name=args.run_name,
        tensorboard=args.tensorboard,
        wandb=args.wandb,
        wandb_mode=args.wandb_mode,
    )
    if args.wandb:
        wandb_mode(logging_config)  # before the progress bar: train() checks it too
    checkpoint = None
    if args.checkpoint_every is not None:
        checkpoint = CheckpointConfig(every=args.checkpoint_every, keep=args.checkpoint_keep)
    # train() refuses these too; here they are refused before the run's first line.
    seeds = seeds_of(list(range(args.seed_start, args.seed_start + args.seeds)))
    plan = plan_run(agent, args.n_timesteps, logging_config)
    positive_int("num_episode_test", args.num_episode_test, "--num-episode-test 10")
    mesh, share = _devices.seed_mesh(len(seeds))
    split = "" if mesh is None else f", {share} on each of {mesh.size} devices"
    if args.coordinator is not None:
        split += f" of {args.num_processes} processes (this is process {args.process_id})"
    console.print(f"Training {agent!r} on seeds {seeds[0]}..{seeds[-1]}{split}")
    steps = plan.n_iterations * plan.steps_per_iteration
    if steps != args.n_timesteps:
        console.print(
            f"{steps:,} steps per seed in whole iterations of {plan.steps_per_iteration:,}, "
            f"not {args.n_timesteps:,}"
        )

    def run(progress: Any) -> Any:
        return agent.train(
            seed=seeds,
            n_timesteps=args.n_timesteps,
            num_episode_test=args.num_episode_test,
            logging_config=logging_config,
            progress=progress,
            watchdog=watchdog,
            checkpoint=checkpoint,
        )

    return _Launch(run, args.n_timesteps, len(seeds))


#: What ``--resume`` takes besides the run: how to watch it and how its processes meet.
_RESUME_FLAGS = {"agent", "resume", "hang_floor_s", "coordinator", "num_processes", "process_id"}


def _given(argv: Sequence[str], agent_cls: type | None) -> list[str]:
    """The destinations of the options ``argv`` gives, in its order, defaults left out."""
    parser = _train_parser(agent_cls, add_help=False)
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return list(vars(parser.parse_args(argv)))


def _resumed_run(
    args: argparse.Namespace, agent_cls: type | None, watchdog: Any, given: list[str]
) -> _Launch:
    """The run ``--resume`` names, from its latest checkpoint, as it was started: flags that
    would describe another run are refused rather than ignored. FileNotFoundError where
    there is no checkpoint."""
    from ajax import resume
    from ajax.checkpoint import latest_checkpoint

    other = [name for name in given if name not in _RESUME_FLAGS]
    if other:
        flags = ", ".join("--" + name.replace("_", "-") for name in other)
        raise ValueError(
            f"--resume continues the run as it was started, so {flags} cannot change it: "
            "leave them out. To run it otherwise, start a new run from its settings: ajax "
            "train --config RUN/config.json, with the flags to change."
        )
    try:
        found = latest_checkpoint(args.resume)
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"{error} (ajax train: a run started with --checkpoint-every N)"
        ) from None
    run_agent = found.meta["run_config"]["agent"]
    if agent_cls is not None and agent_cls.__name__ != run_agent:
        raise ValueError(
            f"{found.directory} checkpoints a run of {run_agent}, not {agent_cls.__name__}: "
            "leave out the agent's name, or name the run's."
        )
    if "sweep" in found.meta["run_config"]:
        raise ValueError(
            f"{found.directory} checkpoints a sweep (train(..., sweep=...)), whose result is a "
            f"run per configuration: resume it in Python, ajax.resume({str(args.resume)!r}), "
            "and save its runs with the SweepResult's save_apart."
        )
    console.print(f"Resuming the run in {found.directory} after segment {found.step}")

    def run(progress: Any) -> Any:
        return resume(args.resume, progress=progress, watchdog=watchdog)

    return _Launch(run, None, len(found.meta["run_config"]["seeds"]))


def _progress_callback(bar: Progress, task: Any, n_seeds: int) -> Callable[..., None]:
    """The ``progress`` argument of a run, moving ``task`` of ``bar``: steps done, steps per
    second over every seed since the first segment, and the latest evaluation return."""
    clock: dict[str, float] = {}

    def progress(done: int, total: int, summary: dict[str, float]) -> None:
        now = time.perf_counter()
        clock.setdefault("start", now - 1e-9)
        clock.setdefault("done", done)
        speed = (done - clock["done"]) * n_seeds / max(now - clock["start"], 1e-9)
        bar.update(
            task,
            completed=done,
            total=total,
            description="training",
            speed=f"{speed:,.0f}",
            eval=f"{summary.get('episode_return', float('nan')):.1f}",
        )

    return progress


_COLUMNS = (
    TextColumn("[bold]{task.description}"),
    BarColumn(),
    MofNCompleteColumn(),
    TextColumn("steps"),
    TextColumn("{task.fields[speed]} steps/s"),
    TextColumn("eval return {task.fields[eval]}"),
    TimeElapsedColumn(),
)


def _run_with_progress(launch: _Launch) -> Any:
    """The run's result, trained under a progress bar. Where the run fails, the bar is
    cleared, so that the error's line follows the run's first line."""
    from ajax.distributed import is_writer

    if not is_writer():  # process 0 alone shows the run's progress
        return launch.run(None)
    bar = Progress(*_COLUMNS, console=console)
    task = bar.add_task("compiling", total=launch.total, speed="-", eval="-")
    bar.start()
    try:
        result = launch.run(_progress_callback(bar, task, launch.n_seeds))
    except KeyboardInterrupt:  # the bar stays, showing where the run stopped
        bar.stop()
        raise
    except BaseException:
        bar.live.transient = True  # cleared, not drawn a last time
        bar.live.stop()  # (Progress.stop would add an empty line on a non-terminal)
        raise
    bar.stop()
    return result


def _failure(error: BaseException) -> tuple[str, int]:
    """An error that ended a run, as one line naming its cause and its fix in the command
    line's terms, and the exit status."""
    from ajax.logging.writer import LogWriterError, RunDirectoryTaken

    if isinstance(error, LogWriterError):
        fix = "Free space there, or give --log-dir another directory, and run again."
        return f"{error} {fix}", FAILED
    if isinstance(error, MemoryError):
        fix = (
            "Run fewer --seeds at once, or lower what each seed stores (--buffer-size, or "
            "--store-size for UDRL; docs/memory.md)."
        )
        return (str(error) or f"Out of memory. {fix}"), FAILED
    if isinstance(error, RunDirectoryTaken):
        return f"{error} (ajax train: --run-name NAME, or --resume DIR)", REFUSED
    if isinstance(error, OSError):
        if isinstance(error.__cause__, OSError):  # Ajax's own: it names the path and the fix
            return f"{error} (ajax train: --log-dir DIR)", FAILED
        where = f" ({error.filename})" if error.filename else ""
        cause = f"{type(error).__name__}: {error.strerror or error}{where}."
        return (
            f"{cause} Check that path's permissions and free space, or give --log-dir "
            "another directory.",
            FAILED,
        )
    return str(error), REFUSED


def _report(error: BaseException) -> int:
    line, status = _failure(error)
    console.print(line, style="red", soft_wrap=True)
    return status


def _launch(args: argparse.Namespace, agent_cls: type | None, argv: Sequence[str]) -> _Launch:
    """The run the parsed flags ask for, fresh or resumed."""
    from ajax import Watchdog

    # Refused in the flags' own names, where the classes they build would name their fields.
    for flag, value, least, what in [
        ("--hang-floor-s", args.hang_floor_s, 1e-9, "a positive number of seconds"),
        ("--checkpoint-every", args.checkpoint_every, 1, "a positive number of evaluations"),
        ("--checkpoint-keep", args.checkpoint_keep, 1, "a positive number of checkpoints"),
        ("--seed-start", args.seed_start, 0, "a seed, 0 or more"),
    ]:
        if value is not None and value < least:
            raise ValueError(f"{flag} must be {what}, got {value:g}.")
    watchdog = None if args.hang_floor_s is None else Watchdog(floor_s=args.hang_floor_s)
    if args.resume is not None:
        return _resumed_run(args, agent_cls, watchdog, _given(argv, agent_cls))
    agent = None if agent_cls is None else _agent(args, agent_cls)
    return _fresh_run(args, agent, watchdog)


def _train(argv: Sequence[str]) -> int:
    from ajax import AGENTS, RunHungError, RunInterrupted
    from ajax.logging.writer import LogWriterError

    first = _first_pass(argv)
    name = first.agent
    if _unknown(name):
        return REFUSED
    try:
        config = first.config
        name, defaults = _config_defaults(config, name) if config else (name, {})
    except (ValueError, OSError) as error:
        console.print(str(error), style="red", soft_wrap=True)
        return REFUSED
    agent_cls = AGENTS.get(name) if name else None
    parser = _train_parser(agent_cls)
    parser.set_defaults(**defaults)
    args = parser.parse_args(argv)
    try:
        _join_processes(args)
        launch = _launch(args, agent_cls, argv)
    except (ValueError, FileNotFoundError, ImportError) as error:
        console.print(str(error), style="red", soft_wrap=True)
        return REFUSED
    try:
        result = _run_with_progress(launch)
    except RunInterrupted as interrupted:
        again = (
            f" (ajax train --resume {interrupted.checkpoints})" if interrupted.checkpoints else ""
        )
        console.print(str(interrupted) + again, style="yellow")
        return INTERRUPTED
    except (ValueError, RunHungError, OSError, LogWriterError, MemoryError) as error:
        return _report(error)
    if result.log_dir is None:  # a process other than 0 of a run across processes
        console.print(f"process {args.process_id} finished; process 0 wrote the run directory")
        return 0
    try:
        run_dir = _save(result)
    except OSError as error:
        return _report(error)
    _print_summary(result, run_dir)
    return 0


def _save(result: Any) -> Path:
    """Writes the result and its learning curve into the run directory; returns it."""
    from ajax.plotting import plot_learning_curve

    run_dir = Path(result.log_dir)
    result.save(run_dir / "result")
    plot_learning_curve(result, run_dir / "learning_curve.png")
    return run_dir


def _print_summary(result: Any, run_dir: Path) -> None:
    returns = result.evaluations["episode_return"]
    table = Table(title=f"{result.agent.name} on {result.agent.env_id}")
    table.add_column("seed")
    table.add_column("final eval return", justify="right")
    table.add_column("best eval return", justify="right")
    for seed, curve in zip(result.seeds, returns, strict=True):
        table.add_row(str(seed), f"{curve[-1]:.1f}", f"{curve.max():.1f}")
    console.print(table)
    summary = result.summary()
    t = result.timings
    # A finished run resumed again has no steps left to run, and so no rate. The run's
    # evaluations are inside its compiled segments, so its time holds them: said, since a
    # task of long episodes (target-gym's 10,000 steps) can spend most of a run evaluating.
    rate = (
        f" ({t['timesteps_run'] * len(result.seeds) / t['run_s']:,.0f} steps/s over all seeds,"
        " evaluations included)"
        if t["timesteps_run"]
        else ""
    )
    console.print(
        f"mean over seeds: final {summary['final']:.1f}, best {summary['best']:.1f}; "
        f"compile {t['compile_s']:.1f} s, run {t['run_s']:.1f} s{rate}"
    )
    if "final_iqm" in summary:
        low, high = summary["final_iqm_interval"]
        console.print(
            f"final IQM over {len(result.seeds)} seeds: {summary['final_iqm']:.1f} "
            f"[{low:.1f}, {high:.1f}] (95% bootstrap interval)"
        )
    for report in result.diverged:
        console.print(
            f"seed {report['seed']} diverged at step {report['timestep']:,} "
            f"({report['metric']} was not finite): frozen from there, its evaluations NaN",
            style="red",
        )
    console.print(f"run directory: {run_dir}")


def _eval(argv: Sequence[str]) -> int:
    parser = _Parser(
        prog="ajax eval",
        description="Evaluate a saved run's policies in deterministic episodes, or record one "
        "seed's episodes to a video.",
    )
    parser.add_argument("run_dir", help="a run directory of ajax train, or its result/")
    parser.add_argument(
        "--episodes", type=_count, default=None, help="episodes per seed (20; 1 for a video)"
    )
    parser.add_argument("--seed-index", type=_count, default=None, help="only this seed (0-based)")
    parser.add_argument("--seed", type=_count, default=0, help="seed of the evaluation episodes")
    parser.add_argument(
        "--video", default=None, help="write seed-index's episodes to this .gif or .mp4"
    )
    args = parser.parse_args(argv)
    import ajax
    from ajax.result import IQM_MIN_SEEDS, episode_returns
    from ajax.stats import iqm, iqm_interval
    from ajax.video import NoOpenGL, record_video, use_egl_without_display

    if args.video is not None:
        use_egl_without_display()  # before ajax.load imports MuJoCo with a Brax task
    try:
        result = ajax.load(args.run_dir)
        n_seeds = len(result.seeds)
        if args.seed_index is not None and not 0 <= args.seed_index < n_seeds:
            raise ValueError(
                f"--seed-index {args.seed_index} is out of range: the run has {n_seeds} seeds, "
                f"indices 0..{n_seeds - 1}."
            )
        if args.episodes is not None and args.episodes <= 0:
            raise ValueError(f"--episodes must be a positive number, got {args.episodes}.")
        if args.video is not None:
            episodes = 1 if args.episodes is None else args.episodes
            recorded = record_video(result, args.video, args.seed_index or 0, episodes, args.seed)
            console.print(
                f"wrote {recorded['frames']} frames of {len(recorded['episode_lengths'])} "
                f"episode(s), returns {', '.join(f'{r:.1f}' for r in recorded['episode_returns'])}"
                f", to {recorded['path']}"
            )
            return 0
        returns = episode_returns(result, 20 if args.episodes is None else args.episodes, args.seed)
    except (ValueError, FileNotFoundError, ImportError, NoOpenGL) as error:
        console.print(str(error), style="red", soft_wrap=True)
        return REFUSED
    except OSError as error:  # a video that cannot be written
        console.print(str(error), style="red", soft_wrap=True)
        return FAILED
    indices = range(n_seeds) if args.seed_index is None else [args.seed_index]
    # A line of its own: as the table's title it wrapped to the narrow table's width.
    console.print(f"{result.agent.name} on {result.agent.env_id}: {returns.shape[1]} episodes")
    table = Table()
    table.add_column("seed")
    table.add_column("mean return", justify="right")
    table.add_column("std", justify="right")
    for i in indices:
        table.add_row(str(result.seeds[i]), f"{returns[i].mean():.1f}", f"{returns[i].std():.1f}")
    console.print(table)
    # Over seeds, each seed's mean return is one score; one seed's episodes are the scores.
    scores = returns.mean(axis=1) if args.seed_index is None else returns[args.seed_index]
    over = (
        f"{n_seeds} seed{'s' * (n_seeds > 1)}"
        if args.seed_index is None
        else (f"{len(scores)} episode{'s' * (len(scores) > 1)}")
    )
    if len(scores) < IQM_MIN_SEEDS:  # as a run's summary: too few for a bootstrap interval
        console.print(f"mean over {over}: {scores.mean():.1f}")
        return 0
    low, high = iqm_interval(scores)
    console.print(
        f"IQM over {over}: {iqm(scores):.1f} [{low:.1f}, {high:.1f}] (95% bootstrap interval)"
    )
    return 0


def _plot(argv: Sequence[str]) -> int:
    parser = _Parser(
        prog="ajax plot",
        description="Overlay saved runs' learning curves: the IQM over seeds with a 95% band.",
    )
    parser.add_argument(
        "run_dirs",
        nargs="+",
        help="run directories (of ajax train, or of any run with a logging config: a sweep's "
        "gives a curve per configuration) or saved results",
    )
    parser.add_argument(
        "-o",
        "--output",
        default="curves.png",
        help="the image to write (default curves.png, replaced if it exists): a .png unless "
        "it ends in another image format; into a directory, its curves.png",
    )
    args = parser.parse_args(argv)
    from ajax.plotting import plot_runs

    args.output = Path(args.output)
    if args.output.is_dir():
        args.output /= "curves.png"
    elif not args.output.suffix:
        args.output = args.output.with_suffix(".png")
    try:
        out = plot_runs(args.run_dirs, args.output)
    except (ValueError, FileNotFoundError) as error:
        console.print(str(error), style="red", soft_wrap=True)
        return REFUSED
    console.print(f"wrote {out}", soft_wrap=True)  # whole, to copy
    return 0


def _sweep_parser(agent_cls: type | None, add_help: bool = True) -> argparse.ArgumentParser:
    from ajax.studies import HEARTBEAT_S

    parser = _Parser(
        prog="ajax sweep",
        agent=agent_cls and agent_cls.__name__,
        description="Search an agent's hyperparameters in an Optuna study that any number of "
        "workers share: run this command on as many machines as you like with one --storage "
        "and --study. Each trial trains --seeds seeds; its value is the IQM (from 5 seeds, "
        "else the mean) of their final evaluations.",
        epilog=f"Exit status: 0 when the study holds --n-trials trials; {FAILED} when the "
        f"worker stopped because its trials kept failing; {REFUSED} when the flags or the "
        f"space were refused; {INTERRUPTED} when Ctrl-C or SIGTERM stopped the worker (its "
        "running trial is recorded as failed).",
        add_help=add_help,
    )
    parser.add_argument("agent", nargs="?", help="agent name, e.g. PPO; not needed with --show")
    parser.add_argument("--env", help="environment id, e.g. CartPole-v1")
    parser.add_argument(
        "--space",
        metavar="FILE",
        help="YAML or JSON: per hyperparameter {low, high} (log: true for a log scale, step "
        "for a grid) or {choices: [...]}",
    )
    parser.add_argument(
        "--config", metavar="FILE", default=None, help="hyperparameters fixed for every trial"
    )
    parser.add_argument(
        "--env-param", action="append", default=[], metavar="NAME=VALUE", help="as ajax train's"
    )
    parser.add_argument(
        "--n-trials", type=_count, default=50, help="trials in the study, all workers together"
    )
    parser.add_argument("--seeds", type=_count, default=4, help="seeds per trial (0 .. N-1)")
    parser.add_argument("--n-timesteps", type=_count, default=100_000, help="steps per seed")
    parser.add_argument("--n-envs", type=_count, default=None, help=_n_envs_help(agent_cls))
    parser.add_argument(
        "--log-frequency", type=_count, default=None, help="steps between evaluations (budget/20)"
    )
    parser.add_argument(
        "--num-episode-test", type=_count, default=10, help="episodes per evaluation"
    )
    parser.add_argument(
        "--storage",
        default="sqlite:///sweep.db",
        help="the study's database: sqlite:///FILE on one machine, or a PostgreSQL URL "
        "(postgresql+psycopg://user:password@host/db) for workers on many",
    )
    parser.add_argument("--study", default=None, help="the study's name (default: AGENT_ENV)")
    parser.add_argument("--log-dir", default="runs", help="trials' run directories go in DIR/STUDY")
    parser.add_argument(
        "--batch",
        type=_count,
        default=4,
        help="trials asked at a time; those differing only in batchable hyperparameters train "
        "as one grid, compiled once (1: one trial at a time)",
    )
    parser.add_argument(
        "--heartbeat-s",
        type=_count,
        default=HEARTBEAT_S,
        help="seconds between a running trial's heartbeats; a trial silent for twice this is "
        "failed (its worker was killed)",
    )
    parser.add_argument(
        "--show",
        action="store_true",
        help="print the study's best trials and write its history and importance plots",
    )
    parser.add_argument("-o", "--output", default=".", help="where --show writes its plots")
    if agent_cls is not None:
        _add_hyperparameter_flags(parser, agent_cls.Config)
    return parser


def _study_spec(args: argparse.Namespace, agent_cls: type, fixed: dict[str, Any]) -> Any:
    """The study the flags describe; ValueError names what is missing or wrong."""
    from ajax.studies import StudySpec, read_space

    if args.env is None or args.space is None:
        raise ValueError("--env and --space are required, e.g. --env CartPole-v1 --space s.yaml.")
    counts = ("n_trials", "seeds", "n_timesteps", "heartbeat_s", "batch", "num_episode_test")
    for flag in (*counts, "log_frequency"):
        value = getattr(args, flag)
        if value is not None and value <= 0:  # a log_frequency left out is the budget's 1/20
            raise ValueError(f"--{flag.replace('_', '-')} must be positive.")
    return StudySpec(
        agent=agent_cls.__name__,
        env_id=args.env,
        space=read_space(args.space, agent_cls),
        fixed=fixed | _hyperparameters(args, agent_cls),
        env_params=_env_params(args.env_param),
        n_envs=args.n_envs,
        seeds=args.seeds,
        n_timesteps=args.n_timesteps,
        log_frequency=args.log_frequency,
        num_episode_test=args.num_episode_test,
    )


def _show_study(args: argparse.Namespace) -> int:
    from ajax._values import as_text
    from ajax.studies import show

    name = args.study or (f"{args.agent}_{args.env}" if args.agent and args.env else None)
    if name is None:
        raise ValueError("--show needs --study NAME (or the agent and --env it was named by).")
    shown = show(args.storage, name, args.output)
    states = ", ".join(f"{n} {state}" for state, n in shown["states"].items()) or "no trials"
    console.print(f"study {name} in {args.storage}: {states}")
    if shown["last_failure"] is not None:
        number, error = shown["last_failure"]
        console.print(f"the latest failed trial, {number}: {error}", soft_wrap=True)
    if not shown["best"]:
        console.print("no trial has completed yet: no best trials, and no plots")
        return 0
    table = Table(title="best trials")
    for column in ("trial", "value", "hyperparameters"):
        table.add_column(column)
    for t in shown["best"]:
        params = ", ".join(f"{k}={as_text(v)}" for k, v in t["params"].items())
        table.add_row(str(t["number"]), f"{t['value']:.2f}", params)
    console.print(table)
    # Below the table, whole: a table's cell would cut or fold a path, which users copy.
    for t in shown["best"]:
        console.print(f"trial {t['number']}: {t['run_dir']}", soft_wrap=True)
    for what, path in shown["figures"].items():
        console.print(f"wrote the {what} plot: {path}")
    return 0


def _sweep(argv: Sequence[str]) -> int:
    from ajax import AGENTS
    from ajax.logging import RunDirectoryTaken
    from ajax.studies import StudyFailing, run_worker

    name = _first_pass(argv, _sweep_parser).agent
    if _unknown(name):
        return REFUSED
    agent_cls = AGENTS.get(name) if name else None
    args = _sweep_parser(agent_cls).parse_args(argv)
    try:
        if args.show:
            return _show_study(args)
        if agent_cls is None:
            raise ValueError("Name the agent to search, e.g. ajax sweep PPO --env CartPole-v1 ...")
        fixed = _config_defaults(args.config, name)[1] if args.config else {}
        spec = _study_spec(args, agent_cls, fixed)
        study = args.study or f"{name}_{args.env.replace('/', '-')}"
        console.print(
            f"Worker on study {study} ({args.storage}): {name} on {args.env}, "
            f"{args.seeds} seed{'s' if args.seeds > 1 else ''} x {args.n_timesteps:,} steps "
            f"a trial, {args.n_trials} trials"
        )
        run_worker(
            spec,
            args.storage,
            study,
            args.n_trials,
            args.log_dir,
            args.heartbeat_s,
            args.batch,
            report=lambda line: console.print(line, highlight=False),
        )
    except KeyboardInterrupt:
        console.print("Interrupted: the running trial is recorded as failed.", style="yellow")
        return INTERRUPTED
    except (ValueError, FileNotFoundError, ImportError, RunDirectoryTaken) as error:
        console.print(str(error), style="red", soft_wrap=True)
        return REFUSED
    except StudyFailing as error:
        console.print(str(error), style="red", soft_wrap=True)
        return FAILED
    console.print(f"Done. ajax sweep --show --storage {args.storage} --study {study}")
    return 0


def _list(_: Sequence[str]) -> int:
    from ajax import AGENTS
    from ajax.envs import env_ids

    table = Table(title="Agents")
    table.add_column("agent")
    table.add_column("action spaces")
    table.add_column("default n_envs", justify="right")
    for name, cls in sorted(AGENTS.items()):
        spaces = ", ".join(t.__name__ for t in cls.action_spaces)
        table.add_row(name, spaces, str(cls.default_n_envs))
    console.print(table)
    console.print("Environments (the family prefix may be left out)", style="bold")
    for env_id in env_ids():
        console.print(f"  {env_id}")
    return 0


def _cache(argv: Sequence[str]) -> int:
    from ajax import _compile_cache

    parser = _Parser(prog="ajax cache", description="The compile cache.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="where the cache is and how big")
    prune = sub.add_parser("prune", help="delete least recently used entries")
    prune.add_argument("--max-bytes", type=_count, required=True, help="size to trim down to")
    args = parser.parse_args(argv)
    root = _compile_cache.cache_root()
    if args.command == "info":
        directory = _compile_cache.cache_dir()
        if not _compile_cache.enabled():
            state = f"no ({_compile_cache.DISABLE_ENV} is set)"
        elif _compile_cache.usable_dir() is None:
            state = f"no ({directory} cannot be made; set {_compile_cache.ROOT_ENV} elsewhere)"
        else:
            state = "yes"
        # Whole lines, not folded: the paths are for copying.
        for line in (f"root: {root}", f"this machine: {directory}", f"enabled: {state}"):
            console.print(line, soft_wrap=True, highlight=False)
        console.print(f"size: {_compile_cache.size_of(root):,} bytes")
        return 0
    if args.max_bytes < 0:
        console.print("--max-bytes must be >= 0.", style="red")
        return 2
    deleted = _compile_cache.prune(root, args.max_bytes)
    console.print(f"deleted {deleted:,} bytes; {_compile_cache.size_of(root):,} bytes remain")
    return 0


COMMANDS = {
    "train": _train,
    "sweep": _sweep,
    "eval": _eval,
    "plot": _plot,
    "list": _list,
    "cache": _cache,
}
USAGE = (
    "usage: ajax {train,sweep,eval,plot,list,cache} ... | ajax --version\n"
    "  train   train an agent over seeds (ajax train --help)\n"
    "  sweep   search hyperparameters in a shared Optuna study (ajax sweep --help)\n"
    "  eval    evaluate a saved run, or record a video of it (ajax eval --help)\n"
    "  plot    overlay saved runs' learning curves (ajax plot --help)\n"
    "  list    the agents and the environment ids\n"
    "  cache   the compile cache (ajax cache --help)"
)


def _warning_line(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as the command line shows it: its message alone, on standard error, not
    Python's file, line number and source line of the call that warned."""
    Console(stderr=True, markup=False).print(f"warning: {message}", style="yellow", soft_wrap=True)


def main(argv: Sequence[str] | None = None) -> int:
    as_program = argv is None  # not called from Python
    if as_program:
        warnings.showwarning = _warning_line
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--version"], ["-V"]):
        from ajax._version import __version__

        console.print(f"ajax {__version__}")
        return 0
    if not argv or argv[0] not in COMMANDS:
        console.print(USAGE, highlight=False)
        return 0 if argv[:1] in (["-h"], ["--help"]) else REFUSED
    status = COMMANDS[argv[0]](argv[1:])
    if as_program and "ajax.watchdog" in sys.modules:
        from ajax import watchdog

        if watchdog.in_flight():
            # A program a second Ctrl-C abandoned, the run's files written: exit now, rather
            # than wait for it or abort when it returns.
            watchdog.exit_now(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
