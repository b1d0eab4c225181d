"""The action distributions the agents need, as small pure pytrees.

Every agent's ``policy(params, obs)`` returns one of these, and every one has ``sample(key)``
(the behaviour policy's action) and ``mode()`` (the deterministic action of evaluation)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class Categorical:
    """A categorical distribution over the last axis of ``logits``."""

    logits: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.categorical(key, self.logits)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1)

    def log_prob(self, action: jax.Array) -> jax.Array:
        log_p = jax.nn.log_softmax(self.logits)
        return jnp.take_along_axis(log_p, action[..., None].astype(jnp.int32), -1)[..., 0]

    def entropy(self) -> jax.Array:
        log_p = jax.nn.log_softmax(self.logits)
        return -jnp.sum(jnp.exp(log_p) * log_p, axis=-1)


@struct.dataclass
class Normal:
    """A diagonal Gaussian; log-probabilities and entropies sum over the last axis."""

    mean: jax.Array
    log_std: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        return self.mean + jnp.exp(self.log_std) * jax.random.normal(key, self.mean.shape)

    def mode(self) -> jax.Array:
        return self.mean

    def log_prob(self, action: jax.Array) -> jax.Array:
        z = (action - self.mean) * jnp.exp(-self.log_std)
        return jnp.sum(-0.5 * z**2 - self.log_std - 0.5 * math.log(2 * math.pi), axis=-1)

    def entropy(self) -> jax.Array:
        return jnp.sum(self.log_std + 0.5 * math.log(2 * math.pi * math.e), axis=-1)


@struct.dataclass
class TanhNormal:
    """A diagonal Gaussian squashed by ``tanh`` into ``(-1, 1)``: SAC's policy (Haarnoja et al.
    2018, appendix C). Log-probabilities include the change-of-variables term."""

    mean: jax.Array
    log_std: jax.Array

    def sample_and_log_prob(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """A reparameterised sample and its log-probability, summed over the last axis."""
        gaussian = Normal(self.mean, self.log_std)
        pre_tanh = gaussian.sample(key)
        # log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)), stable for large |u|.
        log_det = 2.0 * (math.log(2.0) - pre_tanh - jax.nn.softplus(-2.0 * pre_tanh))
        return jnp.tanh(pre_tanh), gaussian.log_prob(pre_tanh) - log_det.sum(-1)

    def sample(self, key: jax.Array) -> jax.Array:
        return self.sample_and_log_prob(key)[0]

    def mode(self) -> jax.Array:
        return jnp.tanh(self.mean)


@struct.dataclass
class NoisyDeterministic:
    """A deterministic action in ``[-1, 1]`` explored with Gaussian noise of std ``noise_std``,
    clipped back into ``[-1, 1]``: TD3's behaviour policy (Fujimoto et al. 2018, section 6)."""

    action: jax.Array
    noise_std: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        noise = self.noise_std * jax.random.normal(key, self.action.shape)
        return jnp.clip(self.action + noise, -1.0, 1.0)

    def mode(self) -> jax.Array:
        return self.action


@struct.dataclass
class EpsilonGreedy:
    """The greedy action of ``q_values`` [..., actions], replaced with probability ``epsilon``
    by a uniformly random one (Mnih et al. 2015)."""

    q_values: jax.Array
    epsilon: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        explore_key, action_key = jax.random.split(key)
        greedy = self.mode()
        random = jax.random.randint(action_key, greedy.shape, 0, self.q_values.shape[-1])
        explore = jax.random.uniform(explore_key, greedy.shape) < self.epsilon
        return jnp.where(explore, random, greedy).astype(jnp.int32)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.q_values, axis=-1).astype(jnp.int32)

    def probs(self) -> jax.Array:
        """Each action's probability: epsilon spread evenly, the rest on the greedy action."""
        n = self.q_values.shape[-1]
        greedy = jax.nn.one_hot(self.mode(), n)
        epsilon = jnp.asarray(self.epsilon)[..., None]
        return epsilon / n + (1.0 - epsilon) * greedy

    def log_prob(self, action: jax.Array) -> jax.Array:
        p = jnp.take_along_axis(self.probs(), action[..., None].astype(jnp.int32), -1)[..., 0]
        return jnp.log(p)
