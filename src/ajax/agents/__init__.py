"""The agents, by name."""

from ajax.agents.base import Agent
from ajax.agents.ppo import PPO

AGENTS: dict[str, type[Agent]] = {cls.__name__: cls for cls in (PPO,)}

__all__ = ["AGENTS", "PPO", "Agent"]
