"""Hyperparameter studies on Optuna (``ajax sweep``): a search space read from a file, trials
asked of a shared study and run one after another by each worker, the study kept in a
database. SQLite serves one machine; a PostgreSQL URL lets any number of workers, on any
machines, share one study, through Optuna's own storage rather than a scheduler of ours.

A trial's value is the score of its seeds' final evaluations (:func:`objective`). Each trial
runs in a directory of its own under ``log_dir/<study>/trial_NNNN`` (its ``config.json``,
metrics and saved result), so any trial can be loaded, evaluated or repeated with
``ajax train --config``. A worker keeps a heartbeat for its running trial in the study, so a
worker that is killed leaves a trial the next worker (or ``ajax sweep --show``) marks failed
once the heartbeat is older than its grace period.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import random
import shutil
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ajax._values import as_text, read_mapping
from ajax.agents.base import as_field_type, validate_config

#: Seconds between a running trial's heartbeats; a trial whose last heartbeat is older than
#: twice this is failed as stale.
HEARTBEAT_S = 60
#: The key under which a study records what it runs (agent, task, budget, space), so that a
#: worker started with other settings is refused rather than mixed into it.
SPEC_ATTR = "ajax_study"


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as error:
        raise ImportError(
            "ajax sweep needs Optuna (and psycopg for PostgreSQL): pip install 'ajax[sweep]'."
        ) from error
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


@dataclasses.dataclass(frozen=True)
class StudySpec:
    """What every trial of a study runs: the agent and task, the hyperparameters fixed for
    every trial, the space searched, the seeds and the budget."""

    agent: str
    env_id: str
    space: dict[str, dict[str, Any]]
    fixed: dict[str, Any] = dataclasses.field(default_factory=dict)
    env_params: dict[str, Any] = dataclasses.field(default_factory=dict)
    n_envs: int | None = None
    seeds: int = 4
    n_timesteps: int = 100_000
    log_frequency: int | None = None
    num_episode_test: int = 10

    @property
    def evaluation_every(self) -> int:
        """Steps between evaluations: the spec's, else a twentieth of the budget."""
        every = self.log_frequency
        return max(1, self.n_timesteps // 20) if every is None else every

    def agent_cls(self) -> type:
        from ajax import AGENTS

        return AGENTS[self.agent]

    def build(self, hyperparameters: Mapping[str, Any]) -> Any:
        """The agent of a trial with these searched values."""
        return self.agent_cls()(
            env_id=self.env_id,
            n_envs=self.n_envs,
            env_params=self.env_params,
            **(self.fixed | dict(hyperparameters)),
        )

    def as_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, default=list)


def read_space(source: str | Path | Mapping[str, Any], agent_cls: type) -> dict[str, dict]:
    """A search space for ``agent_cls``, from a YAML or JSON file or a mapping: per
    hyperparameter either ``{low, high}`` (with ``log: true`` for a log scale and ``step`` for
    a grid), a float range for a float field and an integer range for an integer one, or
    ``{choices: [...]}``. Unknown names, ranges of the wrong kind and bounds outside the
    field's documented range are refused, naming the fix."""
    if isinstance(source, Mapping):
        data, where = dict(source), "the space"
    else:
        where = str(source)
        data = read_mapping(source, "each searched hyperparameter to a range or choices")
    if not data:
        raise ValueError(
            f"{where} must map each searched hyperparameter to a range or choices, e.g. "
            "learning_rate: {low: 1e-4, high: 1e-2, log: true}."
        )
    fields = {f.name: f for f in dataclasses.fields(agent_cls.Config)}
    space = {}
    for name, spec in data.items():
        if name not in fields:
            near = difflib.get_close_matches(name, fields, n=3)
            hint = f"did you mean {' or '.join(near)}?" if near else f"its are {', '.join(fields)}."
            raise ValueError(
                f"{where}: {name!r} is not a hyperparameter of {agent_cls.__name__}; {hint}"
            )
        space[name] = _dimension(where, name, spec, fields[name], agent_cls.Config)
    return space


def _dimension(where: str, name: str, spec: Any, field: dataclasses.Field, config: type) -> dict:
    """One hyperparameter's range or choices, checked against its field."""
    default = field.default
    kind = type(default).__name__
    example = "{low: ..., high: ...}" if kind in ("int", "float") else "{choices: [...]}"
    if not isinstance(spec, dict) or not ({"choices"} <= set(spec) or {"low", "high"} <= set(spec)):
        raise ValueError(f"{where}: {name} needs {example}, got {spec!r}.")
    if "choices" in spec:
        extra = set(spec) - {"choices"}
        choices = spec["choices"]
        if extra or not isinstance(choices, list) or not choices:
            raise ValueError(f"{where}: {name}'s choices must be a non-empty list, alone.")
        values = [tuple(c) if isinstance(c, list) else as_field_type(field, c) for c in choices]
        _check_values(where, name, values, config)
        return {"choices": [list(v) if isinstance(v, tuple) else v for v in values]}
    extra = set(spec) - {"low", "high", "log", "step"}
    if extra:
        raise ValueError(
            f"{where}: {name} has unknown keys {sorted(extra)}; use low, high, log, step."
        )
    if kind not in ("int", "float"):
        raise ValueError(
            f"{where}: {name} is a {kind} (default {default!r}): search it with {{choices: [...]}}."
        )
    low, high = (as_field_type(field, spec[k]) for k in ("low", "high"))
    log, step = bool(spec.get("log", False)), spec.get("step")
    for bound in (low, high):
        if kind == "int" and (isinstance(bound, bool) or not isinstance(bound, int)):
            raise ValueError(f"{where}: {name} is a whole number: its low and high must be too.")
        if not isinstance(bound, int | float) or isinstance(bound, bool):
            raise ValueError(f"{where}: {name}'s low and high must be numbers, got {bound!r}.")
    if not low < high:
        raise ValueError(f"{where}: {name} needs low < high, got {low} and {high}.")
    if log and low <= 0:
        raise ValueError(f"{where}: {name} is searched on a log scale, so its low must be > 0.")
    if log and step is not None:
        raise ValueError(f"{where}: {name} takes log or step, not both (Optuna's rule).")
    _check_values(where, name, [low, high], config)
    out: dict[str, Any] = {"low": low, "high": high, "log": log}
    if step is not None:
        out["step"] = as_field_type(field, step)
    return out


def _check_values(where: str, name: str, values: list, config: type) -> None:
    """Refuse a value outside the field's documented range, with the range."""
    for value in values:
        try:
            validate_config(dataclasses.replace(config(), **{name: value}))
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None


def distributions(space: Mapping[str, dict]) -> dict[str, Any]:
    """Optuna's distribution for each dimension. Choices that are lists (layer sizes) are
    offered as their JSON text, since Optuna's choices are scalars (:func:`decoded`)."""
    optuna = _optuna()
    out = {}
    for name, spec in space.items():
        if "choices" in spec:
            choices = [json.dumps(c) if isinstance(c, list) else c for c in spec["choices"]]
            out[name] = optuna.distributions.CategoricalDistribution(choices)
        elif isinstance(spec["low"], int) and isinstance(spec["high"], int):
            out[name] = optuna.distributions.IntDistribution(
                spec["low"], spec["high"], log=spec["log"], step=spec.get("step", 1)
            )
        else:
            out[name] = optuna.distributions.FloatDistribution(
                spec["low"], spec["high"], log=spec["log"], step=spec.get("step")
            )
    return out


def decoded(params: Mapping[str, Any], space: Mapping[str, dict]) -> dict[str, Any]:
    """A trial's parameters as the agent takes them: list choices back to tuples."""
    out = {}
    for name, value in params.items():
        listed = "choices" in space[name] and any(
            isinstance(c, list) for c in space[name]["choices"]
        )
        out[name] = tuple(json.loads(value)) if listed and isinstance(value, str) else value
    return out


def objective(result: Any) -> float:
    """A trial's value: the interquartile mean of its seeds' final evaluation returns, from
    5 seeds up (the statistic the learning report and ``ajax train`` give; Agarwal et al.
    2021), else their mean. Robust to one odd seed without the bootstrap's cost. NaN where a
    seed diverged."""
    from ajax.result import IQM_MIN_SEEDS
    from ajax.stats import iqm

    final = np.asarray(result.evaluations["episode_return"], np.float64)[:, -1]
    return float(iqm(final) if len(final) >= IQM_MIN_SEEDS else final.mean())


def check_spec(spec: StudySpec) -> None:
    """Refuse, before anything compiles, a study whose trials could not run: the agent is
    built with each end of each range and each choice, the others at their fixed values,
    and the run's settings (seeds, budget, evaluations) are checked as ``train`` checks
    them, for every trial would fail on them alike."""
    from ajax import LoggingConfig
    from ajax.run.plan import plan_run, positive_int

    both = sorted(set(spec.space) & set(spec.fixed))
    if both:
        raise ValueError(
            f"{', '.join(both)} is both fixed (--config or a flag) and searched (--space): "
            "drop it from one of them."
        )
    agents = []
    for name, dimension in spec.space.items():
        values = dimension.get("choices") or [dimension["low"], dimension["high"]]
        for value in values:
            agents.append(spec.build({name: tuple(value) if isinstance(value, list) else value}))
    positive_int("seeds", spec.seeds, "--seeds 4")
    positive_int("num_episode_test", spec.num_episode_test, "--num-episode-test 10")
    logging_config = LoggingConfig(spec.evaluation_every)
    for agent in agents:  # the iteration's length may be searched (PPO's n_steps)
        plan_run(agent, spec.n_timesteps, logging_config)


def storage(url: str, heartbeat_s: int = HEARTBEAT_S, attempts: int = 5) -> Any:
    """Optuna's database storage at ``url``, with heartbeats every ``heartbeat_s`` seconds and
    a grace of twice that before a silent running trial is failed.

    Workers started together on a fresh PostgreSQL database race to create Optuna's tables,
    and all but one fail with a duplicate key (5 of 6 pairs here); the losers try again
    after a short random wait, when the tables exist."""
    import sqlalchemy.exc

    optuna = _optuna()

    def connect() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(
                url, heartbeat_interval=heartbeat_s, grace_period=2 * heartbeat_s
            )

    try:
        for _ in range(attempts - 1):
            try:
                return connect()
            except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
                time.sleep(random.uniform(0.2, 1.0))
        return connect()
    except (sqlalchemy.exc.SQLAlchemyError, ValueError) as error:
        # An unknown dialect, a server that does not answer, a path that cannot be written:
        # the database driver's first line says which.
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise ValueError(
            f"Cannot open the study storage {url}: {reason}. Give a database URL Ajax can "
            "reach: sqlite:///studies.db (a file), or postgresql+psycopg://USER:PASSWORD@HOST/"
            "DB with its server running."
        ) from None


def open_study(url: str, name: str, spec: StudySpec | None, heartbeat_s: int = HEARTBEAT_S):
    """The study ``name`` in the database at ``url``, created if ``spec`` is given and it
    does not exist; refused if it exists with another spec. Stale trials are failed first
    (``optuna.storages.fail_stale_trials``)."""
    optuna = _optuna()
    sampler = optuna.samplers.TPESampler(constant_liar=True)
    file = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None
    if spec is None and file is not None and not Path(file).is_file():
        raise ValueError(f"No study storage at {file} ({url}): give the --storage of a study.")
    db = storage(url, heartbeat_s)
    if spec is None:
        try:
            study = optuna.load_study(study_name=name, storage=db, sampler=sampler)
        except KeyError:
            names = optuna.get_all_study_names(db)
            raise ValueError(
                f"No study {name!r} in {url}; its studies: {', '.join(names) or 'none'}."
            ) from None
    else:
        study = optuna.create_study(
            study_name=name, storage=db, sampler=sampler, direction="maximize", load_if_exists=True
        )
        mine = spec.as_json()
        theirs = study.user_attrs.get(SPEC_ATTR)
        if theirs is None:
            study.set_user_attr(SPEC_ATTR, mine)
        elif theirs != mine:
            theirs, mine = json.loads(theirs), json.loads(mine)
            differ = "; ".join(
                f"{k}: the study's {theirs.get(k)!r}, given {mine.get(k)!r}"
                for k in sorted(theirs.keys() | mine.keys())
                if theirs.get(k) != mine.get(k)
            )
            raise ValueError(
                f"Study {name!r} in {url} runs other settings ({differ}): give the same "
                "agent, task, space, seeds and budget to join it, or a new --study."
            )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    return study


@contextlib.contextmanager
def heartbeat(study: Any, trials: list[Any]) -> Iterator[None]:
    """Record the heartbeats of the ``trials`` still in the list in the study's storage
    while the block runs, from a thread of its own. Optuna keeps one only inside
    ``Study.optimize``; ask-and-tell, which a worker uses to run each trial in its own run
    directory and report failures, has none."""
    db = study._storage
    interval = db.get_heartbeat_interval()
    stop = threading.Event()

    def beat() -> None:
        while True:
            for trial in list(trials):  # the caller removes those it has told
                db.record_heartbeat(trial._trial_id)
            if stop.wait(interval):
                return

    thread = threading.Thread(target=beat, name="ajax-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _counted(study: Any) -> int:
    """Trials toward the study's total: the complete and the running; failed ones are
    replaced."""
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)))


def grids(params: list[dict[str, Any]], batchable: tuple[str, ...]) -> list[list[int]]:
    """The indices of ``params`` (trials' hyperparameters) grouped into grids: trials whose
    values differ only in ``batchable`` fields, which one sweep program runs
    (:mod:`ajax.sweep`), in the order they were asked."""
    groups: dict[str, list[int]] = {}
    for i, p in enumerate(params):
        rest = {k: v for k, v in p.items() if k not in batchable}
        groups.setdefault(json.dumps(rest, sort_keys=True, default=list), []).append(i)
    return list(groups.values())


def train_trials(
    spec: StudySpec, params: list[dict[str, Any]], directories: list[Path]
) -> tuple[list[Any], int]:
    """Train trials that differ only in batchable values, each into its run directory (its
    config, metrics and saved result). Returns each one's result, or the error that failed
    it, and how many trained as one program: several as one grid, whose run is then split
    into the trials' directories as if each had run alone
    (:meth:`ajax.sweep.SweepResult.save_apart`). A grid that memory or a range refuses runs
    its trials one by one, each failing or not on its own."""
    from ajax import LoggingConfig, RunHungError
    from ajax.logging import refuse_a_taken_directory

    fix = (
        "A study's trials write to log_dir/<study>/trial_<number>: give the worker another "
        "log_dir (ajax sweep --log-dir), or remove that directory."
    )
    for directory in directories:  # before a grid trains, not at its split
        refuse_a_taken_directory(directory, fix)

    def train(trial_params: dict[str, Any], run_name: str, **sweep: Any) -> Any:
        return spec.build(trial_params).train(
            seed=list(range(spec.seeds)),
            n_timesteps=spec.n_timesteps,
            num_episode_test=spec.num_episode_test,
            logging_config=LoggingConfig(
                spec.evaluation_every, log_dir=directories[0].parent, run_name=run_name
            ),
            **sweep,
        )

    if len(params) > 1:
        swept = [k for k in params[0] if k in spec.agent_cls().batchable()]
        configs = [{k: p[k] for k in swept} for p in params]
        grid_dir = directories[0].parent / f"grid_{directories[0].name}"
        try:
            grid = train(params[0], grid_dir.name, sweep=configs)
        except (ValueError, MemoryError):
            # Refused before it ran: its directory holds its config alone.
            shutil.rmtree(grid_dir, ignore_errors=True)
            alone = zip(params, directories, strict=True)
            return [train_trials(spec, [p], [d])[0][0] for p, d in alone], 1
        except RunHungError as error:
            return [error] * len(params), len(params)
        return grid.save_apart(directories), len(params)
    try:
        result = train(params[0], directories[0].name)
    except (ValueError, RunHungError, MemoryError) as error:
        return [error], 1
    result.save(Path(result.log_dir) / "result")
    return [result], 1


def _outcome(result: Any | BaseException) -> tuple[float | None, str | None]:
    """A trial's value, or why it failed: its run's error, or a seed that diverged."""
    if isinstance(result, BaseException):
        return None, str(result)
    if result.diverged:
        first = result.diverged[0]
        return None, (
            f"seed {first['seed']} diverged at step {first['timestep']:,} "
            f"({first['metric']} was not finite)"
        )
    return objective(result), None


def run_worker(
    spec: StudySpec,
    url: str,
    name: str,
    n_trials: int,
    log_dir: str | Path = "runs",
    heartbeat_s: int = HEARTBEAT_S,
    batch: int = 4,
    report: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Run trials of the study until it holds ``n_trials`` complete or running ones (so
    workers sharing it stop together; each may run a batch past its share while another's
    is starting). Returns this worker's trials: number, parameters, value or error, run
    directory.

    The worker asks ``batch`` trials at a time (the sampler's constant liar spreads them
    apart) and trains those that differ only in batchable values as one grid
    (:func:`train_trials`), which compiles once for them all. A trial that fails (a refused
    combination, a divergence, a hung run) is recorded as failed with its error and the
    worker goes on; an interrupt fails the running trials and stops the worker."""
    optuna = _optuna()
    check_spec(spec)
    study = open_study(url, name, spec, heartbeat_s)
    space = distributions(spec.space)
    root = Path(log_dir) / name
    batchable = spec.agent_cls().batchable()
    done: list[dict[str, Any]] = []
    while (left := n_trials - _counted(study)) > 0:
        _stop_if_failing(done, n_trials)
        with warnings.catch_warnings():
            # Optuna warns that its heartbeat runs under optimize() alone: this loop keeps
            # its own (:func:`heartbeat`).
            warnings.filterwarnings("ignore", "Heartbeat of storage", UserWarning)
            asked = [study.ask(space) for _ in range(min(batch, left))]
        params = [decoded(t.params, spec.space) for t in asked]
        # Every trial asked beats until it is told, those waiting for their grid too:
        # Optuna never fails a running trial that has no heartbeat, so a killed worker's
        # waiting trials would otherwise stay running for good.
        pending = list(asked)
        with heartbeat(study, pending):
            try:
                for group in grids(params, batchable):
                    trials = [asked[i] for i in group]
                    directories = [root / f"trial_{t.number:04d}" for t in trials]
                    started = time.perf_counter()
                    results, together = train_trials(spec, [params[i] for i in group], directories)
                    seconds = time.perf_counter() - started
                    for i, result, directory in zip(group, results, directories, strict=True):
                        record = _tell(study, asked[i], params[i], result, directory)
                        pending.remove(asked[i])
                        done.append(record | {"seconds": seconds})
                        report(_trial_line(done[-1], len(group), together))
            except BaseException as error:
                for trial in pending:
                    trial.set_user_attr("error", f"interrupted: {type(error).__name__}")
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                raise
    return done


class StudyFailing(RuntimeError):
    """A worker's every recent trial failed: it stops rather than replace them for good."""


def _stop_if_failing(done: list[dict[str, Any]], n_trials: int) -> None:
    """Stop a worker whose last ``n_trials`` trials (at least 5) all failed: failed trials
    are replaced, so a failure every trial meets (a space that diverges throughout, a run
    this machine cannot hold) would otherwise keep the worker failing trials with no end."""
    last = done[-max(n_trials, 5) :]
    if len(last) == max(n_trials, 5) and all("error" in record for record in last):
        raise StudyFailing(
            f"This worker's last {len(last)} trials all failed, the last with: "
            f"{last[-1]['error']}. It stops rather than replace them with more; fix the "
            "cause (the space, the budget, the machine) and start it again."
        )


def _tell(
    study: Any, trial: Any, params: dict[str, Any], result: Any, directory: Path
) -> dict[str, Any]:
    """Tell the study a trial's value, or that it failed and why; the worker's record."""
    from optuna.trial import TrialState

    value, error = _outcome(result)
    record: dict[str, Any] = {"number": trial.number, "params": params}
    if error is not None:
        trial.set_user_attr("error", error)
        study.tell(trial, state=TrialState.FAIL)
        return record | {"error": error}
    trial.set_user_attr("run_dir", str(directory.absolute()))
    study.tell(trial, value)
    return record | {"value": value, "run_dir": str(directory)}


def _trial_line(record: dict[str, Any], group: int, grid: int) -> str:
    """A trial's line: its values, its outcome, and the time of the ``group`` it trained
    with, ``grid`` of them in one program."""
    params = ", ".join(f"{k}={as_text(v)}" for k, v in record["params"].items())
    outcome = f"failed: {record['error']}" if "error" in record else f"{record['value']:.2f}"
    took = f"{record['seconds']:.1f} s"
    if grid > 1:
        took += f" for a grid of {grid}"
    elif group > 1:
        took += f" for {group} trials, one by one"
    return f"trial {record['number']}: {params} -> {outcome} ({took})"


def show(url: str, name: str, out_dir: str | Path, top: int = 5) -> dict[str, Any]:
    """The study's state: trials by state, the best ``top`` complete trials, the error of
    the latest failed trial, and two figures written to ``out_dir``: the optimisation history
    and the hyperparameters' importances (PED-ANOVA, Watanabe et al. 2023, which needs no
    scikit-learn; from 2 complete trials). Stale running trials are failed first."""
    optuna = _optuna()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.trial import TrialState

    study = open_study(url, name, None)
    trials = study.get_trials(deepcopy=False)
    states = {s.name.lower(): sum(t.state == s for t in trials) for s in TrialState}
    complete = sorted((t for t in trials if t.state == TrialState.COMPLETE), key=lambda t: -t.value)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = {}
    if complete:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            ax = optuna.visualization.matplotlib.plot_optimization_history(study)
            figures["history"] = out / f"{name}_history.png"
            ax.figure.savefig(figures["history"], bbox_inches="tight")
            plt.close(ax.figure)
            if len(complete) >= 2:
                ax = optuna.visualization.matplotlib.plot_param_importances(
                    study, evaluator=optuna.importance.PedAnovaImportanceEvaluator()
                )
                figures["importances"] = out / f"{name}_importances.png"
                ax.figure.savefig(figures["importances"], bbox_inches="tight")
                plt.close(ax.figure)
    spec = json.loads(study.user_attrs[SPEC_ATTR]) if SPEC_ATTR in study.user_attrs else None

    def params(trial: Any) -> dict[str, Any]:
        return trial.params if spec is None else decoded(trial.params, spec["space"])

    return {
        "spec": spec,
        "states": {k: v for k, v in states.items() if v},
        "best": [
            {
                "number": t.number,
                "value": t.value,
                "params": params(t),
                "run_dir": t.user_attrs.get("run_dir"),
            }
            for t in complete[:top]
        ],
        "figures": {k: str(v) for k, v in figures.items()},
        "last_failure": next(
            (
                (t.number, t.user_attrs.get("error", "no error recorded"))
                for t in reversed(trials)
                if t.state == TrialState.FAIL
            ),
            None,
        ),
    }
