"""Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347).

Each iteration collects ``n_steps`` from each of the ``n_envs`` copies, computes GAE
advantages that bootstrap truncated episodes from their true final observation, then runs
``n_epochs`` passes of ``n_minibatches`` minibatches of the clipped surrogate objective with a
clipped value loss and an entropy bonus.

Defaults are PureJaxRL's CartPole configuration (luchris429/purejaxrl, ``ppo.py``), which
matches CleanRL's ``ppo.py`` (Huang et al. 2022, "The 37 implementation details of PPO").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from ajax.acting import PolicyFn, Transition
from ajax.agents.base import hyperparameter
from ajax.agents.on_policy import OnPolicyAgent, OnPolicyConfig, OnPolicyState
from ajax.envs import Box, Discrete, Env
from ajax.envs.wrappers import NormalizeReward
from ajax.minibatches import merge_steps
from ajax.nn import MLP, Categorical, MLPHead, Normal
from ajax.returns import gae


@dataclass(frozen=True)
class PPOConfig(OnPolicyConfig):
    """PPO's hyperparameters (the rollout's and the fit's are :class:`OnPolicyConfig`'s, with
    their defaults)."""

    gae_lambda: float = hyperparameter(
        0.95,
        "GAE lambda (Schulman et al. 2016); PureJaxRL GAE_LAMBDA.",
        low=0.0,
        high=1.0,
        batchable=True,
    )
    clip_coef: float = hyperparameter(
        0.2,
        "ratio clip epsilon (paper, sec. 3); PureJaxRL CLIP_EPS.",
        low=0.0,
        low_open=True,
        batchable=True,
    )
    clip_value_loss: bool = hyperparameter(
        True, "clip the value update around the old value as the policy's; PureJaxRL, CleanRL."
    )
    ent_coef: float = hyperparameter(
        0.01, "entropy bonus weight; PureJaxRL ENT_COEF.", low=0.0, batchable=True
    )
    vf_coef: float = hyperparameter(
        0.5, "value-loss weight; PureJaxRL VF_COEF.", low=0.0, batchable=True
    )
    max_grad_norm: float = hyperparameter(
        0.5,
        "global gradient-norm clip; PureJaxRL MAX_GRAD_NORM.",
        low=0.0,
        low_open=True,
        batchable=True,
    )
    anneal_lr: bool = hyperparameter(
        True, "decay the step size linearly to 0 over the run; PureJaxRL ANNEAL_LR."
    )
    normalize_advantages: bool = hyperparameter(
        True, "standardise advantages per minibatch; CleanRL norm_adv."
    )
    normalize_observations: bool = hyperparameter(
        False, "running observation standardisation; CleanRL ppo_continuous uses it."
    )
    normalize_rewards: bool = hyperparameter(
        False, "scale rewards by the running return's std; CleanRL ppo_continuous uses it."
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (64, 64), "hidden layers of the actor and of the critic; PureJaxRL."
    )
    activation: str = hyperparameter("tanh", "hidden activation; PureJaxRL.")
    init_log_std: float = hyperparameter(
        0.0, "initial log std of the Gaussian policy (continuous actions); CleanRL."
    )


class _GaussianActor(nn.Module):
    hidden_sizes: tuple[int, ...]
    action_dim: int
    activation: str
    init_log_std: float

    @nn.compact
    def __call__(self, obs: jax.Array) -> Normal:
        mean = MLP(self.hidden_sizes, self.action_dim, self.activation, out_gain=0.01)(obs)
        log_std = self.param(
            "log_std", nn.initializers.constant(self.init_log_std), (self.action_dim,)
        )
        return Normal(mean, jnp.broadcast_to(log_std, mean.shape))


class PPO(OnPolicyAgent):
    """Proximal Policy Optimization for discrete and continuous actions."""

    Config = PPOConfig
    action_spaces = (Discrete, Box)
    default_n_envs = 4

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        c = self.config
        space = self.env.action_space
        if isinstance(space, Discrete):
            logits = MLP(c.hidden_sizes, space.n, c.activation, out_gain=0.01)
            self.actor = MLPHead(logits, Categorical)
        else:
            dim = math.prod(space.shape)
            self.actor = _GaussianActor(c.hidden_sizes, dim, c.activation, c.init_log_std)
        self.critic = MLP(c.hidden_sizes, 1, c.activation, out_gain=1.0)

    def _direction(self) -> optax.GradientTransformation:
        # Adam's epsilon of 1e-5: PureJaxRL and CleanRL.
        return optax.scale_by_adam(eps=1e-5)

    def wrap_env(self, env: Env) -> Env:
        env = super().wrap_env(env)
        if self.config.normalize_rewards:
            env = NormalizeReward(env, self.config.gamma)
        return env

    def policy(self, params: dict[str, Any], obs: jax.Array) -> Categorical | Normal:
        """The action distribution at ``obs`` (in the agent's action space, ``[-1, 1]`` for
        continuous actions)."""
        return self.actor.apply(params["actor"], self._flat(obs))

    def value(self, params: dict[str, Any], obs: jax.Array) -> jax.Array:
        """The critic's estimate of the discounted return from ``obs``."""
        return self.critic.apply(params["critic"], self._flat(obs))[..., 0]

    def _init_params(self, key: jax.Array, obs: jax.Array) -> dict[str, Any]:
        actor_key, critic_key = jax.random.split(key)
        flat = self._flat(obs)
        return {
            "actor": self.actor.init(actor_key, flat),
            "critic": self.critic.init(critic_key, flat),
        }

    def _behaviour(self, state: OnPolicyState) -> PolicyFn:
        """Samples of the policy, with their log-probabilities for the ratio."""

        def policy_fn(params, obs, carry, key):
            dist = self.policy(params, obs)
            action = dist.sample(key)
            return action, carry, dist.log_prob(action)

        return policy_fn

    def _batch(self, state: OnPolicyState, steps: Transition, log_probs: jax.Array):
        values = self.value(state.params, steps.obs)
        next_values = self.value(state.params, steps.next_obs)
        state, advantages, targets, metrics = self._advantages(state, steps, values, next_values)
        leaves = (steps.obs, steps.action, log_probs, values, advantages, targets)
        return state, tuple(map(merge_steps, leaves)), metrics

    def _advantages(
        self, state: OnPolicyState, steps: Transition, values: jax.Array, next_values: jax.Array
    ) -> tuple[OnPolicyState, jax.Array, jax.Array, dict[str, jax.Array]]:
        """The advantages and value targets of a rollout ``[n_steps, n_envs]``, with the state
        and metrics: GAE."""
        advantages, targets = self._gae(steps, steps.reward, values, next_values)
        return state, advantages, targets, {}

    def _gae(
        self, steps: Transition, rewards: jax.Array, values: jax.Array, next_values: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """GAE of ``rewards`` over the rollout ``steps``, bootstrapping truncated episodes from
        their true final observation and cutting at every episode end."""
        c = self.config
        terminated = steps.terminated.astype(jnp.float32)
        done = steps.done.astype(jnp.float32)
        return gae(rewards, values, next_values, terminated, done, c.gamma, c.gae_lambda)

    def _loss(self, params, batch):
        c = self.config
        obs, action, old_log_prob, old_value, advantage, target = batch
        dist = self.policy(params, obs)
        log_ratio = dist.log_prob(action) - old_log_prob
        ratio = jnp.exp(log_ratio)
        if c.normalize_advantages:
            advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        surrogate = jnp.minimum(
            ratio * advantage, jnp.clip(ratio, 1 - c.clip_coef, 1 + c.clip_coef) * advantage
        )
        policy_loss = -surrogate.mean()
        value = self.value(params, obs)
        value_loss = (value - target) ** 2
        if c.clip_value_loss:
            clipped = old_value + jnp.clip(value - old_value, -c.clip_coef, c.clip_coef)
            value_loss = jnp.maximum(value_loss, (clipped - target) ** 2)
        value_loss = 0.5 * value_loss.mean()
        entropy = dist.entropy().mean()
        loss = policy_loss + c.vf_coef * value_loss - c.ent_coef * entropy
        # Schulman's k3 estimator of KL(old || new), as CleanRL logs it.
        approx_kl = ((ratio - 1) - log_ratio).mean()
        return loss, {
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "approx_kl": approx_kl,
        }
