"""What the Q-learning agents (DQN, PQN) share: a Q-network over discrete actions and an
epsilon-greedy policy."""

from __future__ import annotations

from typing import Any

import jax

from ajax.acting import PolicyFn
from ajax.agents.base import Agent
from ajax.envs import Discrete
from ajax.nn import MLP, EpsilonGreedy


class QLearningAgent(Agent):
    """An agent acting greedily (in evaluation) or epsilon-greedily on ``Q(obs, .)``.

    Subclasses build ``self.network`` with :meth:`_build_network` and define
    ``config.final_epsilon``, the exploration kept when acting stochastically.
    """

    action_spaces = (Discrete,)

    def _build_network(self, dueling: bool = False, **mlp_options: Any) -> None:
        """The Q-network; with ``dueling`` its last layer has one more unit, the state value
        (Wang et al. 2016, "Dueling Network Architectures for Deep Reinforcement Learning")."""
        c = self.config
        self._dueling = dueling
        n_out = self.env.action_space.n + int(dueling)
        self.network = MLP(c.hidden_sizes, n_out, c.activation, **mlp_options)

    def q_values(self, params: Any, obs: jax.Array) -> jax.Array:
        """Q(obs, a) for every action a: [..., actions]."""
        out = self.network.apply(params, self._flat(obs))
        if not self._dueling:
            return out
        # The paper's equation 9: the advantages are centred on their mean, which pins down
        # the split between value and advantage.
        value, advantage = out[..., :1], out[..., 1:]
        return value + advantage - advantage.mean(-1, keepdims=True)

    def policy(self, params: Any, obs: jax.Array) -> EpsilonGreedy:
        """Epsilon-greedy on ``Q(obs, .)`` with the exploration kept at the end of training
        (``final_epsilon``); its mode is the greedy action."""
        return EpsilonGreedy(self.q_values(params, obs), self.config.final_epsilon)

    def _explorer(self, epsilon: jax.Array) -> PolicyFn:
        """The policy function that collects with ``epsilon``-greedy actions."""

        def policy_fn(params, obs, carry, key):
            return EpsilonGreedy(self.q_values(params, obs), epsilon).sample(key), carry, ()

        return policy_fn

    def value(self, params: Any, obs: jax.Array) -> jax.Array:
        """``max_a Q(obs, a)``: the discounted return of the greedy policy, as estimated."""
        return self.q_values(params, obs).max(-1)

    def _init_network(self, key: jax.Array, obs: jax.Array) -> Any:
        return self.network.init(key, self._flat(obs))
