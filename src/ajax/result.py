"""The outcome of a run: final states (leading seed axis), evaluations, and what is needed to
act, evaluate, save and reload."""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ajax._version import __version__
from ajax._xla import compiler_options, unrolled_threefry
from ajax.agent_registry import agent_from_config
from ajax.envs.core import SEED_AXIS, Env
from ajax.envs.gymnax_adapter import GymnaxAdapter
from ajax.envs.registry import is_registered
from ajax.envs.spaces import Box, Space
from ajax.policy import Policy, acting_state, acting_step
from ajax.serialization import (
    StateLayoutError,
    as_json,
    read_state,
    write_state,
    written_whole,
)
from ajax.stats import iqm, iqm_interval

#: The state file of results saved before format 4, which name none.
_STATE_FILE = "state.msgpack"
_META_FILE = "result.json"
#: The names of the state files saves write (and of those cut short), which a save removes
#: once the description names its own; other files in the directory are left alone.
_SAVED_STATE = re.compile(r"state(-[0-9a-f]{8})?\.msgpack(\.partial)?")
#: The layout ``save`` writes: 4 names its state file in the description (each save writes a
#: state file of a new name, so that one cut short leaves the result it was replacing whole);
#: 3 keys the state's arrays by their path in the state, so
#: that any environment's state (MJX's ``Data``, Brax's ``State``, a user's dataclass) is
#: saved, and records the environment's class and spaces; 2 recorded the Ajax version that
#: wrote it (1 did not).
FORMAT = 4
#: The layouts ``load`` reads.
READABLE_FORMATS = (1, 2, 3, 4)
#: Seeds from which a summary gives the interquartile mean and its interval: with fewer, a
#: bootstrap over seeds has too few distinct resamples for a 95% interval to mean much.
IQM_MIN_SEEDS = 5


@dataclass
class TrainResult:
    """What ``train`` returns.

    Attributes:
        agent: the agent that was trained.
        state: its final state; every leaf has a leading seed axis.
        seeds: the seeds, in the order of that axis.
        n_timesteps: environment steps per seed actually run (whole iterations).
        evaluations: ``timestep`` [E] and per-seed ``episode_return``, ``episode_length``
            [S, E] of the evaluations (empty arrays without a logging config).
        train_metrics: per-seed training summaries [S, E'] (``train/episode_return``, losses),
            one column per segment, with their timesteps under ``timestep``.
        timings: ``compile_s``, ``run_s`` and ``total_s`` of the run, and
            ``timesteps_run``, the steps per seed ``run_s`` covers (after a resume, those
            past the checkpoint).
        log_dir: the run directory, when the run was logged.
        diverged: the seeds whose parameters or a training metric became NaN or infinite,
            each as ``{"seed", "timestep", "metric"}`` (the first non-finite one; ``params``
            for the parameters). Such a seed was frozen from there on: its parameters are
            those of its last evaluation before, and its metrics and evaluations NaN.
    """

    agent: Any
    state: Any
    seeds: list[int]
    n_timesteps: int
    evaluations: dict[str, np.ndarray]
    train_metrics: dict[str, np.ndarray] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    log_dir: str | None = None
    diverged: list[dict[str, Any]] = field(default_factory=list)
    #: act_with_carry's programs by ``deterministic``, built once so that later calls are
    #: served from JAX's cache rather than traced again.
    _programs: dict[bool, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def from_history(cls, *, history: list[tuple[int, dict[str, np.ndarray]]], **kwargs):
        timesteps = np.asarray([t for t, _ in history], np.int64)
        columns = lambda key: np.stack([s[key] for _, s in history], axis=1)  # noqa: E731
        keys = history[0][1].keys()
        evaluated = "episode_return" in keys
        evaluations = {
            "timestep": timesteps if evaluated else np.zeros(0, np.int64),
            **{
                k: columns(k) if evaluated else np.zeros((len(kwargs["seeds"]), 0))
                for k in ("episode_return", "episode_length")
            },
        }
        train_metrics = {"timestep": timesteps} | {
            k: columns(k) for k in keys if k.startswith("train/")
        }
        return cls(evaluations=evaluations, train_metrics=train_metrics, **kwargs)

    def initial_carry(self) -> Any:
        """Each seed's acting carry for one copy at the start of an episode (leading seed
        axis): what :meth:`act_with_carry` starts from. ``()`` for agents without one."""
        return jax.vmap(lambda params: self.agent.initial_carry(params, 1))(self.state.params)

    def policy_fn(self, seed_index: int | None = None, deterministic: bool = True) -> Policy:
        """A function from a raw observation to an environment action, compiled once here:
        each call then costs one call into the compiled program. ``seed_index`` picks one
        seed's policy; ``None`` acts with every seed (actions with a leading seed axis). See
        :class:`ajax.policy.Policy`, which also keeps an acting carry across calls."""
        return Policy(self, seed_index, deterministic)

    def observe(self, obs: Any) -> jax.Array:
        """Each seed's view of a raw observation ``obs`` (one, or one per seed): with the
        normalisation statistics learnt in training applied, as the agent's ``policy``,
        ``value``, ``q_values`` and ``act`` take observations. ``[S, *obs_shape]``."""
        obs = self._per_seed(obs)
        env = self.agent.env_copies(1)
        observe = lambda env_state, o: env.observe(env_state, o[None])[0]  # noqa: E731
        return jax.vmap(observe)(self.state.cursor.env_state, obs)

    def __repr__(self) -> str:
        """The run in one line, without its state (every array of every seed, a replay
        buffer's among them: tens of thousands of characters in a notebook)."""
        returns = np.asarray(self.evaluations["episode_return"])
        seeds = self.seeds if len(self.seeds) <= 8 else f"{self.seeds[0]}..{self.seeds[-1]}"
        parts = [
            repr(self.agent),
            f"seeds={seeds}",
            f"n_timesteps={self.n_timesteps}",
            f"evaluations={returns.shape[-1]}",
        ]
        if returns.shape[-1]:
            parts.append(f"final_return={returns[:, -1].mean():.1f}")
        if self.diverged:
            parts.append(f"diverged={[d['seed'] for d in self.diverged]}")
        if self.log_dir is not None:
            parts.append(f"log_dir={self.log_dir!r}")
        return f"TrainResult({', '.join(parts)})"

    def summary(self) -> dict[str, Any]:
        """The final and the best evaluation return, as means over seeds, and, for runs of 5
        seeds or more, the interquartile mean of the final returns over seeds with its 95%
        stratified-bootstrap interval (``final_iqm``, ``final_iqm_interval``)."""
        returns = np.asarray(self.evaluations["episode_return"])
        if returns.shape[-1] == 0:
            raise ValueError("the run has no evaluations to summarise; train with a LoggingConfig.")
        mean = returns.mean(0)
        summary: dict[str, Any] = {"final": float(mean[-1]), "best": float(np.max(mean))}
        if len(self.seeds) >= IQM_MIN_SEEDS:
            low, high = iqm_interval(returns[:, -1])
            summary |= {
                "final_iqm": float(iqm(returns[:, -1])),
                "final_iqm_interval": (float(low), float(high)),
            }
        return summary

    def _per_seed(self, obs: Any) -> jax.Array:
        """``obs`` as float32 ``[S, *obs_shape]``: one observation given to every seed, or
        one per seed."""
        obs = jnp.asarray(obs, jnp.float32)
        obs_shape = self.agent.env.observation_space.shape
        if obs.shape == obs_shape:
            obs = jnp.broadcast_to(obs, (len(self.seeds), *obs_shape))
        if obs.shape != (len(self.seeds), *obs_shape):
            raise ValueError(
                f"obs must have shape {obs_shape} or {(len(self.seeds), *obs_shape)}, "
                f"got {obs.shape}."
            )
        return obs

    def act(self, obs: Any, deterministic: bool = True, key: jax.Array | None = None) -> np.ndarray:
        """Each seed's action for ``obs``, in the environment's own action space.

        ``obs`` is one raw observation (given to every seed) or a batch [S, *obs_shape] with
        one per seed. Normalisation statistics learnt in training are applied. For an agent
        that carries a state from step to step (UDRL's command), use :meth:`act_with_carry`.
        """
        # The carry's shape is enough to tell: nothing is computed.
        if jax.tree.leaves(jax.eval_shape(self.initial_carry)):
            raise ValueError(
                f"{self.agent.name} carries a state from one step to the next, which act() "
                "cannot keep. Use act_with_carry(obs, carry, episode_start), starting from "
                "carry=result.initial_carry()."
            )
        return self.act_with_carry(obs, (), True, 0.0, deterministic, key)[0]

    def act_with_carry(
        self,
        obs: Any,
        carry: Any,
        episode_start: Any,
        reward: Any = 0.0,
        deterministic: bool = True,
        key: jax.Array | None = None,
    ) -> tuple[np.ndarray, Any]:
        """Each seed's action for ``obs`` and its carry for the next step.

        ``obs`` as for :meth:`act`; ``carry`` is the one returned by the previous call (or
        :meth:`initial_carry`) and ``reward`` what the previous action earned (one, or one
        per seed), which the carry takes in first; then, where ``episode_start`` (one flag,
        or one per seed) is true, the carry is reset to the initial one, as in training.
        """
        obs = self._per_seed(obs)
        if key is None:
            key = jax.random.PRNGKey(0)
        keys = jax.random.split(key, len(self.seeds))
        start = jnp.broadcast_to(jnp.asarray(episode_start, bool), (len(self.seeds),))
        earned = jnp.broadcast_to(jnp.asarray(reward, jnp.float32), (len(self.seeds),))
        program = self._programs.get(deterministic)
        if program is None:
            program = jax.jit(
                jax.vmap(acting_step(self.agent, deterministic)),
                compiler_options=compiler_options(self.agent),
            )
            self._programs[deterministic] = program
        with unrolled_threefry(self.agent):
            action, carry = program(
                self.state.params, self.state.cursor.env_state, obs, carry, start, earned, keys
            )
        return np.asarray(action), carry

    def save(self, path: str | Path) -> Path:
        """Write the result to directory ``path``; ``ajax.load(path)`` reads it back (with
        ``env=`` for a run on an environment object rather than a registered id). The files
        are JSON and msgpack arrays: loading them runs no code.

        A result already in ``path`` is replaced whole or, where the save fails or is cut
        short, not at all: the state goes to a file of a new name, and the description that
        names it is renamed into place last."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state_file = f"state-{secrets.token_hex(4)}.msgpack"
        meta = {
            "format": FORMAT,
            "state_file": state_file,
            "ajax_version": __version__,
            "agent": self.agent.name,
            "env_id": self.agent.env_id,
            "env_registered": self.agent.registered_env_id is not None,
            "env_class": env_class(self.agent.env),
            "env_spaces": env_spaces(self.agent.env),
            "env_params": self.agent.env_params,
            "n_envs": self.agent.n_envs,
            "hyperparameters": self.agent.hyperparameters(),
            "seeds": self.seeds,
            "n_timesteps": self.n_timesteps,
            "evaluations": {k: np.asarray(v).tolist() for k, v in self.evaluations.items()},
            "train_metrics": {k: np.asarray(v).tolist() for k, v in self.train_metrics.items()},
            "timings": self.timings,
            "log_dir": self.log_dir,
            "diverged": self.diverged,
        }
        write_state(path / state_file, self.state)
        # The commit. A save cut short before it leaves the new state file unnamed, for the
        # next save to remove.
        with written_whole(path / _META_FILE) as out:
            out.write(json.dumps(meta, indent=2).encode())
        for stale in path.iterdir():
            if _SAVED_STATE.fullmatch(stale.name) and stale.name != state_file:
                stale.unlink(missing_ok=True)
        return path


def env_class(env: Env) -> str:
    """The class an environment's code comes from, as ``module.name``: a gymnax-API
    environment's own class rather than its adapter's."""
    inner = env.unwrapped
    source = inner.env if isinstance(inner, GymnaxAdapter) else inner
    return f"{type(source).__module__}.{type(source).__qualname__}"


def _space_json(space: Space) -> dict[str, Any]:
    if isinstance(space, Box):
        return {
            "kind": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": space.low.tolist(),
            "high": space.high.tolist(),
        }
    return {
        "kind": "Discrete",
        "n": int(space.n),
        "shape": list(space.shape),
        "dtype": str(space.dtype),
    }


def env_spaces(env: Env) -> dict[str, dict[str, Any]]:
    """An environment's observation and action spaces as JSON: kind, shape, dtype and
    bounds (or count)."""
    return {
        "observation_space": _space_json(env.observation_space),
        "action_space": _space_json(env.action_space),
    }


def check_env(env: Any, saved: dict[str, Any], where: Path) -> None:
    """Refuses ``env`` where its spaces are not those of the environment a run in ``where``
    was saved on (``saved``: the run's ``env_class`` and ``env_spaces``), naming each
    difference."""
    if not isinstance(env, Env):
        raise TypeError(
            f"env must be an ajax Env (ajax.envs.from_gymnax(...) for a gymnax-API one), "
            f"got {type(env).__name__}."
        )
    given = as_json(env_spaces(env))
    differences = [
        f"{space}.{field}: saved {saved['env_spaces'][space][field]!r}, given {value!r}"
        for space, fields in given.items()
        for field, value in fields.items()
        if saved["env_spaces"][space].get(field) != value
    ]
    if differences:
        raise ValueError(
            f"The environment given does not fit the run in {where}, which was saved on "
            f"{saved['env_class']}: {'; '.join(differences)}. Pass the environment it was "
            "trained on."
        )


def environment_for(config: dict[str, Any], env: Env | None, where: Path, how: str) -> Env | None:
    """The environment object to rebuild a saved run's agent on: ``env``, checked against the
    spaces saved in ``config`` where they were, or None to rebuild it from its registered id.
    A run on an environment object without ``env`` is refused, saying ``how`` to pass one."""
    if env is None:
        # Saves and checkpoints of earlier versions lack the flag: only registered ids could
        # be saved then.
        if not config.get("env_registered", is_registered(config["env_id"])):
            raise ValueError(
                f"The run in {where} trained on an environment object "
                f"({config.get('env_class', 'of a class not recorded')}, named "
                f"{config['env_id']!r}), not a registered id, so it cannot be rebuilt from "
                f"its id: pass that environment, {how}."
            )
        return None
    if "env_spaces" in config:
        check_env(env, config, where)
    return env


def result_dir(path: str | Path) -> Path:
    """The directory of a saved result: ``path`` itself, or its ``result`` subdirectory,
    where ``ajax train`` saves a run's."""
    path = Path(path)
    if not (path / _META_FILE).exists() and (path / "result" / _META_FILE).exists():
        return path / "result"
    if not (path / _META_FILE).exists():
        raise FileNotFoundError(
            f"{path} holds no saved Ajax result (no {_META_FILE} in it or in its result/)."
        )
    return path


def read_meta(path: str | Path) -> dict[str, Any]:
    """A saved result's description (agent, environment, hyperparameters, seeds, curves)
    without its state: what comparing runs needs. ``path`` as for :func:`load`."""
    file = result_dir(path) / _META_FILE
    try:
        return json.loads(file.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{file} is not valid JSON ({error}): the saved result is damaged. Save the run again."
        ) from None


def load(path: str | Path, env: Env | None = None) -> TrainResult:
    """Read a result written by ``TrainResult.save`` (``path`` is its directory, or the run
    directory of ``ajax train`` holding it); it acts and evaluates as the original.

    A run on a registered id rebuilds its environment from the id. A run on an environment
    object needs that environment as ``env``, whose spaces must be those saved."""
    path = result_dir(path)
    meta = read_meta(path)
    written_by = meta.get("ajax_version", "0.1.0 or earlier")
    readable = ", ".join(str(f) for f in READABLE_FORMATS)
    if meta.get("format") not in READABLE_FORMATS:
        raise ValueError(
            f"{path} was saved by Ajax {written_by} in result format {meta.get('format')}; "
            f"this Ajax ({__version__}) reads formats {readable}. Load it with Ajax "
            f"{written_by}, or save it again from a run of this version."
        )
    env = environment_for(meta, env, path, f"ajax.load({str(path)!r}, env=...)")
    state_file = path / meta.get("state_file", _STATE_FILE)
    if not state_file.is_file():
        raise FileNotFoundError(
            f"{path} holds a result's {_META_FILE} but not its {state_file.name}: it was not "
            "saved whole. Save the run again."
        )
    try:
        agent = agent_from_config(meta, env)
        copies = agent.env_copies(agent.n_envs)
        keys = jax.ShapeDtypeStruct((len(meta["seeds"]), 2), jnp.uint32)
        template = jax.eval_shape(jax.vmap(lambda k: agent.init(k, copies, 1)), keys)
        state = read_state(state_file, template, meta["format"], jnp.asarray)
    except EOFError as error:
        raise ValueError(
            f"{state_file} is cut short ({error}): it was not written whole. Save the run again."
        ) from error
    except (KeyError, TypeError, ValueError) as error:
        if written_by == __version__ and isinstance(error, StateLayoutError):
            # Whole, in another layout: a build of this version whose state has changed
            # since (ASAC gained its reset cost), not damage.
            raise ValueError(
                f"{path} was saved by another build of Ajax {written_by}, whose "
                f"{meta['agent']} state differs from this one's: {error}. Load it with the "
                "build that saved it, or train and save the run again."
            ) from error
        if written_by == __version__:  # this version's own save: damaged, not another layout
            raise ValueError(
                f"{path} does not hold a whole result ({type(error).__name__}: {error}): it is "
                "damaged. Save the run again."
            ) from error
        raise ValueError(
            f"{path} was saved by Ajax {written_by} and does not fit this Ajax "
            f"({__version__}): {type(error).__name__}: {error}. Load it with Ajax {written_by}."
        ) from error
    return TrainResult(
        agent=agent,
        state=state,
        seeds=meta["seeds"],
        n_timesteps=meta["n_timesteps"],
        evaluations={k: np.asarray(v) for k, v in meta["evaluations"].items()},
        train_metrics={k: np.asarray(v) for k, v in meta["train_metrics"].items()},
        timings=meta["timings"],
        log_dir=meta["log_dir"],
        diverged=meta.get("diverged", []),
    )


def episode_returns(result: TrainResult, num_episodes: int = 20, seed: int = 0) -> np.ndarray:
    """The returns of ``num_episodes`` deterministic episodes of each seed's policy, one
    episode per evaluation copy, with the training state's normalisation: [S, num_episodes]."""
    from ajax._values import as_whole
    from ajax.evaluation import run_episodes
    from ajax.run.plan import positive_int

    num_episodes = positive_int("num_episodes", num_episodes, "num_episodes=20")
    if as_whole(seed) is None or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2**32), as train's are; got {seed!r}.")
    agent = result.agent
    env = agent.env_copies(num_episodes).for_evaluation()
    keys = jax.random.split(jax.random.PRNGKey(seed), len(result.seeds))

    def one(params, env_state, key):
        returns, _ = run_episodes(agent, env, params, key, env_state)
        return returns

    program = jax.jit(jax.vmap(one, axis_name=SEED_AXIS), compiler_options=compiler_options(agent))
    with unrolled_threefry(agent):
        return np.asarray(program(*acting_state(result.state), keys))


def evaluate(result: Any, num_episodes: int = 20, seed: int = 0) -> np.ndarray:
    """Mean return of ``num_episodes`` deterministic episodes for each seed's policy: [S];
    of a sweep's result (:meth:`ajax.sweep.SweepResult.evaluate`), each configuration's:
    [C, S]."""
    if isinstance(result, str | os.PathLike):
        raise TypeError(
            f"evaluate takes a result, not the path {str(result)!r}: "
            f"ajax.evaluate(ajax.load({str(result)!r})) evaluates a saved one."
        )
    if not isinstance(result, TrainResult):
        return result.evaluate(num_episodes, seed)
    return episode_returns(result, num_episodes, seed).mean(axis=1)
