"""What every replay agent (DQN; SAC, TD3 and REDQ) is configured by: the replay memory, the
warm-up before learning, the minibatches, the updates per iteration, the discount and the
target networks' rate, and the networks' shape.

Each field is declared once here, with its valid range; an agent states its own defaults and
their sources with :func:`ajax.agents.base.override`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ajax.agents.base import hyperparameter


@dataclass(frozen=True)
class ReplayConfig:
    """Hyperparameters every replay agent has. Defaults are SAC's (Haarnoja et al. 2018b,
    "Soft Actor-Critic Algorithms and Applications", table 1) unless an agent says otherwise."""

    learning_rate: float = hyperparameter(
        3e-4, "Adam step size of every network; SAC paper.", low=0.0, low_open=True
    )
    buffer_size: int = hyperparameter(
        1_000_000, "replay capacity in transitions per seed; SAC paper.", low=1
    )
    learning_starts: int = hyperparameter(
        10_000,
        "steps of uniform random actions before updates begin; Ajax's performance page.",
        low=0,
    )
    batch_size: int = hyperparameter(256, "minibatch size; SAC paper.", low=1)
    gamma: float = hyperparameter(0.99, "discount; SAC paper.", low=0.0, high=1.0)
    tau: float = hyperparameter(
        0.005, "Polyak rate of the target networks; SAC paper.", low=0.0, high=1.0, low_open=True
    )
    gradient_steps: int = hyperparameter(
        1, "updates per iteration; SAC paper (one per environment step).", low=1
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (256, 256), "hidden layers of the actor and of each critic; SAC paper."
    )
    activation: str = hyperparameter("relu", "hidden activation; SAC paper.")
