"""The agents, by name."""

from ajax.agents.base import Agent
from ajax.agents.dqn import DQN
from ajax.agents.ppo import PPO
from ajax.agents.pqn import PQN

AGENTS: dict[str, type[Agent]] = {cls.__name__: cls for cls in (PPO, DQN, PQN)}

__all__ = ["AGENTS", "DQN", "PPO", "PQN", "Agent"]
