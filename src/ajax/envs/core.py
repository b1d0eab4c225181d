"""The environment protocol every adapter and wrapper speaks.

An environment is a stateless object (hashable, closed over by the compiled program) with
pure functions over explicit state:

* ``reset(key) -> (state, obs)``
* ``step(key, state, action) -> (state, obs, reward, terminated, truncated, info)``

Termination (the MDP ended: do not bootstrap) and truncation (a time limit cut the episode:
bootstrap from the final observation) are kept apart everywhere. A bare environment does not
reset itself; :class:`ajax.envs.wrappers.AutoReset` does, keeping the true final observation
in ``info["final_obs"]``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

import jax
import numpy as np

from ajax._values import as_whole
from ajax.envs.spaces import Space

#: The axis name of the run's vmap over seeds. Code below it can reduce over all seeds with
#: it (``AutoReset`` asks whether any copy of any seed needs a reset).
SEED_AXIS = "seeds"

StepResult = tuple[Any, jax.Array, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]


def refuse_unknown(env_id: str, given: Iterable[str], known: Iterable[str], what: str) -> None:
    """Refuse the names in ``given`` that are not among ``known``, the ``what`` (parameters,
    config entries) of ``env_id``: each with its nearest known name where one is close (the
    shortest that contains it, as ``max_steps`` is cut from ``max_steps_in_episode``, else
    the most alike), which is easier to read than a list of sixty."""
    known = sorted(known)
    unknown = sorted(set(given) - set(known))
    if not unknown:
        return
    hints = []
    for name in unknown:
        near = sorted((k for k in known if name in k), key=len)
        near = near or difflib.get_close_matches(name, known, n=1)
        hints.append(f"{name!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    raise ValueError(
        f"{env_id} has no {what} {', '.join(hints)}; its {what} are {', '.join(known)}."
    )


def checked_params(
    env_id: str,
    given: Mapping[str, Any],
    defaults: Mapping[str, Any],
    what: str,
    whole: Iterable[str] = (),
) -> dict[str, Any]:
    """``given`` checked against ``defaults`` (each known name's default value): unknown names
    are refused (:func:`refuse_unknown`), text for a number (``--env-param`` values that are
    no number arrive as text) and a fraction for a name in ``whole`` (``50.5`` steps); a
    whole float there (YAML's ``1e3``, a NumPy float) becomes the int. Others pass as given."""
    refuse_unknown(env_id, given, defaults, what)
    checked = {}
    for name, value in given.items():
        default = defaults[name]
        if isinstance(value, str) and isinstance(default, int | float):
            raise ValueError(
                f"{env_id}'s {name} takes a number like its default, {default}, not the text "
                f"{value!r}."
            )
        if name in whole and isinstance(value, int | float | np.number):
            number = as_whole(value)
            if number is None:
                raise ValueError(
                    f"{env_id}'s {name} takes a whole number like its default, {default}, not "
                    f"{value!r}."
                )
            value = number
        checked[name] = value
    return checked


class Env:
    """Base class of environments; adapters subclass it and set the attributes below."""

    #: Shape, dtype and bounds of one observation.
    observation_space: Space
    #: Shape, dtype and bounds of one action.
    action_space: Space
    #: The time limit after which an episode is truncated.
    max_episode_steps: int
    #: The id the registry made this environment from; for an environment object, the name
    #: it was given (``from_gymnax``'s), or None.
    env_id: str | None = None
    #: Whether :class:`ajax.envs.wrappers.AutoReset` computes a reset on every step, so that
    #: gradients flow through it, rather than only on steps where some copy's episode ended.
    differentiable_reset: bool = False
    #: Whether the step is differentiable in the action and the state, so that a rollout's
    #: return can be differentiated with respect to the policy (APG refuses other tasks).
    differentiable: bool = False

    def reset(self, key: jax.Array) -> tuple[Any, jax.Array]:
        raise NotImplementedError(f"{type(self).__name__} must implement reset")

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> StepResult:
        raise NotImplementedError(f"{type(self).__name__} must implement step")

    def reset_episode(self, key: jax.Array, state: Any) -> tuple[Any, jax.Array]:
        """The start of a new episode for a copy whose episode has just ended in ``state``.

        A plain :meth:`reset` by default; an environment that carries something across
        episodes (a cached initial state) overrides it.
        """
        return self.reset(key)

    @property
    def unwrapped(self) -> Env:
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.env_id or ''})"


class Wrapper(Env):
    """An environment that adds behaviour around ``inner``; attributes default to inner's."""

    def __init__(self, inner: Env):
        self.inner = inner

    observation_space = property(lambda self: self.inner.observation_space)
    action_space = property(lambda self: self.inner.action_space)
    max_episode_steps = property(lambda self: self.inner.max_episode_steps)
    env_id = property(lambda self: self.inner.env_id)
    num_envs = property(lambda self: self.inner.num_envs)
    differentiable_reset = property(lambda self: self.inner.differentiable_reset)
    differentiable = property(lambda self: self.inner.differentiable)

    @property
    def unwrapped(self) -> Env:
        return self.inner.unwrapped

    def reset(self, key: jax.Array) -> tuple[Any, jax.Array]:
        return self.inner.reset(key)

    def step(self, key: jax.Array, state: Any, action: jax.Array) -> StepResult:
        return self.inner.step(key, state, action)

    def reset_episode(self, key: jax.Array, state: Any) -> tuple[Any, jax.Array]:
        # Only wrappers without state of their own sit below AutoReset, where this is called.
        return self.inner.reset_episode(key, state)

    def for_evaluation(self) -> Wrapper:
        """A copy whose statistics wrappers are frozen (see NormalizeObservation)."""
        inner = self.inner.for_evaluation() if isinstance(self.inner, Wrapper) else self.inner
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__, inner=inner)
        return clone

    def reset_from(self, key: jax.Array, source: Any) -> tuple[Any, jax.Array]:
        """Reset, taking running statistics from ``source`` (a state of this wrapper stack).

        Evaluation copies start from the training copies' normalisation statistics this way.
        Wrappers without state of their own pass their inner state through, so the default
        delegates; wrappers that keep state override it.
        """
        if isinstance(self.inner, Wrapper):
            return self.inner.reset_from(key, source)
        return self.inner.reset(key)

    def inner_state(self, state: Any) -> Any:
        """The state of ``inner`` within ``state``, a state of this wrapper: ``state`` itself
        for a wrapper without state of its own; wrappers that keep state override it."""
        return state

    def observe(self, state: Any, obs: jax.Array) -> jax.Array:
        """What this stack turns a raw observation into, given its state (normalisation)."""
        if isinstance(self.inner, Wrapper):
            return self.inner.observe(self.inner_state(state), obs)
        return obs

    def action_to_env(self, action: jax.Array) -> jax.Array:
        """The action the bare environment receives for an agent's action."""
        if isinstance(self.inner, Wrapper):
            return self.inner.action_to_env(action)
        return action

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"


def bare_state(env: Env, state: Any) -> Any:
    """The bare environment's state within ``state``, a state of the wrapper stack ``env``
    (with a leading copy axis where the stack vectorises): what a renderer draws."""
    while isinstance(env, Wrapper):
        env, state = env.inner, env.inner_state(state)
    return state
