"""Environments: the protocol, spaces, the registry and the wrappers."""

from ajax.envs.core import Env, Wrapper
from ajax.envs.gymnax_adapter import from_gymnax
from ajax.envs.registry import env_ids, make_env, register_family
from ajax.envs.spaces import Box, Discrete

__all__ = [
    "Box",
    "Discrete",
    "Env",
    "Wrapper",
    "env_ids",
    "from_gymnax",
    "make_env",
    "register_family",
]
