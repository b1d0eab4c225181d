"""Twin Delayed DDPG (Fujimoto et al. 2018, "Addressing Function Approximation Error in
Actor-Critic Methods", arXiv:1802.09477).

A deterministic policy ``mu(s)`` in ``[-1, 1]`` explores with Gaussian noise; two critics
regress onto ``r + gamma min_i Q'_i(s', clip(mu'(s') + clip(noise, -c, c), -1, 1))`` (clipped
double Q-learning with target policy smoothing); the actor ascends ``Q_1(s, mu(s))`` once per
``policy_delay`` critic updates, and only then do the target networks move.

Defaults are the authors' reference implementation (sfujim/TD3, ``TD3.py`` and ``main.py``):
256x256 ReLU networks, Adam at 3e-4, batches of 256, tau 0.005, exploration noise 0.1, target
noise 0.2 clipped at 0.5, policy delay 2 (the paper's table 3 lists 400x300 networks, 1e-3
and batches of 100; the authors later moved to these). Noise scales are in the ``[-1, 1]``
action space, so they are fractions of the action range as in the paper.
``learning_starts`` is the performance page's 10,000 (the paper's start of 10,000 too, for
most tasks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from ajax.agents.base import hyperparameter, override
from ajax.agents.off_policy import Learner, OffPolicyAgent, OffPolicyConfig
from ajax.nn import MLP, NoisyDeterministic


@dataclass(frozen=True)
class TD3Config(OffPolicyConfig):
    """TD3's hyperparameters."""

    policy_delay: int = override(2, "critic updates per actor and target update; paper's d.")
    exploration_noise: float = hyperparameter(
        0.1,
        "std of the Gaussian exploration noise, in [-1, 1] units; paper.",
        low=0.0,
        batchable=True,
    )
    target_noise: float = hyperparameter(
        0.2, "std of the target policy smoothing noise; paper.", low=0.0, batchable=True
    )
    target_noise_clip: float = hyperparameter(
        0.5, "clip on the target policy smoothing noise; paper.", low=0.0, batchable=True
    )


class TD3(OffPolicyAgent):
    """Twin Delayed DDPG for continuous actions."""

    Config = TD3Config

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        c = self.config
        self.actor = MLP(c.hidden_sizes, self._action_dim, c.activation, weight_init="lecun")

    def policy(self, params: dict[str, Any], obs: jax.Array) -> NoisyDeterministic:
        """The deterministic action ``mu(obs)`` in ``[-1, 1]`` (the mode), explored with
        ``exploration_noise`` (samples)."""
        return NoisyDeterministic(
            self._mu(params["actor"], obs), jnp.float32(self.config.exploration_noise)
        )

    def _mu(self, actor_params: Any, obs: jax.Array) -> jax.Array:
        """The actor's deterministic action in ``[-1, 1]``."""
        return jnp.tanh(self.actor.apply(actor_params, self._flat(obs)))

    def _init_actor(self, key, obs):
        return {"actor": self.actor.init(key, obs)}

    def _target_names(self):
        return ("critic", "actor")

    def _after_critic(self, learner: Learner) -> Learner:
        """The targets stay: they move only after an actor update (the paper's delay)."""
        return learner

    def _after_actor(self, learner: Learner, aux):
        return self._follow_targets(learner), {}

    def _next_value(self, learner: Learner, next_obs, key):
        c = self.config
        action = self._mu(learner.target_params["actor"], next_obs)
        noise = jnp.clip(
            c.target_noise * jax.random.normal(key, action.shape),
            -c.target_noise_clip,
            c.target_noise_clip,
        )
        next_action = jnp.clip(action + noise, -1.0, 1.0)
        q = self._q(learner.target_params["critic"], next_obs, next_action)
        return q.min(axis=0)

    def _actor_loss(self, actor_params, learner: Learner, obs, key):
        q = self._q(learner.params["critic"], obs, self._mu(actor_params, obs))
        return -q[0].mean(), {}
