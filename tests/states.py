"""Initial states for tests that call an agent's parts directly."""

from __future__ import annotations

import jax

from ajax._xla import compiler_options

#: Every agent on a task of its kind (Pendulum for the continuous ones: its gymnax reset
#: builds a leaf from a Python number), with small settings that keep its programs quick to
#: compile; the programs have the same structure at any size.
SMALL = {
    "PPO": ("CartPole-v1", {"n_steps": 16}),
    "PQN": ("CartPole-v1", {"n_steps": 16}),
    "DQN": ("CartPole-v1", {"buffer_size": 1_000, "train_frequency": 16, "gradient_steps": 2}),
    "SAC": ("Pendulum-v1", {"buffer_size": 1_000, "hidden_sizes": (16, 16)}),
    "TD3": ("Pendulum-v1", {"buffer_size": 1_000, "hidden_sizes": (16, 16)}),
    "REDQ": ("Pendulum-v1", {"buffer_size": 1_000, "hidden_sizes": (16, 16)}),
    "APO": ("Pendulum-v1", {"n_steps": 16, "n_minibatches": 2}),
    "APG": ("ajax/PendulumTracking-v0", {"horizon": 4}),
    "ASAC": ("Pendulum-v1", {"buffer_size": 1_000, "hidden_sizes": (16, 16)}),
    "AVG": ("Pendulum-v1", {"hidden_sizes": (16, 16)}),
    "UDRL": ("CartPole-v1", {"n_steps": 4, "n_updates": 2, "store_size": 8, "last_few": 4}),
    "TDMPC2": (
        "Pendulum-v1",
        {"size": "tiny", "buffer_size": 1_000, "batch_size": 8, "learning_starts": 16},
    ),
    "DreamerV3": (
        "CartPole-v1",
        {
            "size": "debug",
            "batch_size": 8,
            "batch_length": 10,
            "train_ratio": 20.0,
            "learning_starts": 160,
            "buffer_size": 1_000,
        },
    ),
}


def initial_state(agent, n_copies: int | None = None, n_iterations: int = 1, seed: int = 0):
    """One seed's initial state on ``n_copies`` environment copies (the agent's own count by
    default), and the copies. ``agent.init`` runs as one program, compiled with the options
    ``train`` compiles it with (at O0: it runs once); run op by op, it compiles every
    operation on its own, which takes seconds for one agent."""
    env = agent.env_copies(agent.n_envs if n_copies is None else n_copies)
    key = jax.random.key(seed)
    init = jax.jit(lambda key: agent.init(key, env, n_iterations)).lower(key)
    return init.compile(compiler_options(agent, runs_once=True))(key), env
