"""Average-reward Policy Optimization (Ma et al. 2021, "Average-Reward Reinforcement Learning
with Trust Region Methods", IJCAI 2021, arXiv:2106.03442).

PPO's clipped objective on the average-reward criterion: the advantages are differential,
measured against the reward rate rho rather than discounted away. After each rollout the
reward rate rho and the value offset b move toward the rollout's mean reward and mean value
with step ``reward_rate_step`` (alpha), starting from the first rollout's means:

    delta_t = r_t - rho + gamma (1 - terminated_t) V(s'_t) - V(s_t)

accumulated GAE-style with ``gae_lambda`` and cut at episode ends (a truncated episode
bootstraps from its true final observation). ``gamma = 1`` is the average-reward criterion
itself. The critic regresses onto ``A_t + V(s_t) - nu b``: subtracting the offset keeps the
differential values, defined only up to a constant, from drifting (``value_offset_coef`` nu).

Defaults are the authors' MuJoCo configuration (xtma/apo,
``apo/experiments/configs/mujoco/apg/mujoco_appo.py`` and ``apo/algos/apg/appo.py``): 10
copies x 200 steps per rollout, 10 epochs of 20 minibatches, Adam at 3e-4 without decay,
no advantage normalisation, an unclipped value loss weighted 1, a gradient-norm clip of 10,
alpha 0.1, nu 1, and separate 64x64 tanh networks. Their sweep (``run_exp.py``) runs with
gamma 1, which is the default here. One deviation: their Gaussian policy squashes its mean
with tanh; Ajax's PPO policy does not, and actions are clipped to ``[-1, 1]`` by the action
map as for PPO.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from ajax.acting import Transition
from ajax.agents.base import hyperparameter, override
from ajax.agents.on_policy import OnPolicyState
from ajax.agents.ppo import PPO, PPOConfig

SOURCE = "xtma/apo MuJoCo config"


@dataclass(frozen=True)
class APOConfig(PPOConfig):
    """APO's hyperparameters: PPO's, with the authors' defaults, and the reward-rate step and
    value-offset weight."""

    learning_rate: float = override(3e-4, f"Adam step size; {SOURCE}.")
    anneal_lr: bool = override(False, f"decay the step size linearly to 0; {SOURCE}: off.")
    n_steps: int = override(200, f"steps per copy per iteration; {SOURCE} batch_T.")
    n_epochs: int = override(10, f"passes over each rollout; {SOURCE}.")
    n_minibatches: int = override(20, f"minibatches per epoch; {SOURCE}.")
    gamma: float = override(
        1.0,
        "discount in the differential TD error; 1 is the average-reward criterion, as "
        "in the authors' runs (xtma/apo run_exp.py).",
    )
    gae_lambda: float = override(0.95, f"GAE lambda; {SOURCE}.")
    clip_coef: float = override(0.2, f"ratio clip epsilon; {SOURCE} ratio_clip.")
    clip_value_loss: bool = override(False, f"clip the value update; {SOURCE}: off.")
    ent_coef: float = override(0.01, f"entropy bonus weight; {SOURCE}.")
    vf_coef: float = override(1.0, f"value-loss weight; {SOURCE} value_loss_coeff.")
    max_grad_norm: float = override(10.0, f"global gradient-norm clip; {SOURCE}.")
    normalize_advantages: bool = override(
        False, f"standardise advantages per minibatch; {SOURCE}: off."
    )
    hidden_sizes: tuple[int, ...] = override((64, 64), f"actor and critic layers; {SOURCE}.")
    activation: str = override("tanh", f"hidden activation; {SOURCE}.")
    reward_rate_step: float = hyperparameter(
        0.1,
        f"alpha: step of the reward rate's and value offset's moving averages; {SOURCE} lr_eta.",
        low=0.0,
        high=1.0,
        low_open=True,
    )
    value_offset_coef: float = hyperparameter(
        1.0,
        f"nu: weight of the value offset subtracted from the critic's target; {SOURCE} "
        "rm_vbias_coeff.",
        low=0.0,
    )


class APO(PPO):
    """Average-reward Policy Optimization for discrete and continuous actions."""

    Config = APOConfig
    default_n_envs = 10

    def _initial_stats(self) -> dict[str, jax.Array]:
        return {"reward_rate": jnp.zeros(()), "value_offset": jnp.zeros(())}

    def _advantages(
        self, state: OnPolicyState, steps: Transition, values: jax.Array, next_values: jax.Array
    ) -> tuple[OnPolicyState, jax.Array, jax.Array, dict[str, Any]]:
        """Differential GAE against the reward rate, once the rate and the offset have taken
        in this rollout (the reference updates them before the advantages)."""
        c = self.config
        step = jnp.where(state.iteration == 0, 1.0, c.reward_rate_step)
        stats = {
            name: (1.0 - step) * state.stats[name] + step * mean
            for name, mean in (
                ("reward_rate", steps.reward.mean()),
                ("value_offset", values.mean()),
            )
        }
        rewards = steps.reward - stats["reward_rate"]
        advantages, targets = self._gae(steps, rewards, values, next_values)
        targets = targets - c.value_offset_coef * stats["value_offset"]
        return state.replace(stats=stats), advantages, targets, stats
