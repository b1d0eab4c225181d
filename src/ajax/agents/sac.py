"""Soft Actor-Critic (Haarnoja et al. 2018, arXiv:1801.01290; with the automatic temperature
of Haarnoja et al. 2018b, "Soft Actor-Critic Algorithms and Applications", arXiv:1812.05905).

A tanh-squashed Gaussian policy maximises ``E[min_i Q_i(s, a) - alpha log pi(a|s)]``; the
critics regress onto ``r + gamma (min_i Q'_i(s', a') - alpha log pi(a'|s'))`` with ``a'`` drawn
from the current policy; ``alpha`` is tuned so that the policy's entropy stays near
``target_entropy`` (``-dim(A)`` by default, the paper's). Defaults are the paper's (table 1);
``learning_starts`` is the performance page's 10,000.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from ajax.agents.base import hyperparameter
from ajax.agents.off_policy import Learner, OffPolicyAgent, OffPolicyConfig
from ajax.critics import critic_subset, temperature_loss
from ajax.nn import MLP, MLPHead, TanhNormal

#: Bounds on the policy's log standard deviation (the SAC authors' softlearning, and SB3).
LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


@dataclass(frozen=True)
class SACConfig(OffPolicyConfig):
    """SAC's hyperparameters."""

    initial_alpha: float = hyperparameter(
        1.0,
        "temperature at the start; SB3's and the authors' code.",
        low=0.0,
        low_open=True,
        batchable=True,
    )
    autotune_alpha: bool = hyperparameter(
        True, "tune the temperature toward target_entropy (Haarnoja et al. 2018b)."
    )
    target_entropy_scale: float = hyperparameter(
        1.0, "target entropy is -scale * dim(A); 1 in the paper.", low=0.0, batchable=True
    )
    n_target_critics: int = hyperparameter(
        2, "critics whose minimum forms the target; 2 (all of them) in SAC.", low=1
    )


def _squashed_gaussian(out: jax.Array) -> TanhNormal:
    """The policy whose means and log standard deviations are ``out``'s two halves."""
    mean, log_std = jnp.split(out, 2, axis=-1)
    return TanhNormal(mean, jnp.clip(log_std, LOG_STD_MIN, LOG_STD_MAX))


class SAC(OffPolicyAgent):
    """Soft Actor-Critic for continuous actions."""

    Config = SACConfig

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        c = self.config
        self._require_at_most(
            "n_target_critics", "n_critics", "the target takes its minimum over a subset of them"
        )
        outputs = MLP(c.hidden_sizes, 2 * self._action_dim, c.activation, weight_init="lecun")
        self.actor = MLPHead(outputs, _squashed_gaussian)
        self.target_entropy = -c.target_entropy_scale * self._action_dim

    def policy(self, params: dict[str, Any], obs: jax.Array) -> TanhNormal:
        """The action distribution at ``obs``, in ``[-1, 1]``."""
        return self.actor.apply(params["actor"], self._flat(obs))

    def _init_actor(self, key, obs):
        return {
            "actor": self.actor.init(key, obs),
            "log_alpha": jnp.log(jnp.asarray(self.config.initial_alpha, jnp.float32)),
        }

    def _next_value(self, learner: Learner, next_obs, key):
        action_key, subset_key = jax.random.split(key)
        next_action, next_log_prob = self.policy(learner.params, next_obs).sample_and_log_prob(
            action_key
        )
        members = critic_subset(
            subset_key, learner.target_params["critic"], self.config.n_target_critics
        )
        q = self._q(members, next_obs, next_action)
        alpha = jnp.exp(learner.params["log_alpha"])
        return q.min(axis=0) - alpha * next_log_prob

    def _actor_loss(self, actor_params, learner: Learner, obs, key):
        action, log_prob = self.policy({"actor": actor_params}, obs).sample_and_log_prob(key)
        q = self._actor_q(self._q(learner.params["critic"], obs, action))
        alpha = jnp.exp(learner.params["log_alpha"])
        return (alpha * log_prob - q).mean(), {"log_prob": log_prob}

    def _actor_q(self, q: jax.Array) -> jax.Array:
        """How the actor's objective combines the critics' values ``[n_critics, batch]``:
        their minimum in SAC."""
        return q.min(axis=0)

    def _after_actor(self, learner: Learner, aux):
        log_prob = aux["log_prob"]
        if self.config.autotune_alpha:
            grad = jax.grad(temperature_loss)(
                learner.params["log_alpha"], log_prob, self.target_entropy
            )
            learner = self._apply(learner, "log_alpha", grad)
        return learner, {
            "alpha": jnp.exp(learner.params["log_alpha"]),
            "entropy": -log_prob.mean(),
        }
