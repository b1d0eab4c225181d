"""Initial states for tests that call an agent's parts directly."""

from __future__ import annotations

import jax


def initial_state(agent, n_copies: int | None = None, n_iterations: int = 1, seed: int = 0):
    """One seed's initial state on ``n_copies`` environment copies (the agent's own count by
    default), and the copies. ``agent.init`` runs as one compiled program: run op by op, it
    compiles every operation on its own, which takes seconds for one agent."""
    env = agent.env_copies(agent.n_envs if n_copies is None else n_copies)
    state = jax.jit(lambda key: agent.init(key, env, n_iterations))(jax.random.key(seed))
    return state, env
