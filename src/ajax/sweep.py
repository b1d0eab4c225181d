"""Sweeps that compile once: hyperparameters as a batch axis (``train(..., sweep=...)``).

The swept values of each configuration enter the run's two programs as arguments, one per
place of the programs' seed axis (configurations times seeds, configuration-major), so a
grid is one init and one segment program, the padding and the sharding over devices are
those of seeds, and a second grid of the same shape, whatever its values, is the same
program, which the compile cache serves. Inside the programs each place's agent is built
again with its traced values (:meth:`ajax.agents.base.Agent.with_values`), so the values
the constructor reads (an optimiser's step size, a target entropy) follow them too.

Only fields declared ``batchable`` may be swept: floats the agent reads as numbers. An
integer or a boolean changes shapes or control flow, and a string picks code; a sweep of
those is one run per value.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ajax._values import as_plain
from ajax.serialization import as_json

#: What a sweep is given as: a mapping of names to lists (their product), or a list of
#: mappings (those configurations, as given).
Sweep = Mapping[str, Sequence[float]] | Sequence[Mapping[str, float]]


def configurations(agent: Any, sweep: Sweep) -> list[dict[str, float]]:
    """The configurations ``sweep`` names for ``agent``, checked before anything is traced:
    each name a batchable hyperparameter of the agent, each value a number in its range."""
    if isinstance(sweep, Mapping):
        if not sweep:
            raise ValueError("sweep is empty; e.g. sweep={'learning_rate': [1e-4, 3e-4]}.")
        # np.linspace's and np.logspace's values, as researchers make a grid.
        sweep = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in sweep.items()}
        for name, values in sweep.items():
            if isinstance(values, str) or not isinstance(values, Sequence) or not values:
                raise ValueError(
                    f"sweep[{name!r}] must be a non-empty list of values, got {values!r}."
                )
        names = list(sweep)
        configs = [
            dict(zip(names, point, strict=True)) for point in itertools.product(*sweep.values())
        ]
    else:
        configs = [dict(c) for c in sweep]
        if not configs or any(not isinstance(c, dict) for c in configs):
            raise ValueError(
                "sweep must be a mapping of names to lists of values (their product) or a "
                "non-empty list of mappings (those configurations)."
            )
        names = list(configs[0])
        if any(list(c) != names for c in configs):
            raise ValueError("every configuration of a sweep list must name the same fields.")
    _check_names(agent, names)
    for config in configs:
        for name, value in config.items():
            plain = as_plain(value)
            if isinstance(plain, bool) or not isinstance(plain, int | float):
                raise ValueError(f"sweep values must be numbers; {name}={value!r} is not.")
        agent.check_values({k: float(v) for k, v in config.items()})
    return [{k: float(v) for k, v in c.items()} for c in configs]


def _check_names(agent: Any, names: list[str]) -> None:
    """Refuse a name that is not a batchable hyperparameter of ``agent``, saying why."""
    fields = {f.name: f for f in dataclasses.fields(agent.config)}
    batchable = agent.batchable()
    for name in names:
        if name in batchable:
            continue
        if name not in fields:
            near = difflib.get_close_matches(name, fields, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(f"{agent.name} has no hyperparameter {name!r}{hint}.")
        kind = type(fields[name].default).__name__
        why = {
            "bool": "a boolean chooses code, so each value is a program of its own",
            "int": "an integer sets shapes or loop counts, so each value is a program of its own",
            "str": "a string chooses code, so each value is a program of its own",
            "tuple": "layer sizes set shapes, so each value is a program of its own",
        }.get(kind, f"{agent.name} reads it outside the numbers its programs compute")
        raise ValueError(
            f"{name} cannot be swept in one program: {why}. Batchable fields of "
            f"{agent.name}: {', '.join(batchable) or 'none'}. Run one train() per value of "
            f"{name} instead (ajax sweep does)."
        )


def place_values(configs: list[dict[str, float]], labels: list[dict[str, int]]) -> dict:
    """Each place's swept values (float32), in the order of the places' ``labels``
    (:func:`ajax.run.host.place_labels`, which says which configuration each place runs)."""
    return {
        name: np.asarray([configs[label["config"]][name] for label in labels], np.float32)
        for name in configs[0]
    }


def configured(agent: Any, config: dict[str, float]) -> Any:
    """``agent`` built again with the concrete values of one configuration."""
    registered = agent.registered_env_id is not None
    return type(agent)(
        agent.registered_env_id if registered else agent.env,
        agent.n_envs,
        agent.env_params if registered else None,
        **(agent.hyperparameters() | config),
    )


@dataclasses.dataclass
class SweepResult:
    """What ``train(..., sweep=...)`` returns: the configurations, and for each an ordinary
    :class:`ajax.TrainResult` (:meth:`result`), whose ``act``, ``policy_fn``, ``save`` and
    ``ajax.load`` work as for any run.

    Attributes:
        configs: the configurations, in the order of the results.
        seeds: the seeds every configuration ran.
        results: one result per configuration.
        timings: the whole run's (one compile for every configuration).
        log_dir: the run directory, whose rows carry a ``config`` column.
        diverged: the places that diverged, each ``{"config", "seed", "timestep", "metric"}``.
    """

    configs: list[dict[str, float]]
    seeds: list[int]
    results: list[Any]
    timings: dict[str, float]
    log_dir: str | None
    diverged: list[dict[str, Any]]

    def __repr__(self) -> str:
        """The sweep in one line: the configurations' names, not their states."""
        agent = self.results[0].agent
        fields = sorted({name for config in self.configs for name in config})
        return (
            f"SweepResult({agent.name} on {agent.env_id}, {len(self.configs)} configurations "
            f"of {fields}, seeds={self.seeds}, log_dir={self.log_dir!r})"
        )

    @classmethod
    def split(cls, whole: Any, configs: list[dict[str, float]], seeds: list[int]) -> SweepResult:
        """The sweep's result from the run's, whose places are configurations times seeds."""
        import jax

        from ajax.result import TrainResult

        n = len(seeds)
        # Sliced on the host and put back: slicing device arrays compiles a small program
        # per slice.
        state = jax.device_get(whole.state)

        def rows(table: dict[str, np.ndarray], c: int) -> dict[str, np.ndarray]:
            return {k: v if k == "timestep" else v[c * n : (c + 1) * n] for k, v in table.items()}

        results = [
            TrainResult(
                agent=configured(whole.agent, config),
                state=jax.device_put(jax.tree.map(lambda x, c=c: x[c * n : (c + 1) * n], state)),
                seeds=list(seeds),
                n_timesteps=whole.n_timesteps,
                evaluations=rows(whole.evaluations, c),
                train_metrics=rows(whole.train_metrics, c),
                timings=whole.timings,
                log_dir=whole.log_dir,
                diverged=[
                    {k: v for k, v in d.items() if k != "config"}
                    for d in whole.diverged
                    if d["config"] == c
                ],
            )
            for c, config in enumerate(configs)
        ]
        return cls(configs, list(seeds), results, whole.timings, whole.log_dir, whole.diverged)

    def result(self, c: int) -> Any:
        """Configuration ``c``'s run, as an ordinary :class:`ajax.TrainResult`."""
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < len(self.results):
            raise IndexError(
                f"this sweep has configurations 0 to {len(self.results) - 1} (its configs), "
                f"not {c!r}."
            )
        return self.results[c]

    def summary(self) -> list[dict[str, Any]]:
        """Each configuration's values with its run's :meth:`ajax.TrainResult.summary`
        (the final and best mean return over seeds; from 5 seeds, the final IQM and its
        interval), in the order of :attr:`configs`: a grid's table of results."""
        return [
            config | run.summary() for config, run in zip(self.configs, self.results, strict=True)
        ]

    def evaluate(self, num_episodes: int = 20, seed: int = 0) -> np.ndarray:
        """Each configuration's :func:`ajax.evaluate`: [C, S]."""
        from ajax.result import evaluate

        return np.stack([evaluate(run, num_episodes, seed) for run in self.results])

    def save_apart(self, directories: Sequence[str | Path]) -> list[Any]:
        """Each configuration as a run directory of its own, one of ``directories`` each, as
        if it had run alone: its ``config.json`` (which ``ajax train --config`` repeats), its
        rows of the sweep's metrics, without the ``config`` column (and as TensorBoard files,
        where the sweep wrote some), and its saved result. What was split, and the sweep's
        checkpoints, then leave the sweep's own directory, which is removed if nothing else
        is left in it (a W&B run, which is one for the whole sweep, stays there). A directory
        that already holds a run is refused before anything is written. Returns the
        configurations' results, each pointing at its directory."""
        from ajax.logging import LoggingConfig, LogWriter, refuse_a_taken_directory
        from ajax.logging.sinks import read_rows

        if self.log_dir is None or len(directories) != len(self.configs):
            raise ValueError(
                "save_apart needs a sweep run with a logging config, and one directory per "
                f"configuration ({len(self.configs)})."
            )
        source = Path(self.log_dir)
        run_config = json.loads((source / "config.json").read_text())
        if not run_config["logging"]["jsonl"]:
            raise ValueError("save_apart reads the sweep's metrics.jsonl: log with jsonl=True.")
        rows = read_rows(source)
        for directory in directories:
            refuse_a_taken_directory(Path(directory))
        runs = []
        for c, directory in enumerate(map(Path, directories)):
            result = dataclasses.replace(self.results[c], log_dir=str(directory))
            logging = run_config["logging"] | {"run_name": directory.name, "wandb": False}
            config = {k: v for k, v in run_config.items() if k != "sweep"} | {
                "hyperparameters": result.agent.hyperparameters(),
                "logging": logging,
                "log_dir": str(directory.absolute()),
            }
            own = [
                {k: v for k, v in row.items() if k != "config"}
                for row in rows
                if row["config"] == c
            ]
            LogWriter(LoggingConfig(**logging), directory, as_json(config), own).close()
            result.save(directory / "result")
            runs.append(result)
        for name in ("config.json", "metrics.csv", "metrics.jsonl", "tensorboard", "checkpoints"):
            if (source / name).is_dir():
                shutil.rmtree(source / name)
            else:
                (source / name).unlink(missing_ok=True)
        if not any(source.iterdir()):
            source.rmdir()
        return runs

    @property
    def evaluations(self) -> dict[str, np.ndarray]:
        """``timestep`` [E], and ``episode_return`` and ``episode_length`` [C, S, E]."""
        first = self.results[0].evaluations
        return {"timestep": first["timestep"]} | {
            k: np.stack([r.evaluations[k] for r in self.results])
            for k in ("episode_return", "episode_length")
        }
