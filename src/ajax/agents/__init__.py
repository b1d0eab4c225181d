"""The agents, by name."""

from ajax.agents.base import Agent
from ajax.agents.dqn import DQN
from ajax.agents.ppo import PPO
from ajax.agents.pqn import PQN
from ajax.agents.redq import REDQ
from ajax.agents.sac import SAC
from ajax.agents.td3 import TD3

AGENTS: dict[str, type[Agent]] = {cls.__name__: cls for cls in (PPO, DQN, PQN, SAC, TD3, REDQ)}

__all__ = ["AGENTS", "DQN", "PPO", "PQN", "REDQ", "SAC", "TD3", "Agent"]
