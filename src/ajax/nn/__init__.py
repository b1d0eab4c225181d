"""Networks and distributions shared by the agents."""

from ajax.nn.distributions import Categorical, Normal, TanhNormal
from ajax.nn.mlp import ACTIVATIONS, MLP

__all__ = ["ACTIVATIONS", "MLP", "Categorical", "Normal", "TanhNormal"]
