"""Parallelised Q-Network (Gallici et al. 2025, "Simplifying Deep Temporal Difference
Learning", arXiv:2407.04811).

Q-learning without a replay buffer or a target network: many environment copies collect a
short epsilon-greedy rollout, Q(lambda) returns are computed over it, and a LayerNorm network
regresses onto them for a few epochs of minibatches; LayerNorm is what keeps the
bootstrapping stable without a target network (the paper's section 4).

Defaults are purejaxql's CartPole-v1 configuration (``config/alg/pqn_cartpole.yaml``): 32
copies x 64 steps, 4 epochs x 16 minibatches, RAdam at 1e-4 decaying linearly, lambda 0.95,
epsilon 1 -> 0.2 over the first 20% of the run, rewards scaled by 0.1, two LayerNorm layers
of 256 units. Weights are initialised orthogonally, as every Ajax MLP (purejaxql keeps Flax's
LeCun-normal default); the learning test passes with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from ajax.acting import episode_metrics, step_env
from ajax.agents.base import hyperparameter
from ajax.agents.q_learning import QLearningAgent
from ajax.envs import Env
from ajax.exploration import epsilon_greedy, linear_schedule
from ajax.minibatches import check_minibatches, fit_minibatches, merge_steps
from ajax.returns import lambda_returns
from ajax.updates import annealed


@dataclass(frozen=True)
class PQNConfig:
    """PQN's hyperparameters."""

    learning_rate: float = hyperparameter(
        1e-4, "RAdam step size; purejaxql CartPole LR.", low=0.0, low_open=True
    )
    anneal_lr: bool = hyperparameter(
        True, "decay the step size linearly to 0; purejaxql LR_LINEAR_DECAY."
    )
    n_steps: int = hyperparameter(64, "steps per copy per iteration; purejaxql NUM_STEPS.", low=1)
    n_epochs: int = hyperparameter(4, "passes over each rollout; purejaxql NUM_EPOCHS.", low=1)
    n_minibatches: int = hyperparameter(
        16, "minibatches per pass; purejaxql NUM_MINIBATCHES.", low=1
    )
    gamma: float = hyperparameter(0.99, "discount; purejaxql GAMMA.", low=0.0, high=1.0)
    q_lambda: float = hyperparameter(
        0.95, "lambda of the Q(lambda) returns; purejaxql LAMBDA.", low=0.0, high=1.0
    )
    initial_epsilon: float = hyperparameter(
        1.0, "epsilon at the start; purejaxql EPS_START.", low=0.0, high=1.0
    )
    final_epsilon: float = hyperparameter(
        0.2, "epsilon after the decay; purejaxql EPS_FINISH.", low=0.0, high=1.0
    )
    exploration_fraction: float = hyperparameter(
        0.2,
        "fraction of the run over which epsilon decays; purejaxql EPS_DECAY.",
        low=0.0,
        high=1.0,
    )
    max_grad_norm: float = hyperparameter(
        10.0, "global gradient-norm clip; purejaxql MAX_GRAD_NORM.", low=0.0, low_open=True
    )
    reward_scale: float = hyperparameter(
        0.1, "factor on rewards before learning; purejaxql REW_SCALE.", low=0.0, low_open=True
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (256, 256), "LayerNorm Q-network layers; purejaxql HIDDEN_SIZE x NUM_LAYERS."
    )
    activation: str = hyperparameter("relu", "hidden activation; purejaxql.")


@struct.dataclass
class PQNState:
    params: Any
    opt_state: optax.OptState
    env_state: Any
    obs: jax.Array
    key: jax.Array
    iteration: jax.Array
    total_iterations: jax.Array


class PQN(QLearningAgent):
    """Parallelised Q-Network for discrete actions."""

    Config = PQNConfig
    default_n_envs = 32

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        c = self.config
        check_minibatches(self.n_envs, c.n_steps, c.n_minibatches)
        self._build_network(layer_norm=True)
        self._optimizer = optax.chain(
            optax.clip_by_global_norm(c.max_grad_norm), optax.scale_by_radam()
        )

    @property
    def steps_per_iteration(self) -> int:
        return self.n_envs * self.config.n_steps

    def init(self, key: jax.Array, env: Env, total_iterations: int) -> PQNState:
        net_key, env_key, key = jax.random.split(key, 3)
        env_state, obs = env.reset(env_key)
        params = self._init_network(net_key, obs)
        return PQNState(
            params=params,
            opt_state=self._optimizer.init(params),
            env_state=env_state,
            obs=obs,
            key=key,
            iteration=jnp.zeros((), jnp.int32),
            total_iterations=jnp.asarray(total_iterations, jnp.int32),
        )

    def _progress(self, state: PQNState) -> jax.Array:
        return state.iteration / jnp.maximum(state.total_iterations, 1)

    def _collect(self, state: PQNState, env: Env):
        c = self.config
        progress = self._progress(state) / max(c.exploration_fraction, 1e-8)
        epsilon = linear_schedule(c.initial_epsilon, c.final_epsilon, progress)

        def one_step(carry, _):
            env_state, obs, key = carry
            key, act_key, step_key = jax.random.split(key, 3)
            action = epsilon_greedy(act_key, self.q_values(state.params, obs), epsilon)
            env_state, next_obs, transition = step_env(env, step_key, env_state, obs, action)
            return (env_state, next_obs, key), transition

        (env_state, obs, key), rollout = jax.lax.scan(
            one_step, (state.env_state, state.obs, state.key), length=c.n_steps
        )
        return state.replace(env_state=env_state, obs=obs, key=key), rollout, epsilon

    def _loss(self, params, batch):
        obs, action, target = batch
        q = jnp.take_along_axis(self.q_values(params, obs), action[:, None], -1)[:, 0]
        loss = 0.5 * jnp.mean((q - target) ** 2)
        return loss, {"td_loss": loss, "q_value": q.mean()}

    def iteration(self, state: PQNState, env: Env) -> tuple[PQNState, dict[str, jax.Array]]:
        c = self.config
        state, rollout, epsilon = self._collect(state, env)
        next_values = self.q_values(state.params, rollout.next_obs).max(-1)
        targets = lambda_returns(
            c.reward_scale * rollout.reward,
            next_values,
            rollout.terminated.astype(jnp.float32),
            rollout.done,
            c.gamma,
            c.q_lambda,
        )
        batch = tuple(map(merge_steps, (rollout.obs, rollout.action, targets)))
        lr = annealed(c.learning_rate, self._progress(state), c.anneal_lr)

        state, metrics = fit_minibatches(
            state, batch, self._loss, self._optimizer, lr, c.n_epochs, c.n_minibatches
        )
        state = state.replace(iteration=state.iteration + 1)
        metrics = metrics | {"epsilon": epsilon, "learning_rate": lr}
        return state, metrics | episode_metrics(rollout)
