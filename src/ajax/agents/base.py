"""What every agent shares: validated hyperparameters, the environment it trains on, and the
contract the run (``ajax.loop``) turns into one compiled program.

An agent provides:

* ``Config``: a frozen dataclass of the algorithm's own hyperparameters, built with
  :func:`hyperparameter` so that each carries its default's source and its valid range.
* ``steps_per_iteration``: environment steps (over all copies) one iteration takes.
* ``wrap_env(env)``: wrappers the algorithm asks for (normalisation), on the batch of copies.
* ``init(key, env, total_iterations) -> state``: parameters, optimiser, env state, RNG.
  The state has ``params`` (what acting needs) and ``cursor`` (an
  :class:`ajax.acting.EnvCursor`: where the training copies stand) attributes.
* ``iteration(state, env) -> (state, metrics)``: collect, then update. ``metrics`` are scalars;
  the run averages them over each segment's learning iterations, except
  ``episode_return_sum``, ``episode_length_sum`` and ``episode_count`` (from
  :func:`ajax.acting.episode_metrics`), which it sums over all.
* ``warmup_iterations`` and ``warmup(state, env) -> (state, metrics)``: the agents that collect
  before they learn (``learning_starts``) run their first ``warmup_iterations`` iterations
  with ``warmup`` instead, which collects and computes no update at all, so the run compiles
  no update into them (rather than computing updates and dropping them). ``iteration`` is
  only called after them. Of ``warmup``'s metrics the run keeps the episode sums.
* ``pretrain_updates``: an agent with a burst of updates when its warm-up ends (a replay
  agent) makes that many update calls in its first learning iteration, in whichever segment
  it falls, instead of one: the run passes them as ``iteration(state, env, update_calls)``.
* ``policy(params, obs)``, for every agent whose action depends on the observation alone
  (all but UDRL): the action distribution (:mod:`ajax.nn.distributions`), in the agent's
  action space (``[-1, 1]`` for continuous actions); its ``sample`` is the behaviour policy,
  its ``mode`` the deterministic action of evaluation. An agent with an acting carry
  overrides ``act`` instead.

``with_params(state, params)`` returns the state with other parameters (the run keeps a
diverged seed's last finite ones); the default replaces the state's ``params`` field.

And, where the algorithm has them, ``value(params, obs)`` and ``q_values(params, obs[,
action])``. Every public method takes the full ``state.params``.

Acting carries a state from one step to the next (a command, a recurrent latent, a plan):
``act(params, obs, carry, key, deterministic) -> (action, carry)``, starting from
``initial_carry(params, n)`` for ``n`` copies, taking in each step's reward with
``after_step(params, carry, reward)``, and reset to the initial carry wherever an episode ends
(:func:`ajax.acting.rollout`, evaluation, :meth:`ajax.TrainResult.act_with_carry`). Agents
without one keep the empty default, ``()``, which costs nothing. The initial carry takes the
parameters because some depend on what was learnt (UDRL's command comes from the best
episodes).
"""

from __future__ import annotations

import abc
import dataclasses
import difflib
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import jax
import numpy as np

from ajax._values import as_number, as_plain, as_whole
from ajax.acting import EnvCursor
from ajax.envs import Box, Discrete, Env, make_env
from ajax.envs.wrappers import NormalizeObservation, copies
from ajax.nn.mlp import ACTIVATIONS, flatten_obs


def hyperparameter(
    default: Any,
    doc: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    batchable: bool = False,
) -> Any:
    """A Config field with its documentation (meaning and default's source) and valid range.
    ``batchable``: a float that may be swept as a batch axis (``train(..., sweep=...)``),
    because the agent reads it only as a number inside its computation, never to choose a
    shape or a branch in Python."""
    meta = {"doc": doc, "low": low, "high": high, "low_open": low_open, "high_open": high_open}
    meta["batchable"] = batchable
    if isinstance(default, list | dict):
        raise TypeError("use tuples for sequence defaults so that configs stay hashable")
    return dataclasses.field(default=default, metadata=meta)


def override(default: Any, doc: str) -> Any:
    """A subclass Config's own default (with its source) for a hyperparameter its base
    declares; the valid range stays the base's, declared once."""
    return dataclasses.field(default=default, metadata={"doc": doc, "overrides": True})


def _range_of(config_type: type, name: str) -> dict:
    """The range metadata of field ``name``: from the nearest class that declares the field
    rather than overriding its default."""
    for cls in config_type.__mro__:
        field = getattr(cls, "__dataclass_fields__", {}).get(name)
        if field is not None and not field.metadata.get("overrides"):
            return field.metadata
    raise TypeError(f"{config_type.__name__}.{name} overrides a field no base declares")


def _layer_widths(name: str, value: Any, default: tuple[int, ...]) -> tuple[int, ...]:
    """``value`` as the tuple of layer widths a ``hidden_sizes`` field holds, refused unless
    it is a sequence of positive whole numbers."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    widths = [as_whole(w) for w in value] if isinstance(value, tuple | list) else [None]
    if any(w is None or w <= 0 for w in widths):
        raise ValueError(
            f"{name} must be a sequence of positive layer widths, e.g. {name}={default}; got "
            f"{value!r}."
        )
    return tuple(widths)


def as_field_type(field: dataclasses.Field, value: Any) -> Any:
    """A number YAML read as text (``1e-3`` is a string to YAML 1.1) as the number the
    field holds; any other value as it is, for the agent's own checks."""
    kind = type(field.default)
    if kind in (int, float) and isinstance(value, str):
        number = as_number(value, kind)
        return value if number is None else number
    return value


def batchable_fields(config_type: type) -> tuple[str, ...]:
    """The fields of ``config_type`` declared ``batchable``, where they are declared."""
    return tuple(
        f.name
        for f in dataclasses.fields(config_type)
        if _range_of(config_type, f.name).get("batchable", False)
    )


def _range_text(meta: dict) -> str:
    parts = []
    if meta["low"] is not None:
        parts.append(f"{'>' if meta['low_open'] else '>='} {meta['low']}")
    if meta["high"] is not None:
        parts.append(f"{'<' if meta['high_open'] else '<='} {meta['high']}")
    return " and ".join(parts)


def validate_config(config: Any) -> Any:
    """Raise ValueError naming any field of ``config`` outside its documented range. Returns
    ``config`` with its values as the fields hold them: NumPy scalars as Python numbers, whole
    numbers of an integer field as ints (``n_steps=16.0``), layer widths as a tuple."""
    plain = {}
    for field in dataclasses.fields(config):
        value = as_plain(getattr(config, field.name))
        plain[field.name] = value
        if isinstance(value, jax.core.Tracer):
            continue  # a swept value, checked as a number before the trace (ajax.sweep)
        meta = {**_range_of(type(config), field.name), "doc": field.metadata["doc"]}
        default = field.default
        if isinstance(default, tuple):
            plain[field.name] = _layer_widths(field.name, value, default)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ValueError(f"{field.name} must be True or False, got {value!r}.")
        elif isinstance(default, int | float):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(
                    f"{field.name} must be a number, got {value!r}; the default is {default}."
                )
            if isinstance(default, int):
                if as_whole(value) is None:
                    raise ValueError(f"{field.name} must be a whole number, got {value!r}.")
                plain[field.name] = value = as_whole(value)
            low, high = meta.get("low"), meta.get("high")
            too_low = low is not None and (value <= low if meta["low_open"] else value < low)
            too_high = high is not None and (value >= high if meta["high_open"] else value > high)
            if too_low or too_high or not math.isfinite(value):
                raise ValueError(
                    f"{field.name}={value!r} is out of range: it must be {_range_text(meta)}. "
                    f"The default is {default} ({meta['doc'].rstrip('.')})."
                )
    changed = {k: v for k, v in plain.items() if v is not getattr(config, k)}
    return dataclasses.replace(config, **changed) if changed else config


class Agent(abc.ABC):
    """Base class of the agents: environment, copies and validated hyperparameters."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuses, as the class is defined, a ``Config`` field declared without
        :func:`hyperparameter` (or :func:`override`): its documentation and range are what
        the command line shows and the constructor checks."""
        super().__init_subclass__(**kwargs)
        config = cls.__dict__.get("Config")
        if config is None:
            return
        bare = [f.name for f in dataclasses.fields(config) if "doc" not in f.metadata]
        if bare:
            raise TypeError(
                f"{cls.__name__}.Config declares {', '.join(bare)} without hyperparameter(...). "
                "Declare each as hyperparameter(default, doc, low=..., high=...), or "
                "override(default, doc) to change a base's default, so that it is documented "
                "and range-checked."
            )

    Config: ClassVar[type]
    #: The action-space types the algorithm handles.
    action_spaces: ClassVar[tuple[type, ...]] = (Discrete, Box)
    #: An environment id the agent runs on, for messages that suggest one.
    example_env: ClassVar[str] = "CartPole-v1"
    #: Environment copies per seed when the user does not say.
    default_n_envs: ClassVar[int] = 1

    def __init__(
        self,
        env_id: str | Env,
        n_envs: int | None = None,
        env_params: dict[str, Any] | None = None,
        **hyperparameters: Any,
    ):
        names = {f.name for f in dataclasses.fields(self.Config)}
        unknown = sorted(set(hyperparameters) - names)
        if unknown:
            hints = []
            # The constructor's own arguments too: num_envs (Gymnasium's) is n_envs here.
            meant = names | {"n_envs", "env_params"}
            for name in unknown:
                close = difflib.get_close_matches(name, meant, n=1)
                hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ValueError(
                f"{type(self).__name__} has no hyperparameter {', '.join(hints)}. "
                f"Its hyperparameters are: {', '.join(sorted(names))}."
            )
        n_envs = self.default_n_envs if n_envs is None else n_envs
        if as_whole(n_envs) is None or n_envs <= 0:
            raise ValueError(f"n_envs must be a positive integer, got {n_envs!r}; try n_envs=4.")
        n_envs = as_whole(n_envs)
        if env_params is not None and not isinstance(env_params, Mapping):
            raise ValueError(
                f"env_params must be a mapping of the environment's parameters to values, got "
                f"{env_params!r}; e.g. env_params={{'max_steps_in_episode': 200}}."
            )
        self.config = validate_config(self.Config(**hyperparameters))
        if hasattr(self.config, "activation"):
            self._require_one_of("activation", ACTIVATIONS, "hidden activation")
        self.env = make_env(env_id, **(env_params or {}))
        self.env_params = dict(env_params or {})
        #: The id the environment was built from, None for an Env instance (whose code Ajax
        #: cannot vouch for: its runs' programs are not kept by the program cache).
        self.registered_env_id = env_id if isinstance(env_id, str) else None
        self.n_envs = n_envs
        self._obs_ndim = len(self.env.observation_space.shape)
        if not isinstance(self.env.action_space, self.action_spaces):
            supported = ", ".join(t.__name__ for t in self.action_spaces)
            raise ValueError(
                f"{type(self).__name__} supports {supported} action spaces, but "
                f"{self.env_id} has {self.env.action_space}. Pick an agent for this action "
                f"space (`ajax list` shows each agent's) or another environment, such as "
                f"{self.example_env}."
            )
        if isinstance(self.env.action_space, Box) and not self.env.action_space.bounded:
            raise ValueError(
                f"{self.env_id}'s action space is unbounded; Ajax agents act in [-1, 1] and map "
                "onto finite bounds. Wrap the environment to give it finite bounds."
            )

    def _require_one_of(self, name: str, choices: Any, what: str) -> None:
        """Refuse a config whose ``name`` is not among ``choices`` (a string field, which the
        range check cannot cover), naming them: ``what`` says what the field picks."""
        value = getattr(self.config, name)
        if value not in choices:
            raise ValueError(
                f"{name}={value!r} is not a {what}; pick one of "
                f"{', '.join(repr(choice) for choice in choices)}."
            )

    def _require_at_most(self, name: str, limit: str, why: str) -> None:
        """Refuse a config whose ``name`` exceeds ``limit`` (both fields), saying ``why``."""
        value, bound = getattr(self.config, name), getattr(self.config, limit)
        if value > bound:
            raise ValueError(
                f"{name}={value} exceeds {limit}={bound}: {why}. Lower {name} to at most {bound}."
            )

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def env_id(self) -> str:
        return self.env.env_id or type(self.env).__name__

    @property
    def steps_per_iteration(self) -> int:
        return self.n_envs

    def wrap_env(self, env: Env) -> Env:
        """The agent's own wrappers on its copies: running observation standardisation
        (:class:`ajax.envs.wrappers.NormalizeObservation`) for every agent whose config has
        ``normalize_observations`` set."""
        if getattr(self.config, "normalize_observations", False):
            return NormalizeObservation(env)
        return env

    def env_copies(self, num_envs: int) -> Env:
        """The batch of ``num_envs`` copies the agent trains or evaluates on: the shared
        wrappers (:func:`ajax.envs.wrappers.copies`), then the agent's own."""
        return self.wrap_env(copies(self.env, num_envs))

    def _flat(self, obs: jax.Array) -> jax.Array:
        """Observations with their own axes merged into one feature axis, for an MLP."""
        return flatten_obs(obs, self._obs_ndim)

    def _env_action(self, action: jax.Array, obs: jax.Array) -> jax.Array:
        """Actions for a batch of ``obs``, reshaped to the environment's action shape."""
        return action.reshape(obs.shape[: obs.ndim - self._obs_ndim] + self.env.action_space.shape)

    @abc.abstractmethod
    def init(self, key: jax.Array, env: Env, total_iterations: int) -> Any:
        """Every trainable and environment state of one seed."""

    @abc.abstractmethod
    def iteration(self, state: Any, env: Env) -> tuple[Any, dict[str, jax.Array]]:
        """Collect, then update; returns the state and scalar metrics."""

    def policy(self, params: Any, obs: jax.Array) -> Any:
        """The action distribution at ``obs`` (a batch, normalised as the agent's wrappers
        normalise it: ``TrainResult.observe`` of a raw one), in the agent's action space.
        Optional: :meth:`act` is the contract, and an agent whose action depends on a carry
        (UDRL's command) has no policy of the observation alone."""
        raise NotImplementedError(
            f"{self.name} acts through act(params, obs, carry, key, deterministic), from "
            "initial_carry(params, n): its action depends on a carry, so it has no policy of "
            "the observation alone."
        )

    def with_params(self, state: Any, params: Any) -> Any:
        """``state`` with ``params`` in place of ``state.params``."""
        return state.replace(params=params)

    @property
    def warmup_iterations(self) -> int:
        """Iterations at the start of a run that collect without learning (:meth:`warmup`)."""
        return 0

    def warmup(self, state: Any, env: Env) -> tuple[Any, dict[str, jax.Array]]:
        """One iteration of collection without an update; episode sums as its metrics."""
        raise NotImplementedError(f"{self.name} has no warm-up iterations.")

    @property
    def pretrain_updates(self) -> int:
        """Update calls of the first learning iteration (TD-MPC2's burst on the data its
        random seeding collected), passed to :meth:`ajax.agents.replay.ReplayAgent.iteration`
        as ``update_calls``. 0 for none: one call."""
        return 0

    def initial_carry(self, params: Any, n: int) -> Any:
        """The acting carry of ``n`` copies at the start of their episodes."""
        return ()

    def after_step(self, params: Any, carry: Any, reward: jax.Array) -> Any:
        """The carry once the step has paid ``reward`` (one per copy); unchanged by default.
        UDRL's command spends it: the reward arrives after the action, so it cannot enter
        :meth:`act`."""
        return carry

    @property
    def reads_rewards(self) -> bool:
        """Whether the acting carry spends rewards (:meth:`after_step` is the agent's own, as
        UDRL's is): a loop that acts outside training must then hand each reward back."""
        return type(self).after_step is not Agent.after_step

    def act(
        self, params: Any, obs: jax.Array, carry: Any, key: jax.Array, deterministic: bool
    ) -> tuple[jax.Array, Any]:
        """The action at ``obs`` (a batch, normalised as for :meth:`policy`), in the
        environment's action shape and the agent's units ([-1, 1] for a Box), and the carry
        of the next step: the policy's mode when ``deterministic``, else a sample."""
        dist = self.policy(params, obs)
        action = dist.mode() if deterministic else dist.sample(key)
        return self._env_action(action, obs), carry

    def _start(
        self, key: jax.Array, env: Env, init_params: Callable[[jax.Array, jax.Array], Any]
    ) -> tuple[Any, EnvCursor, jax.Array]:
        """What every ``init`` begins with: the copies reset, the parameters from
        ``init_params(key, obs)``, and the cursor with the initial carry. Returns the
        parameters, the cursor and the key left for the state."""
        params_key, env_key, key = jax.random.split(key, 3)
        env_state, obs = env.reset(env_key)
        params = init_params(params_key, obs)
        return params, EnvCursor(env_state, obs, self.initial_carry(params, obs.shape[0])), key

    def hyperparameters(self) -> dict[str, Any]:
        return dataclasses.asdict(self.config)

    @classmethod
    def batchable(cls) -> tuple[str, ...]:
        """The hyperparameters ``train(..., sweep=...)`` may sweep (:func:`batchable_fields`)."""
        return batchable_fields(cls.Config)

    def check_values(self, values: dict[str, Any]) -> None:
        """Refuse, naming the field and its range, values outside their documented range."""
        validate_config(dataclasses.replace(self.config, **values))

    def with_values(self, values: dict[str, Any]) -> Agent:
        """This agent built again with ``values`` for some of its batchable hyperparameters,
        which may be traced: inside a program of a sweep, each configuration's agent, so
        that every use of those values, those its constructor makes (optimisers, targets)
        among them, follows the configuration's."""
        fields = {f.name: getattr(self.config, f.name) for f in dataclasses.fields(self.config)}
        swept = object.__new__(type(self))
        type(self).__init__(swept, self.env, self.n_envs, **(fields | values))
        return swept

    def train(self, seed: int | list[int] = 0, n_timesteps: int = 100_000, **kwargs: Any):
        """Train one run per seed as one vmapped program: ``ajax.train(self, ...)``, whose
        arguments it takes."""
        from ajax.loop import train

        return train(self, seed=seed, n_timesteps=n_timesteps, **kwargs)

    def __repr__(self) -> str:
        changed = {
            f.name: getattr(self.config, f.name)
            for f in dataclasses.fields(self.config)
            if getattr(self.config, f.name) != f.default
        }
        args = ", ".join(f"{k}={v!r}" for k, v in changed.items())
        return (
            f"{self.name}(env_id={self.env_id!r}, n_envs={self.n_envs}{', ' if args else ''}{args})"
        )
