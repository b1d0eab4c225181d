"""Action Value Gradient (Vasan et al. 2024, "Deep Policy Gradient Methods Without Batch
Updates, Target Networks, or Replay Buffers", arXiv:2411.15370; reference code
gauthamvasan/avg, ``avg.py``).

Incremental actor-critic learning: every environment step is one update, on that step alone.
There is no replay buffer and no target network. The actor executes a reparameterised sample
``a~`` of a tanh-squashed Gaussian, and after the step both networks take one Adam step from
their parameters at acting time:

* actor: minimise ``alpha log pi(a~|s) - Q(s, a~)``, through the executed sample;
* critic: minimise ``(delta / sigma)^2`` with ``delta = r + gamma (1 - terminated) [Q(s', a') -
  alpha log pi(a'|s')] - Q(s, a~)``, ``a'`` a fresh sample at ``s'``, the bootstrap held fixed.

``sigma`` scales the TD error (the paper's appendix, after Schaul et al. 2021): Welford
statistics of the entropy-augmented reward ``r - alpha log pi(a~|s)``, of the discount
(``gamma``, or 0 at termination) and of the squared return give ``sigma = sqrt(max(var(r) +
var(discount) mean(G^2), 1e-4))``, or 1 while that is at most 0.01 and no return has been seen.
As in the reference, ``G`` is the undiscounted sum of the augmented rewards, recorded and reset
at termination only (a truncated episode's sum runs on into the next one).

Both networks are two LeakyReLU layers of 256 units whose output is divided by its norm
before the last layer (penultimate normalisation), with orthogonal weights of gain 1 and zero
biases; observations are standardised with running statistics (the reference's gymnasium
``NormalizeObservation``, which also updates before it normalises; Ajax's clips at 10); Adam
has ``beta_1 = 0``. The reference's actor head called ``log_std`` is used as a log-variance
(``MultivariateNormal(mu, diag(exp(h)))``): the standard deviation is ``exp(h / 2)``, with
``h`` clipped to [-20, 2]; Ajax does the same.

Defaults are the reference's (``avg.py``'s arguments, its README's settings for Ant,
HalfCheetah and Humanoid): actor step 0.0063, critic step 0.0087, alpha 0.07, gamma 0.99. With
``n_envs`` copies an update takes the mean loss over them (one copy by default, as the
paper).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from ajax.acting import EnvCursor, actor_step, episode_metrics
from ajax.agents.base import Agent, hyperparameter
from ajax.envs import Box, Env
from ajax.nn import MLP, MLPHead, TanhNormal
from ajax.updates import optimizer_step

REFERENCE = "gauthamvasan/avg avg.py"
#: The clip on the actor's log-variance head (the reference's ``log_std`` bounds).
LOG_VAR_MIN, LOG_VAR_MAX = -20.0, 2.0


@dataclass(frozen=True)
class AVGConfig:
    """AVG's hyperparameters."""

    actor_learning_rate: float = hyperparameter(
        0.0063, f"the actor's Adam step size; {REFERENCE}.", low=0.0, low_open=True, batchable=True
    )
    critic_learning_rate: float = hyperparameter(
        0.0087, f"the critic's Adam step size; {REFERENCE}.", low=0.0, low_open=True, batchable=True
    )
    adam_b1: float = hyperparameter(
        0.0, f"Adam's beta 1 (no momentum: a batch of one); {REFERENCE}.", low=0.0, high=1.0
    )
    adam_b2: float = hyperparameter(0.999, f"Adam's beta 2; {REFERENCE}.", low=0.0, high=1.0)
    alpha: float = hyperparameter(
        0.07, f"the entropy bonus's weight, fixed; {REFERENCE}.", low=0.0, batchable=True
    )
    gamma: float = hyperparameter(
        0.99, f"discount; {REFERENCE}.", low=0.0, high=1.0, batchable=True
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (256, 256), f"hidden layers of the actor and of the critic; {REFERENCE}."
    )
    normalize_observations: bool = hyperparameter(
        True, f"running observation standardisation; {REFERENCE}."
    )
    scale_td_error: bool = hyperparameter(
        True, "divide the TD error by sigma (the paper's appendix); off, sigma is 1."
    )


@struct.dataclass
class Welford:
    """Count, mean and sum of squared deviations of a scalar stream (Welford's update); the
    variance is the population one, 0 before any sample (the reference's RunningStats)."""

    n: jax.Array
    mean: jax.Array
    m2: jax.Array

    @classmethod
    def zeros(cls) -> Welford:
        return cls(*(jnp.zeros((), jnp.float32) for _ in range(3)))

    def add(self, x: jax.Array, where: jax.Array = True) -> Welford:
        """The statistics with ``x`` added, where ``where`` holds."""
        n = self.n + jnp.where(where, 1.0, 0.0)
        delta = x - self.mean
        mean = jnp.where(where, self.mean + delta / jnp.maximum(n, 1.0), self.mean)
        m2 = jnp.where(where, self.m2 + delta * (x - mean), self.m2)
        return Welford(n, mean, m2)

    @property
    def variance(self) -> jax.Array:
        return jnp.where(self.n > 0, self.m2 / jnp.maximum(self.n, 1.0), 0.0)


@struct.dataclass
class TDErrorScaler:
    """What ``sigma`` is computed from: statistics of the augmented reward, of the discount
    and of the squared return, and each copy's running sum of augmented rewards."""

    reward: Welford
    discount: Welford
    return_sq: Welford
    running_return: jax.Array

    @classmethod
    def zeros(cls, n_copies: int) -> TDErrorScaler:
        return cls(Welford.zeros(), Welford.zeros(), Welford.zeros(), jnp.zeros(n_copies))

    def update(self, reward: jax.Array, terminated: jax.Array, gamma: float) -> TDErrorScaler:
        """Add one step of every copy, in copy order: the augmented reward, the discount
        (``gamma``, 0 at termination) and, at termination, the episode's squared return."""

        def one_copy(stats, step):
            reward_stats, discount, return_sq = stats
            r, done, running = step
            running = running + r
            return_sq = return_sq.add(running**2, done)
            discount = discount.add(jnp.where(done, 0.0, gamma))
            return (reward_stats.add(r), discount, return_sq), jnp.where(done, 0.0, running)

        stats = (self.reward, self.discount, self.return_sq)
        (reward_stats, discount, return_sq), running = jax.lax.scan(
            one_copy, stats, (reward, terminated, self.running_return)
        )
        return TDErrorScaler(reward_stats, discount, return_sq, running)

    @property
    def sigma(self) -> jax.Array:
        variance = self.reward.variance + self.discount.variance * self.return_sq.mean
        variance = jnp.maximum(variance, 1e-4)
        unscaled = (variance <= 0.01) & (self.return_sq.n == 0)
        return jnp.where(unscaled, 1.0, jnp.sqrt(variance))


@struct.dataclass
class AVGState:
    params: dict[str, Any]
    opt_state: dict[str, Any]
    scaler: TDErrorScaler
    cursor: EnvCursor
    key: jax.Array


def _log_variance_head(out: jax.Array) -> TanhNormal:
    """The reference's policy: the second half of ``out`` is a log-variance in [-20, 2]."""
    mean, log_var = jnp.split(out, 2, axis=-1)
    return TanhNormal(mean, 0.5 * jnp.clip(log_var, LOG_VAR_MIN, LOG_VAR_MAX))


class AVG(Agent):
    """Action Value Gradient for continuous actions: one update per step, no buffer, no
    target networks."""

    Config = AVGConfig
    action_spaces = (Box,)
    example_env = "Pendulum-v1"
    default_n_envs = 1

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        c = self.config
        self._action_dim = int(math.prod(self.env.action_space.shape))
        network = dict(
            activation="leaky_relu", out_gain=1.0, hidden_gain=1.0, normalize_features=True
        )
        self.actor = MLPHead(
            MLP(c.hidden_sizes, 2 * self._action_dim, **network), _log_variance_head
        )
        self.critic = MLP(c.hidden_sizes, 1, **network)
        self._optimizers = {
            name: optax.adam(lr, b1=c.adam_b1, b2=c.adam_b2)
            for name, lr in (("actor", c.actor_learning_rate), ("critic", c.critic_learning_rate))
        }

    def policy(self, params: dict[str, Any], obs: jax.Array) -> TanhNormal:
        """The tanh-squashed Gaussian at ``obs``, in ``[-1, 1]``."""
        return self.actor.apply(params["actor"], self._flat(obs))

    def q_values(self, params: dict[str, Any], obs: jax.Array, action: jax.Array) -> jax.Array:
        """``Q(obs, action)``: ``[batch]``, the expected discounted return of ``action`` plus
        the entropy bonus of later steps, for actions in ``[-1, 1]``."""
        return self._q(params["critic"], obs, action)

    def value(self, params: dict[str, Any], obs: jax.Array) -> jax.Array:
        """``Q(obs, a)`` at the policy's deterministic action ``a``."""
        return self.q_values(params, obs, self.policy(params, obs).mode())

    def _q(self, critic_params: Any, obs: jax.Array, action: jax.Array) -> jax.Array:
        obs = self._flat(obs)
        action = action.reshape(*obs.shape[:-1], self._action_dim)
        return self.critic.apply(critic_params, jnp.concatenate([obs, action], -1))[..., 0]

    def init(self, key: jax.Array, env: Env, total_iterations: int) -> AVGState:
        def init_params(params_key, obs):
            actor_key, critic_key = jax.random.split(params_key)
            obs = self._flat(obs)
            action = jnp.zeros((obs.shape[0], self._action_dim))
            return {
                "actor": self.actor.init(actor_key, obs),
                "critic": self.critic.init(critic_key, jnp.concatenate([obs, action], -1)),
            }

        params, cursor, key = self._start(key, env, init_params)
        opt_state = {name: opt.init(params[name]) for name, opt in self._optimizers.items()}
        return AVGState(params, opt_state, TDErrorScaler.zeros(self.n_envs), cursor, key)

    def iteration(self, state: AVGState, env: Env) -> tuple[AVGState, dict[str, jax.Array]]:
        c = self.config
        key, act_key, step_key, next_key = jax.random.split(state.key, 4)
        params = state.params

        def executed(actor_params, obs):
            """The reparameterised sample acted on, and its log-probability: the same draw
            at acting time and in the actor's loss."""
            return self.policy({"actor": actor_params}, obs).sample_and_log_prob(act_key)

        def behaviour(params, obs, carry, _):
            return self._env_action(executed(params["actor"], obs)[0], obs), carry, ()

        cursor, step, _ = actor_step(env, behaviour, params, state.cursor, step_key)

        def actor_loss(actor_params):
            action, log_prob = executed(actor_params, step.obs)
            q = self._q(params["critic"], step.obs, action)
            return (c.alpha * log_prob - q).mean(), log_prob

        (policy_loss, log_prob), actor_grads = jax.value_and_grad(actor_loss, has_aux=True)(
            params["actor"]
        )
        # The scaler takes this step in before sigma is read, as in the reference.
        augmented = step.reward - c.alpha * jax.lax.stop_gradient(log_prob)
        scaler = state.scaler.update(augmented, step.terminated, c.gamma)
        sigma = scaler.sigma if c.scale_td_error else jnp.float32(1.0)
        next_action, next_log_prob = self.policy(params, step.next_obs).sample_and_log_prob(
            next_key
        )
        next_value = self._q(params["critic"], step.next_obs, next_action)
        next_value = next_value - c.alpha * next_log_prob
        target = step.reward + c.gamma * (1.0 - step.terminated.astype(jnp.float32)) * next_value
        target = jax.lax.stop_gradient(target)

        def critic_loss(critic_params):
            q = self._q(critic_params, step.obs, step.action)
            return (((target - q) / sigma) ** 2).mean(), q.mean()

        (value_loss, q), critic_grads = jax.value_and_grad(critic_loss, has_aux=True)(
            params["critic"]
        )
        new_params, opt_state = {}, {}
        for name, grads in (("actor", actor_grads), ("critic", critic_grads)):
            new_params[name], opt_state[name] = optimizer_step(
                self._optimizers[name], grads, state.opt_state[name], params[name]
            )
        state = AVGState(new_params, opt_state, scaler, cursor, key)
        metrics = {
            "actor_loss": policy_loss,
            "critic_loss": value_loss,
            "q_value": q,
            "sigma": sigma,
            "entropy": -log_prob.mean(),
        }
        return state, metrics | episode_metrics(step)
