"""Probe environments: tiny tasks, each isolating one thing an agent must get right (after
Andy Jones's "Debugging RL, Without the Agonizing Pain"). Episodes are one or two steps, so a
correct agent solves each within a few thousand steps and a broken one visibly does not."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ajax.envs import Box, Discrete, Env


class _Probe(Env):
    """``continuous=True`` gives the probe a one-dimensional action in ``[-1, 1]`` (for SAC,
    TD3 and REDQ); the first three probes ignore the action either way."""

    observation_space = Box(-np.ones(1), np.ones(1), (1,))
    max_episode_steps = 10
    #: Whether an episode still going at ``max_episode_steps`` is cut there (truncated, which
    #: bootstraps); the probes' episodes otherwise end only by terminating, or never.
    truncates = False

    def __init__(self, continuous: bool = False):
        self.continuous = continuous
        self.action_space = Box(-np.ones(1), np.ones(1), (1,)) if continuous else Discrete(2)

    def reset(self, key):
        obs = self._first_obs(key)
        return (obs, jnp.asarray(0)), obs

    def _first_obs(self, key):
        # Not zero: a ReLU network with zero biases is dead on an all-zero input.
        return jnp.ones(1)

    def step(self, key, state, action):
        obs, t = state
        reward, terminated, next_obs = self._transition(obs, t, action)
        state = (next_obs, t + 1)
        cut = (t + 1 >= self.max_episode_steps) & ~terminated
        truncated = cut if self.truncates else jnp.asarray(False)
        return state, next_obs, jnp.float32(reward), terminated, truncated, {}


class ConstantReward(_Probe):
    """One step, reward +1: the value of the only state is 1."""

    def _transition(self, obs, t, action):
        return 1.0, jnp.asarray(True), obs


class ObservationReward(_Probe):
    """One step from obs +1 or -1, reward equal to obs: the value must read the observation."""

    def _first_obs(self, key):
        return jnp.where(jax.random.bernoulli(key), 1.0, -1.0)[None]

    def _transition(self, obs, t, action):
        return obs[0], jnp.asarray(True), obs


class FarObservationReward(ObservationReward):
    """:class:`ObservationReward` seen as ``1000 + 100 obs``, as an altitude in metres is:
    an agent must standardise the observation before its networks can read the sign."""

    observation_space = Box(np.full(1, 900.0), np.full(1, 1100.0), (1,))

    def reset(self, key):
        state, obs = super().reset(key)
        return state, 1000.0 + 100.0 * obs

    def step(self, key, state, action):
        state, obs, *rest = super().step(key, state, action)
        return state, 1000.0 + 100.0 * obs, *rest


class TwoStep(_Probe):
    """Obs 1 then obs -1, reward +1 only at the end of the second step: V(1) = gamma,
    V(-1) = 1. Tests discounting and credit assignment across a step."""

    def _transition(self, obs, t, action):
        last = t >= 1
        return jnp.where(last, 1.0, 0.0), last, -jnp.ones(1)


class ActionReward(_Probe):
    """One step; action 1 earns +1 and action 0 earns -1: the policy must pick action 1.
    With continuous actions the reward is ``1 - 4 (a - 0.5)^2``: best at a = 0.5, inside the
    bounds, so a policy pinned at a bound fails."""

    def _transition(self, obs, t, action):
        if self.continuous:
            reward = 1.0 - 4.0 * (action[0] - 0.5) ** 2
        else:
            reward = jnp.where(action == 1, 1.0, -1.0)
        return reward, jnp.asarray(True), obs


class ContinuingReward(_Probe):
    """Reward +1 on every step, never terminating nor truncated: one endless episode, a
    continuing task whose reward rate is 1."""

    def _transition(self, obs, t, action):
        return 1.0, jnp.asarray(False), obs


class FallOrGoOn(_Probe):
    """Reward +1 on every step; an action above 0 ends the episode (a fall), any other goes
    on, truncated after ``max_episode_steps``. Both pay the same rate, so only a cost of
    falling, or a discount, teaches the policy to keep its action below 0."""

    truncates = True

    def __init__(self):
        super().__init__(continuous=True)

    def _transition(self, obs, t, action):
        return 1.0, action[0] > 0.0, obs


class RewardIsAction(_Probe):
    """One step; the reward is the (continuous) action itself: the best action is the upper
    bound, 1, so a policy must push its action all the way up."""

    def __init__(self):
        super().__init__(continuous=True)

    def _transition(self, obs, t, action):
        return action[0], jnp.asarray(True), obs


class ContinuingOrRewardIsAction(_Probe):
    """Two probes in one task, told apart by the observation, so that one run serves both:
    from +1 one step whose reward is the action (:class:`RewardIsAction`); from -1 reward +1
    on every step, never terminating (:class:`ContinuingReward`), but truncated after
    ``max_episode_steps``, which bootstraps. An episode starts at +1 with probability 0.8,
    which puts about half the steps at each."""

    max_episode_steps = 4
    truncates = True

    def __init__(self):
        super().__init__(continuous=True)

    def _first_obs(self, key):
        return jnp.where(jax.random.bernoulli(key, 0.8), 1.0, -1.0)[None]

    def _transition(self, obs, t, action):
        rewarded_action = obs[0] > 0
        return jnp.where(rewarded_action, action[0], 1.0), rewarded_action, obs


class ZeroObservationActionReward(ActionReward):
    """:class:`ActionReward` seen through an all-zero observation: a network with zero
    biases has all-zero features at first, so only its output layer's biases can learn the
    action until the hidden biases move."""

    def _first_obs(self, key):
        return jnp.zeros(1)
