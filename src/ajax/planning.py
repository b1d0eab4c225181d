"""Model-predictive path integral planning (MPPI), as TD-MPC2 plans in its latent space
(Hansen et al. 2024, section 3.3; after Williams et al. 2015): sequences of continuous actions
in ``[-1, 1]`` are sampled around a Gaussian, scored by a value function of the whole
sequence, and the Gaussian is refitted to the best of them, weighted by their scores.

Pure JAX and fixed shapes, so that a planning step compiles into an agent's acting program;
the plan (the Gaussian's mean) is the acting carry that warm-starts the next step's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp


@dataclass(frozen=True)
class MPPI:
    """The planner's settings; the defaults are TD-MPC2's (its reference's ``config.yaml``)."""

    horizon: int = 3
    #: Action sequences scored per iteration, the policy prior's among them.
    samples: int = 512
    #: Of those, sequences proposed by the policy prior rather than the Gaussian.
    policy_samples: int = 24
    #: The best sequences the Gaussian is refitted to.
    elites: int = 64
    iterations: int = 6
    #: The inverse temperature of the elites' weights, ``exp(temperature * (value - best))``.
    temperature: float = 0.5
    min_std: float = 0.05
    max_std: float = 2.0

    def __post_init__(self) -> None:
        if not 0 <= self.policy_samples < self.samples or not 0 < self.elites <= self.samples:
            raise ValueError(
                f"MPPI needs 0 <= policy_samples < samples and 0 < elites <= samples; got "
                f"samples={self.samples}, policy_samples={self.policy_samples}, "
                f"elites={self.elites}."
            )

    def plan(
        self,
        value_of: Callable[[jax.Array, jax.Array], jax.Array],
        mean: jax.Array,
        policy_actions: jax.Array,
        key: jax.Array,
        deterministic: bool = False,
    ) -> tuple[jax.Array, jax.Array]:
        """The first action to take, and the refitted mean (the next step's warm start, after
        :func:`shifted`).

        ``value_of(actions [samples, horizon, A], key) -> [samples]`` scores sequences, with
        a fresh key at each refit (for a stochastic value such as TD-MPC2's);
        ``mean [horizon, A]`` is where the Gaussian starts; ``policy_actions [policy_samples,
        horizon, A]`` are the policy prior's proposals. The action is that of an elite drawn
        by weight, plus the Gaussian's first-step noise unless ``deterministic``."""
        std = jnp.full_like(mean, self.max_std)
        n = self.samples - self.policy_samples
        keys = jax.random.split(key, self.iterations + 2)

        def refit(carry, iteration_key):
            mean, std, _, _ = carry
            noise_key, value_key = jax.random.split(iteration_key)
            noise = jax.random.normal(noise_key, (n, *mean.shape))
            actions = jnp.concatenate(
                [policy_actions, jnp.clip(mean + std * noise, -1.0, 1.0)], axis=0
            )
            value = jnp.nan_to_num(value_of(actions, value_key))
            elite_value, elite = jax.lax.top_k(value, self.elites)
            elite_actions = actions[elite]
            score = jnp.exp(self.temperature * (elite_value - elite_value.max()))
            score = score / score.sum()
            mean = jnp.einsum("e,eha->ha", score, elite_actions)
            spread = jnp.einsum("e,eha->ha", score, (elite_actions - mean) ** 2)
            std = jnp.clip(jnp.sqrt(spread), self.min_std, self.max_std)
            return (mean, std, score, elite_actions), None

        start = (mean, std, jnp.zeros(self.elites), jnp.zeros((self.elites, *mean.shape)))
        # Unrolled: a few refits of small products, where a loop's carry copies and
        # condition cost more than the straight code's compile.
        (mean, std, score, elite_actions), _ = jax.lax.scan(refit, start, keys[:-2], unroll=True)
        chosen = jax.random.categorical(keys[-2], jnp.log(score))
        action = elite_actions[chosen, 0]
        if not deterministic:
            action = action + std[0] * jax.random.normal(keys[-1], action.shape)
        return jnp.clip(action, -1.0, 1.0), mean


def shifted(mean: jax.Array, episode_start: jax.Array) -> jax.Array:
    """The warm start of the next step's plan from this step's ``mean [horizon, A]``: one
    step on, the last step zero; all zeros at an episode's start."""
    moved = jnp.concatenate([mean[1:], jnp.zeros_like(mean[:1])], axis=0)
    return jnp.where(episode_start, jnp.zeros_like(mean), moved)
