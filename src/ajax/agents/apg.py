"""Analytic Policy Gradient: the return of a short rollout, differentiated through the
environment's step (Brax's APG, google/brax ``brax/training/agents/apg``; Freeman et al. 2021,
"Brax", section 4).

Each iteration rolls every copy forward ``horizon`` steps from where the previous window
stopped, with reparameterised samples of the policy, and takes one optimiser step on minus
the window's mean reward, differentiated through the policy and the dynamics. Gradients are
truncated at the window's edges: the window starts from a state that is data, not a function
of the parameters, and the state it hands on is cut from the gradient (``stop_gradient``), so
a reward beyond the window has no gradient with respect to the actions inside it (Brax
likewise starts each window from the state the last one reached).

Only differentiable environments are accepted (``Env.differentiable``): ``ajax/
PendulumTracking-v0``, and Brax environments built with ``differentiable_reset=True``.
Observation normalisation keeps its statistics out of the gradient (:class:`ajax.envs.
wrappers.RunningMoments`).

Defaults are Brax APG's (``apg/train.py`` and ``apg/networks.py``): a policy of four
LayerNorm ELU layers of 32 units, a tanh-squashed Gaussian with scale ``0.1 (softplus(x) +
0.001)``, windows of 32 steps, Adam with betas (0.7, 0.95) decaying by 0.997 per update, and
each gradient element clipped to [-1, 1]; the step size (3e-3), the 64 copies and the
observation normalisation are those of Brax's own APG test (``apg/train_test.py``), since
``train()``'s step size of 1e-4 barely moves a policy in a budget of a few hundred updates.
The network is Ajax's MLP: orthogonal weights with gain sqrt(2) on hidden layers and 0.01 on
the output, LayerNorm before each activation (Brax: gain 0.01 on every layer, LayerNorm
after each activation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax

from ajax.acting import EnvCursor, PolicyFn, episode_metrics, rollout
from ajax.agents.base import Agent, hyperparameter
from ajax.agents.on_policy import OnPolicyState
from ajax.envs import Box, Env
from ajax.nn import MLP, MLPHead, TanhNormal
from ajax.updates import optimizer_step

SOURCE = "Brax APG"


@dataclass(frozen=True)
class APGConfig:
    """APG's hyperparameters."""

    horizon: int = hyperparameter(
        32, f"steps per differentiated window; {SOURCE} horizon_length.", low=1
    )
    learning_rate: float = hyperparameter(
        3e-3,
        "Adam step size at the start; Brax's APG test (apg/train_test.py). train()'s 1e-4 "
        "cut the tracking cost by 10% in 200k steps, 3e-3 by 99% (docs/agents/apg.md).",
        low=0.0,
        low_open=True,
        batchable=True,
    )
    learning_rate_decay: float = hyperparameter(
        0.997,
        f"factor on the step size after each update; {SOURCE} schedule_decay.",
        low=0.0,
        high=1.0,
        low_open=True,
    )
    adam_b1: float = hyperparameter(0.7, f"Adam's beta 1; {SOURCE} adam_b.", low=0.0, high=1.0)
    adam_b2: float = hyperparameter(0.95, f"Adam's beta 2; {SOURCE} adam_b.", low=0.0, high=1.0)
    gradient_clip: float = hyperparameter(
        1.0,
        f"bound on each gradient element; {SOURCE} optax.clip(1.0).",
        low=0.0,
        low_open=True,
    )
    normalize_observations: bool = hyperparameter(
        True, "running observation standardisation; Brax's APG test (train()'s default: off)."
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (32, 32, 32, 32), f"policy layers, LayerNorm after each; {SOURCE} networks."
    )
    activation: str = hyperparameter("elu", f"hidden activation; {SOURCE} networks.")
    noise_scale: float = hyperparameter(
        0.1, f"factor on the policy's std; {SOURCE} NormalTanhDistribution var_scale.", low=0.0
    )


def _tanh_normal(scale: float):
    """Brax's NormalTanhDistribution: std ``scale (softplus(x) + 0.001)``."""

    def head(out: jax.Array) -> TanhNormal:
        mean, raw = jnp.split(out, 2, axis=-1)
        return TanhNormal(mean, jnp.log(scale * (jax.nn.softplus(raw) + 0.001)))

    return head


class APG(Agent):
    """Analytic Policy Gradient for continuous actions on differentiable environments."""

    Config = APGConfig
    action_spaces = (Box,)
    example_env = "ajax/PendulumTracking-v0"
    default_n_envs = 64

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        if not self.env.differentiable:
            raise ValueError(
                f"APG differentiates rollouts through the environment's step, and "
                f"{self.env_id} is not differentiable. Use ajax/PendulumTracking-v0, or a "
                "Brax environment built with env_params={'differentiable_reset': True}."
            )
        c = self.config
        dim = int(math.prod(self.env.action_space.shape))
        outputs = MLP(c.hidden_sizes, 2 * dim, c.activation, out_gain=0.01, layer_norm=True)
        self.actor = MLPHead(outputs, _tanh_normal(c.noise_scale))
        schedule = optax.exponential_decay(c.learning_rate, 1, c.learning_rate_decay)
        self._optimizer = optax.chain(
            optax.clip(c.gradient_clip), optax.adam(schedule, b1=c.adam_b1, b2=c.adam_b2)
        )

    @property
    def steps_per_iteration(self) -> int:
        return self.n_envs * self.config.horizon

    def policy(self, params: dict[str, Any], obs: jax.Array) -> TanhNormal:
        """The tanh-squashed Gaussian at ``obs``, in ``[-1, 1]``."""
        return self.actor.apply(params["actor"], self._flat(obs))

    def _behaviour(self) -> PolicyFn:
        """Reparameterised samples, so the reward is differentiable in the parameters."""

        def policy_fn(params, obs, carry, key):
            return self._env_action(self.policy(params, obs).sample(key), obs), carry, ()

        return policy_fn

    def _window(
        self, params: dict[str, Any], env: Env, cursor: EnvCursor, key: jax.Array
    ) -> tuple[jax.Array, tuple[EnvCursor, Any]]:
        """Minus the mean reward of one window of ``horizon`` steps from ``cursor``, and the
        cursor it ends at (cut from the gradient) with its transitions."""
        cursor, steps, _ = rollout(
            env,
            self._behaviour(),
            params,
            cursor,
            key,
            self.config.horizon,
            self.initial_carry(params, self.n_envs),
        )
        return -steps.reward.mean(), (jax.lax.stop_gradient(cursor), steps)

    def init(self, key: jax.Array, env: Env, total_iterations: int) -> OnPolicyState:
        def init_params(params_key, obs):
            return {"actor": self.actor.init(params_key, self._flat(obs))}

        params, cursor, key = self._start(key, env, init_params)
        opt_state = self._optimizer.init(params)
        return OnPolicyState.start(params, opt_state, cursor, key, total_iterations)

    def iteration(
        self, state: OnPolicyState, env: Env
    ) -> tuple[OnPolicyState, dict[str, jax.Array]]:
        key, window_key = jax.random.split(state.key)
        (loss, (cursor, steps)), grads = jax.value_and_grad(self._window, has_aux=True)(
            state.params, env, state.cursor, window_key
        )
        params, opt_state = optimizer_step(self._optimizer, grads, state.opt_state, state.params)
        state = state.replace(
            params=params,
            opt_state=opt_state,
            cursor=cursor,
            key=key,
            iteration=state.iteration + 1,
        )
        metrics = {"loss": loss, "gradient_norm": optax.tree.norm(grads)}
        return state, metrics | episode_metrics(steps)
