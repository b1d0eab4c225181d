"""The end-to-end matrix's cells: one environment of each family and the cheapest agent for
each action space it offers, with tiny budgets.

Run as ``python -m tests.families CELL RESULT_DIR OUT`` it is the fresh process of the
matrix: it loads the result saved in ``RESULT_DIR`` (with the cell's environment object
where the run was not on a registered id) and writes to ``OUT``, as JSON, its actions for
:func:`probe_obs` and its evaluation returns.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: Seeds per run: three over two devices, so that one place is padded.
SEEDS = [0, 1, 2]
#: Two segments of 64 steps: a checkpoint after each, and a resume from the first.
N_TIMESTEPS, LOG_FREQUENCY, NUM_EPISODE_TEST = 128, 64, 2
#: The agent's settings, the same from Python and from the command line.
PPO_SETTINGS = {"n_envs": 2, "n_steps": 16, "n_minibatches": 2, "hidden_sizes": (16, 16)}


@dataclass(frozen=True)
class Cell:
    """One family and action space: ``env_id`` names a registered environment (with
    ``env_params``), or ``own`` a gymnax environment passed as an object."""

    name: str
    env_id: str | None = None
    env_params: dict[str, Any] = field(default_factory=dict)
    own: str | None = None

    def env(self) -> Any:
        """What the agent's ``env_id`` is given: the id, or the environment object."""
        if self.own is None:
            return self.env_id
        import gymnax

        from ajax.envs import from_gymnax

        return from_gymnax(*gymnax.make(self.own), env_id=f"my-{self.own}")

    def agent(self) -> Any:
        from ajax import PPO

        return PPO(env_id=self.env(), env_params=self.env_params or None, **PPO_SETTINGS)

    def cli_args(self) -> list[str]:
        """``ajax train`` arguments for the run :meth:`agent` trains."""
        args = ["PPO", "--env", self.env_id, "--seeds", str(len(SEEDS))]
        args += ["--n-timesteps", str(N_TIMESTEPS), "--log-frequency", str(LOG_FREQUENCY)]
        args += ["--num-episode-test", str(NUM_EPISODE_TEST)]
        for name, value in PPO_SETTINGS.items():
            args += [f"--{name.replace('_', '-')}", *map(str, np.atleast_1d(value))]
        for name, value in self.env_params.items():
            args += ["--env-param", f"{name}={value}"]
        return args


#: PPO serves both action spaces, and is the cheapest agent to compile for either.
CELLS = [
    Cell("gymnax-discrete", "CartPole-v1"),
    Cell("gymnax-box", "Pendulum-v1"),
    Cell("object-discrete", own="CartPole-v1"),
    Cell("object-box", own="MountainCarContinuous-v0"),
    Cell("brax", "brax/fast", {"episode_length": 50}),
    Cell("playground", "playground/CartpoleBalance", {"episode_length": 50}),
    Cell("target-gym", "target_gym/Plane"),
    Cell("tracking", "ajax/PendulumTracking-v0"),
]
BY_NAME = {cell.name: cell for cell in CELLS}


def probe_obs(result: Any) -> np.ndarray:
    """One observation per seed, the same in every process."""
    shape = (len(result.seeds), *result.agent.env.observation_space.shape)
    return np.random.default_rng(0).normal(size=shape).astype(np.float32)


def behaviour(result: Any) -> dict[str, list]:
    """What a result does: its actions for :func:`probe_obs`, and its evaluation returns."""
    import ajax

    return {
        "actions": result.act(probe_obs(result)).tolist(),
        "returns": ajax.evaluate(result, num_episodes=2, seed=0).tolist(),
    }


def main(cell_name: str, result_dir: str, out: str) -> None:
    import ajax

    cell = BY_NAME[cell_name]
    env = None if cell.own is None else cell.env()
    Path(out).write_text(json.dumps(behaviour(ajax.load(result_dir, env=env))))


if __name__ == "__main__":
    main(*sys.argv[1:])
