"""The agents, by name."""

from ajax.agent_registry import AGENTS, register
from ajax.agents.apg import APG
from ajax.agents.apo import APO
from ajax.agents.asac import ASAC
from ajax.agents.avg import AVG
from ajax.agents.base import Agent
from ajax.agents.dqn import DQN
from ajax.agents.dreamerv3 import DreamerV3
from ajax.agents.ppo import PPO
from ajax.agents.pqn import PQN
from ajax.agents.redq import REDQ
from ajax.agents.sac import SAC
from ajax.agents.td3 import TD3
from ajax.agents.tdmpc2 import TDMPC2
from ajax.agents.udrl import UDRL

for cls in (PPO, DQN, PQN, SAC, TD3, REDQ, APO, APG, UDRL, ASAC, AVG, TDMPC2, DreamerV3):
    register(cls)

__all__ = [
    "AGENTS",
    "APG",
    "APO",
    "ASAC",
    "AVG",
    "DQN",
    "PPO",
    "PQN",
    "REDQ",
    "SAC",
    "TD3",
    "TDMPC2",
    "UDRL",
    "Agent",
    "DreamerV3",
]
