"""Randomized Ensembled Double Q-learning (Chen et al. 2021, "Randomized Ensembled Double
Q-Learning: Learning Fast Without a Model", arXiv:2101.05982).

SAC with an ensemble of ``n_critics = 10`` critics, a target that takes the minimum over a
random subset of ``n_target_critics = 2`` of them drawn at each update, and an update-to-data
ratio of ``gradient_steps = 20`` critic updates per environment step; the policy is updated
once per environment step (after the 20 critic updates) against the mean of all critics
(Algorithm 1). Everything else is SAC's, and is imported from it. Defaults are the paper's
(appendix table 1: the SAC values, N = 10, M = 2, G = 20); ``learning_starts`` is the
performance page's 10,000 (the paper uses 5,000).
"""

from __future__ import annotations

from dataclasses import dataclass

import jax

from ajax.agents.base import override
from ajax.agents.sac import SAC, SACConfig


@dataclass(frozen=True)
class REDQConfig(SACConfig):
    """REDQ's hyperparameters."""

    gradient_steps: int = override(
        20, "critic updates per iteration, the paper's update-to-data ratio G."
    )
    policy_delay: int = override(20, "critic updates per actor update: one per step; paper.")
    n_critics: int = override(10, "critics in the ensemble, the paper's N.")
    n_target_critics: int = override(2, "critics sampled for the target's minimum, the paper's M.")


class REDQ(SAC):
    """Randomized Ensembled Double Q-learning for continuous actions."""

    Config = REDQConfig

    def _actor_q(self, q: jax.Array) -> jax.Array:
        """The ensemble's mean, as the paper's actor objective."""
        return q.mean(axis=0)
