"""Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347).

Each iteration collects ``n_steps`` from each of the ``n_envs`` copies, computes GAE
advantages that bootstrap truncated episodes from their true final observation, then runs
``n_epochs`` passes of ``n_minibatches`` minibatches of the clipped surrogate objective with a
clipped value loss and an entropy bonus.

Defaults are PureJaxRL's CartPole configuration (luchris429/purejaxrl, ``ppo.py``), which
matches CleanRL's ``ppo.py`` (Huang et al. 2022, "The 37 implementation details of PPO").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import struct

from ajax.acting import Transition, episode_metrics, step_env
from ajax.agents.base import Agent, hyperparameter
from ajax.envs import Box, Discrete, Env
from ajax.envs.wrappers import NormalizeObservation, NormalizeReward
from ajax.minibatches import check_minibatches, fit_minibatches, merge_steps
from ajax.nn import MLP, Categorical, Normal
from ajax.returns import gae
from ajax.updates import annealed


@dataclass(frozen=True)
class PPOConfig:
    """PPO's hyperparameters."""

    learning_rate: float = hyperparameter(
        2.5e-4, "Adam step size; PureJaxRL/CleanRL CartPole.", low=0.0, low_open=True
    )
    n_steps: int = hyperparameter(
        128, "steps collected per copy per iteration; PureJaxRL NUM_STEPS.", low=1
    )
    n_epochs: int = hyperparameter(4, "passes over each rollout; PureJaxRL UPDATE_EPOCHS.", low=1)
    n_minibatches: int = hyperparameter(
        4, "minibatches per epoch; PureJaxRL NUM_MINIBATCHES.", low=1
    )
    gamma: float = hyperparameter(0.99, "discount; PureJaxRL GAMMA.", low=0.0, high=1.0)
    gae_lambda: float = hyperparameter(
        0.95, "GAE lambda (Schulman et al. 2016); PureJaxRL GAE_LAMBDA.", low=0.0, high=1.0
    )
    clip_coef: float = hyperparameter(
        0.2, "ratio clip epsilon (paper, sec. 3); PureJaxRL CLIP_EPS.", low=0.0, low_open=True
    )
    clip_value_loss: bool = hyperparameter(
        True, "clip the value update around the old value as the policy's; PureJaxRL, CleanRL."
    )
    ent_coef: float = hyperparameter(0.01, "entropy bonus weight; PureJaxRL ENT_COEF.", low=0.0)
    vf_coef: float = hyperparameter(0.5, "value-loss weight; PureJaxRL VF_COEF.", low=0.0)
    max_grad_norm: float = hyperparameter(
        0.5, "global gradient-norm clip; PureJaxRL MAX_GRAD_NORM.", low=0.0, low_open=True
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


@struct.dataclass
class PPOState:
    params: dict[str, Any]
    opt_state: optax.OptState
    env_state: Any
    obs: jax.Array
    key: jax.Array
    iteration: jax.Array
    total_iterations: jax.Array


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


class _CategoricalActor(nn.Module):
    hidden_sizes: tuple[int, ...]
    n_actions: int
    activation: str

    @nn.compact
    def __call__(self, obs: jax.Array) -> Categorical:
        return Categorical(MLP(self.hidden_sizes, self.n_actions, self.activation, 0.01)(obs))


class PPO(Agent):
    """Proximal Policy Optimization for discrete and continuous actions."""

    Config = PPOConfig
    action_spaces = (Discrete, Box)
    default_n_envs = 4

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        c = self.config
        check_minibatches(self.n_envs, c.n_steps, c.n_minibatches)
        space = self.env.action_space
        if isinstance(space, Discrete):
            self.actor = _CategoricalActor(c.hidden_sizes, space.n, c.activation)
        else:
            dim = int(jnp.prod(jnp.asarray(space.shape)))
            self.actor = _GaussianActor(c.hidden_sizes, dim, c.activation, c.init_log_std)
        self.critic = MLP(c.hidden_sizes, 1, c.activation, out_gain=1.0)
        self._optimizer = optax.chain(
            optax.clip_by_global_norm(c.max_grad_norm), optax.scale_by_adam(eps=1e-5)
        )

    @property
    def steps_per_iteration(self) -> int:
        return self.n_envs * self.config.n_steps

    def wrap_env(self, env: Env) -> Env:
        if self.config.normalize_observations:
            env = NormalizeObservation(env)
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

    def act(self, params, obs, key, deterministic):
        dist = self.policy(params, obs)
        action = dist.mode() if deterministic else dist.sample(key)
        return self._env_action(action, obs)

    def init(self, key: jax.Array, env: Env, total_iterations: int) -> PPOState:
        actor_key, critic_key, env_key, key = jax.random.split(key, 4)
        env_state, obs = env.reset(env_key)
        flat = self._flat(obs)
        params = {
            "actor": self.actor.init(actor_key, flat),
            "critic": self.critic.init(critic_key, flat),
        }
        return PPOState(
            params=params,
            opt_state=self._optimizer.init(params),
            env_state=env_state,
            obs=obs,
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            total_iterations=jnp.asarray(total_iterations, jnp.int32),
        )

    def _collect(self, state: PPOState, env: Env) -> tuple[PPOState, Transition, jax.Array]:
        """Roll out ``n_steps`` per copy; returns the rollout and its log-probabilities."""

        def one_step(carry, _):
            env_state, obs, key = carry
            key, act_key, step_key = jax.random.split(key, 3)
            dist = self.policy(state.params, obs)
            action = dist.sample(act_key)
            env_state, next_obs, transition = step_env(env, step_key, env_state, obs, action)
            return (env_state, next_obs, key), (transition, dist.log_prob(action))

        (env_state, obs, key), (rollout, log_probs) = jax.lax.scan(
            one_step, (state.env_state, state.obs, state.key), length=self.config.n_steps
        )
        return state.replace(env_state=env_state, obs=obs, key=key), rollout, log_probs

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

    def _learning_rate(self, state: PPOState) -> jax.Array:
        progress = state.iteration / jnp.maximum(state.total_iterations, 1)
        return annealed(self.config.learning_rate, progress, self.config.anneal_lr)

    def _update(self, state: PPOState, batch: tuple) -> tuple[PPOState, dict[str, jax.Array]]:
        """``n_epochs`` passes of ``n_minibatches`` shuffled minibatches over ``batch``."""
        c = self.config
        lr = self._learning_rate(state)

        state, metrics = fit_minibatches(
            state, batch, self._loss, self._optimizer, lr, c.n_epochs, c.n_minibatches
        )
        return state, metrics | {"learning_rate": lr}

    def iteration(self, state: PPOState, env: Env) -> tuple[PPOState, dict[str, jax.Array]]:
        c = self.config
        state, rollout, log_probs = self._collect(state, env)
        values = self.value(state.params, rollout.obs)
        next_values = self.value(state.params, rollout.next_obs)
        advantages, targets = gae(
            rollout.reward,
            values,
            next_values,
            rollout.terminated.astype(jnp.float32),
            rollout.done.astype(jnp.float32),
            c.gamma,
            c.gae_lambda,
        )
        batch = tuple(
            map(merge_steps, (rollout.obs, rollout.action, log_probs, values, advantages, targets))
        )
        state, metrics = self._update(state, batch)
        state = state.replace(iteration=state.iteration + 1)
        return state, metrics | episode_metrics(rollout)
