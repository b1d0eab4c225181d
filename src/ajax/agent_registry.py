"""Agents by name, and the agent a saved run's config describes: what results, checkpoints
and the command line rebuild agents with. It imports no agent, so the run's driver can use
it without importing the agents, whose ``train`` imports the driver."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ajax.envs.core import Env

#: Every agent by class name, filled by :func:`register` (``ajax.agents`` registers Ajax's).
AGENTS: dict[str, type] = {}


def register(cls: type) -> type:
    """Makes ``cls`` (an ``ajax.agents.Agent`` subclass) known by its class name, so that a run
    of it can be loaded and resumed; usable as a class decorator."""
    AGENTS[cls.__name__] = cls
    return cls


def agent_from_config(config: dict[str, Any], env: Env | None = None) -> Any:
    """The agent a saved run config (``agent``, ``env_id``, ``env_params``, ``n_envs``,
    ``hyperparameters``, as JSON) describes, on ``env`` where given (the environment object
    a run that was not on a registered id trained on), else on the id."""
    hyperparameters = {
        k: tuple(v) if isinstance(v, list) else v for k, v in config["hyperparameters"].items()
    }
    return AGENTS[config["agent"]](
        env_id=config["env_id"] if env is None else env,
        n_envs=config["n_envs"],
        env_params=config["env_params"] if env is None else None,
        **hyperparameters,
    )
