"""Networks and distributions shared by the agents."""

from ajax.nn.distributions import (
    Categorical,
    EpsilonGreedy,
    NoisyDeterministic,
    Normal,
    TanhNormal,
)
from ajax.nn.mlp import ACTIVATIONS, MLP, MLPHead, dense

__all__ = [
    "ACTIVATIONS",
    "MLP",
    "Categorical",
    "EpsilonGreedy",
    "MLPHead",
    "NoisyDeterministic",
    "Normal",
    "TanhNormal",
    "dense",
]
