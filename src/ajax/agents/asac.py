"""Average-reward Soft Actor-Critic (Adamczyk et al. 2025; reference code BobMak/asac,
``darer/ASAC.py``).

SAC for the average-reward criterion: instead of a discounted return, the critics learn
differential soft values, the reward's excess over its long-run rate. Each critic update
regresses onto

    y = r - theta + (1 - terminated) [min_j Q'_j(s', a') - alpha log pi(a'|s')] - b

with ``a'`` drawn from the current policy and no discount. ``theta`` estimates the
entropy-regularised reward rate: after each target it moves at rate ``reward_rate_step``
toward the batch's mean of ``r - alpha log pi(a|s)``, with ``a`` fresh actions of the policy
at the batch's states (an exponential average, as the reference; the target uses the rate
from before the move). Differential values are defined only up to a constant, which nothing
in the target pins down, so they can drift together without bound; ``b``, the target
critics' mean value at a fixed reference input (the zero observation and the zero action, as
the reference), anchors them. As in the reference, ``theta`` and ``b`` are subtracted in both
branches, and a terminated step's target takes minus a reset cost in place of the bootstrap:
``termination_penalty`` (20) times the non-terminal steps' mean reward, averaged over batches
at the reward rate's step. Without it, on a task that pays the same reward on every step (an
inverted pendulum's), a fall and its reset pay the same rate as balancing, and nothing
teaches the agent to avoid one. The reference subtracts it in every MuJoCo setting
(``use_dones``); what its comment describes is computed here, where its code multiplies the
reward of the batch's first or second transition (``th.gather`` on the done flags picks
that index).

The actor is SAC's: ``alpha log pi(a|s) - min_j Q_j(s, a)``. The temperature is fixed (the
reference's ``beta``, alpha = 1/beta; it tunes it only with ``beta='auto'``, which none of its
settings use). Defaults are the reference's ``hparams/InvertedPendulum-v5/asac.yaml`` (its
classic-control-like task; it has no Pendulum-v1 settings): critic Adam at 5e-4, actor at
1e-4, beta 5, gradient norms clipped at 10, batches of 256, tau 0.005, reward-rate step
0.005, two critics of 256x256. ``learning_starts`` is the performance page's 10,000 (the
reference's other MuJoCo files; its InvertedPendulum file starts at once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax

from ajax._xla import tuned_optimizer
from ajax.agents.base import hyperparameter, override
from ajax.agents.off_policy import Learner
from ajax.agents.sac import SAC, SACConfig

REFERENCE = "BobMak/asac hparams/InvertedPendulum-v5/asac.yaml"


@dataclass(frozen=True)
class ASACConfig(SACConfig):
    """ASAC's hyperparameters."""

    learning_rate: float = override(5e-4, f"the critics' Adam step size; {REFERENCE}.")
    actor_learning_rate: float = hyperparameter(
        1e-4, f"the actor's Adam step size; {REFERENCE}.", low=0.0, low_open=True
    )
    gamma: float = override(
        1.0,
        "factor on the differential bootstrap; 1 (none), the average-reward criterion and the "
        "reference. Below 1 it mixes discounting back in.",
    )
    initial_alpha: float = override(0.2, f"the temperature, 1/beta with beta 5; {REFERENCE}.")
    autotune_alpha: bool = override(
        False, "tune the temperature (SAC's rule); the reference fixes it in every setting."
    )
    reward_rate_step: float = hyperparameter(
        0.005,
        f"rate at which theta follows the batch's entropy-regularised reward; {REFERENCE} "
        "tau_theta.",
        low=0.0,
        high=1.0,
        low_open=True,
    )
    anchor: bool = hyperparameter(
        True,
        "subtract the target critics' value at the zero observation and action, which pins "
        "the differential values' free constant; the reference. Off, the values drift.",
    )
    max_grad_norm: float = hyperparameter(
        10.0, f"global gradient-norm clip of the actor and of the critics; {REFERENCE}.", low=0.0
    )
    termination_penalty: float = hyperparameter(
        20.0,
        "a terminated step's target takes minus this many times the running mean reward of "
        "non-terminal steps in place of the bootstrap (a cost of resetting, without which the "
        "reward rate cannot tell a fall from going on); the reference's use_dones, in every "
        "MuJoCo setting. 0: none.",
        low=0.0,
    )


class ASAC(SAC):
    """Average-reward Soft Actor-Critic for continuous actions."""

    Config = ASACConfig

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        c = self.config
        clip = optax.clip_by_global_norm(c.max_grad_norm)
        self._optimizers = {
            name: tuned_optimizer(self, optax.chain(clip, optax.adam(lr)))
            for name, lr in (("actor", c.actor_learning_rate), ("critic", c.learning_rate))
        }

    def q_values(self, params: dict[str, Any], obs: jax.Array, action: jax.Array) -> jax.Array:
        """``Q(obs, action)`` of every critic: ``[n_critics, ...]``, the differential soft value
        (the reward's and the entropy bonus's excess over ``theta``, summed over the future),
        for actions in ``[-1, 1]``."""
        return super().q_values(params, obs, action)

    def reward_rate(self, params: dict[str, Any]) -> jax.Array:
        """``theta``: the estimated long-run rate of ``r - alpha log pi``."""
        return params["reward_rate"]

    def _optimizer(self, name: str) -> optax.GradientTransformation:
        return self._optimizers.get(name, self._adam)

    def _init_actor(self, key, obs):
        zero = jnp.zeros((), jnp.float32)
        return super()._init_actor(key, obs) | {"reward_rate": zero, "reset_cost": zero}

    def _anchor(self, learner: Learner) -> jax.Array:
        """``b``: the target critics' mean value at the zero observation and action."""
        obs = jnp.zeros((1, *self.env.observation_space.shape), jnp.float32)
        action = jnp.zeros((1, self._action_dim), jnp.float32)
        return self._q(learner.target_params["critic"], obs, action).mean()

    def _target(self, learner: Learner, batch: dict[str, jax.Array], key: jax.Array):
        c = self.config
        next_key, rate_key = jax.random.split(key)
        next_value = self._next_value(learner, batch["next_obs"], next_key)
        rate = learner.params["reward_rate"]
        anchor = self._anchor(learner) if c.anchor else 0.0
        terminated = batch["terminated"].astype(jnp.float32)
        # The reset cost follows the non-terminal rewards at the reward rate's step, and is
        # moved before its use, as the reference's.
        alive = 1.0 - terminated
        alive_reward = jnp.sum(alive * batch["reward"]) / jnp.maximum(jnp.sum(alive), 1.0)
        cost = self._follow(learner.params["reset_cost"], c.termination_penalty * alive_reward)
        bootstrap = c.gamma * (alive * next_value - terminated * cost)
        target = batch["reward"] - rate + bootstrap - anchor
        _, log_prob = self.policy(learner.params, batch["obs"]).sample_and_log_prob(rate_key)
        alpha = jnp.exp(learner.params["log_alpha"])
        rate = self._follow(rate, jnp.mean(batch["reward"] - alpha * log_prob))
        kept = {"reward_rate": rate, "reset_cost": cost}
        return target, learner.replace(params=learner.params | kept)

    def _follow(self, average: jax.Array, observed: jax.Array) -> jax.Array:
        """An exponential average moved toward ``observed`` by ``reward_rate_step``."""
        step = self.config.reward_rate_step
        return (1.0 - step) * average + step * observed

    def _after_actor(self, learner: Learner, aux):
        learner, metrics = super()._after_actor(learner, aux)
        return learner, metrics | {"reward_rate": learner.params["reward_rate"]}
