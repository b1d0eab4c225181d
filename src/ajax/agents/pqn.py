"""Parallelised Q-Network (Gallici et al. 2025, "Simplifying Deep Temporal Difference
Learning", arXiv:2407.04811).

Q-learning without a replay buffer or a target network: many environment copies collect a
short epsilon-greedy rollout, Q(lambda) returns are computed over it, and a LayerNorm network
regresses onto them for a few epochs of minibatches; LayerNorm is what keeps the
bootstrapping stable without a target network (the paper's section 4).

Defaults are purejaxql's CartPole-v1 configuration (``config/alg/pqn_cartpole.yaml``): 32
copies x 64 steps, 4 epochs x 16 minibatches, RAdam at 1e-4 decaying linearly, lambda 0.95,
epsilon 1 -> 0.2 over the first 20% of the run, rewards scaled by 0.1, two LayerNorm layers
of 256 units. Weights are initialised orthogonally, as PPO's (purejaxql keeps Flax's
LeCun-normal default); the learning test passes with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax

from ajax.acting import PolicyFn, Transition
from ajax.agents.base import hyperparameter, override
from ajax.agents.on_policy import OnPolicyAgent, OnPolicyConfig, OnPolicyState
from ajax.agents.q_learning import QLearningAgent
from ajax.exploration import linear_schedule
from ajax.minibatches import merge_steps
from ajax.returns import lambda_returns


@dataclass(frozen=True)
class PQNConfig(OnPolicyConfig):
    """PQN's hyperparameters; the rollout's and the fit's are declared by
    :class:`OnPolicyConfig`, with purejaxql's defaults here."""

    learning_rate: float = override(1e-4, "RAdam step size; purejaxql CartPole LR.")
    n_steps: int = override(64, "steps per copy per iteration; purejaxql NUM_STEPS.")
    n_epochs: int = override(4, "passes over each rollout; purejaxql NUM_EPOCHS.")
    n_minibatches: int = override(16, "minibatches per pass; purejaxql NUM_MINIBATCHES.")
    gamma: float = override(0.99, "discount; purejaxql GAMMA.")
    max_grad_norm: float = override(10.0, "global gradient-norm clip; purejaxql MAX_GRAD_NORM.")
    q_lambda: float = hyperparameter(
        0.95,
        "lambda of the Q(lambda) returns; purejaxql LAMBDA.",
        low=0.0,
        high=1.0,
        batchable=True,
    )
    initial_epsilon: float = hyperparameter(
        1.0, "epsilon at the start; purejaxql EPS_START.", low=0.0, high=1.0, batchable=True
    )
    final_epsilon: float = hyperparameter(
        0.2, "epsilon after the decay; purejaxql EPS_FINISH.", low=0.0, high=1.0, batchable=True
    )
    exploration_fraction: float = hyperparameter(
        0.2,
        "fraction of the run over which epsilon decays; purejaxql EPS_DECAY.",
        low=0.0,
        high=1.0,
    )
    reward_scale: float = hyperparameter(
        0.1,
        "factor on rewards before learning; purejaxql REW_SCALE.",
        low=0.0,
        low_open=True,
        batchable=True,
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (256, 256), "LayerNorm Q-network layers; purejaxql HIDDEN_SIZE x NUM_LAYERS."
    )
    activation: str = hyperparameter("relu", "hidden activation; purejaxql.")


class PQN(OnPolicyAgent, QLearningAgent):
    """Parallelised Q-Network for discrete actions."""

    Config = PQNConfig
    default_n_envs = 32

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        self._build_network(layer_norm=True)

    def _direction(self) -> optax.GradientTransformation:
        return optax.scale_by_radam()

    def _init_params(self, key: jax.Array, obs: jax.Array) -> Any:
        return self._init_network(key, obs)

    def _epsilon(self, state: OnPolicyState) -> jax.Array:
        c = self.config
        progress = state.progress / max(c.exploration_fraction, 1e-8)
        return linear_schedule(c.initial_epsilon, c.final_epsilon, progress)

    def _behaviour(self, state: OnPolicyState) -> PolicyFn:
        return self._explorer(self._epsilon(state))

    def _batch(self, state: OnPolicyState, steps: Transition, extras: Any):
        """Q(lambda) returns of the rollout, from the network being trained (PQN has no target
        network)."""
        c = self.config
        next_values = self.q_values(state.params, steps.next_obs).max(-1)
        targets = lambda_returns(
            c.reward_scale * steps.reward,
            next_values,
            steps.terminated.astype(jnp.float32),
            steps.done,
            c.gamma,
            c.q_lambda,
        )
        batch = tuple(map(merge_steps, (steps.obs, steps.action, targets)))
        return state, batch, {"epsilon": self._epsilon(state)}

    def _loss(self, params, batch):
        obs, action, target = batch
        q = jnp.take_along_axis(self.q_values(params, obs), action[:, None], -1)[:, 0]
        loss = 0.5 * jnp.mean((q - target) ** 2)
        return loss, {"td_loss": loss, "q_value": q.mean()}
