"""UDRL beside its authors' implementation (BY571/Upside-Down-Reinforcement-Learning, the
notebook ``Upside-Down.ipynb``): CartPole-v1, the same budget and seeds, compared on the return
of the training episodes, averaged in windows of ``--window`` steps.

The reference is not part of Ajax: clone it and name its folder.

    git clone https://github.com/BY571/Upside-Down-Reinforcement-Learning /tmp/udrl-reference
    pip install -e ".[peers]"        # PyTorch (CPU) and gymnasium
    JAX_PLATFORMS=cpu python benchmarks/peers/udrl_reference.py --reference /tmp/udrl-reference \\
        --seeds 5 --out benchmarks/results/peer_udrl.jsonl --plot docs/agents/udrl_reference.png

The plot compares training returns: both sides act in their training episodes alike (actions
sampled from the behaviour function under an exploratory command drawn from ``[M, M + S]`` of
the best ``last_few`` stored episodes, the command spending each reward), and those episodes
are what each learns from. The two evaluations are not alike, so they are recorded
(``reference_eval``, ``ajax_eval``) but not plotted: the notebook evaluates once per iteration,
sampling actions under a fresh exploratory command whose desired return is capped at
``max_reward``; Ajax evaluates every window, 10 greedy episodes from ``(M, mean length)``, as
its learning test does. Ajax's segments end on whole iterations of 512 steps, so its points
lie at its own steps (``ajax_window_ends``: up to 511 steps before the reference's window ends,
and a last, shorter segment at the end of the budget).

The reference runs the notebook's own code, read from the clone at run time: its code cells
up to the one that starts training (``run_upside_down(max_episodes=200)``, which also plots;
the cells after it save the model and play one episode on CartPole-v0), executed in a fresh
namespace per seed, one process per seed, each on one thread; then ``run_upside_down`` is
called until the budget is spent. The substitutions, and nothing else:

- ``gym`` is a module made here whose ``make`` returns the gymnasium environment behind the
  old API the notebook was written for: ``reset()`` returns the observation, ``step`` returns
  ``(obs, reward, done, info)`` with ``done`` on termination or truncation (as old gym's
  time limit ended episodes).
- ``gym.make("CartPole-v0")`` becomes ``CartPole-v1`` (the task and budget compared are
  v1's), and so ``max_reward``, the cap on the evaluation's desired return, becomes v1's best
  return, 500 (the notebook's 200 is v0's).
- The step budget: the environment counts the training steps (the warm-up episodes' and the
  training episodes', not the evaluation's, as Ajax's ``n_timesteps`` does not count its
  evaluations) and stops the run at the first step past ``--steps``, mid-iteration; the
  episode it interrupts is not recorded.
- Seeding: numpy's global generator, torch's and the environment's first reset take the
  seed; the notebook's network constructor, which seeds torch with a fixed 1
  (``BF(state_space, action_space, 64, 1)``), takes the seed instead.
- ``device`` is the CPU; ``torch.set_num_threads(1)``; the notebook's progress lines are
  discarded (standard output carries the row).

The reference's settings are the notebook's, set in ``REFERENCE_ARGS`` right after the cell
that defines them (only ``max_reward`` differs, as above). Its other settings are literals in
its cells, used as they are: 64 units, three ReLU layers after the gated embedding, Adam at
1e-3, and warm-up episodes acted by the untrained network under the command ``(1, 1)``. Ajax's
UDRL keeps its defaults, which take the notebook's store size, ``last_few``, batch size, step
size, command scales, updates per iteration and width. Where they differ: Ajax's warm-up is
1,000 uniformly random steps; its network has two ReLU layers after the embedding; its
iterations are 16 copies x 32 steps with 100 updates (the notebook's are 15 whole episodes with
100 updates, so fewer updates per step as episodes lengthen); its exploratory command is drawn
per copy at each iteration's start (the notebook's per episode, from the store as it is then);
its hindsight pairs may start at an episode's last step (the notebook's ``select_time_steps``
never draws it); and its store keeps the best episodes as they arrive (the notebook sorts and
cuts to 700 before each update).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from records import emit  # noqa: E402
from side_by_side import ajax_seeds, plot, provenance, reference_seeds, windowed  # noqa: E402

ENV_ID = "CartPole-v1"
NOTEBOOK = "Upside-Down.ipynb"

#: The notebook's settings (its second cell), but ``max_reward``: CartPole-v1's best return,
#: where the notebook's 200 is CartPole-v0's.
REFERENCE_ARGS = {
    "horizon_scale": 0.02,
    "return_scale": 0.02,
    "replay_size": 700,
    "n_warm_up_episodes": 50,
    "n_updates_per_iter": 100,
    "n_episodes_per_iter": 15,
    "last_few": 50,
    "batch_size": 256,
    "max_reward": 500,
}

#: The cell that starts training (and plots): the cells from it on are not run.
TRAINING_CALL = "run_upside_down(max_episodes="

#: Text replaced in the notebook's code, each found exactly once: the task, and the seed its
#: network constructor gives torch.
EDITS = (
    ('gym.make("CartPole-v0")', f'gym.make("{ENV_ID}")'),
    ("BF(state_space, action_space, 64, 1)", "BF(state_space, action_space, 64, {seed})"),
)


class BudgetSpent(Exception):
    """Raised at the first training step past the budget: the reference stops there."""


class OldGymEnv:
    """A gymnasium environment behind the old gym API, counting the training steps and
    recording the step at which each training episode ended, and its return. While
    ``evaluating``, steps are neither counted nor recorded."""

    def __init__(self, env, budget: int, seed: int):
        self.env = env
        self.action_space = env.action_space
        self.observation_space = env.observation_space
        self.budget = budget
        self.seed = seed
        self.steps = 0
        self.evaluating = False
        self.episode_return = 0.0
        self.ends: list[int] = []
        self.returns: list[float] = []

    def reset(self):
        obs, _ = self.env.reset(seed=self.seed)
        self.seed = None
        self.episode_return = 0.0
        return obs

    def step(self, action):
        if not self.evaluating:
            if self.steps == self.budget:
                raise BudgetSpent
            self.steps += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        done = terminated or truncated
        self.episode_return += float(reward)
        if done and not self.evaluating:
            self.ends.append(self.steps)
            self.returns.append(self.episode_return)
        return obs, reward, done, info


def notebook_cells(reference: str, seed: int) -> list[str]:
    """The notebook's code cells before the one that starts training, with ``EDITS``."""
    cells = json.loads((Path(reference) / NOTEBOOK).read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    code = code[: next(i for i, source in enumerate(code) if TRAINING_CALL in source)]
    for old, new in EDITS:
        found = sum(source.count(old) for source in code)
        if found != 1:
            raise ValueError(f"{NOTEBOOK} has {found} of {old!r}, not one: the notebook changed.")
        code = [source.replace(old, new.format(seed=seed)) for source in code]
    return code


def reference_run(reference: str, steps: int, seed: int) -> dict:
    """One seed of the reference: the step at which each training episode ended and its
    return, the step and return of each evaluation, and the seconds it took."""
    import gymnasium
    import torch

    started = time.perf_counter()
    torch.set_num_threads(1)
    np.random.seed(seed)
    torch.manual_seed(seed)
    gym = types.ModuleType("gym")
    gym.make = lambda env_id: OldGymEnv(gymnasium.make(env_id), steps, seed)
    sys.modules["gym"] = gym
    namespace = {"__name__": "udrl_notebook"}
    settings = REFERENCE_ARGS | {"device": torch.device("cpu")}
    evaluations = {"steps": [], "returns": []}
    with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink):
        try:
            for i, source in enumerate(notebook_cells(reference, seed)):
                exec(compile(source, f"{NOTEBOOK}, code cell {i}", "exec"), namespace)
                if settings and settings.keys() <= namespace.keys():
                    namespace.update(settings)
                    settings = {}
            namespace["evaluate"] = recorded(namespace["evaluate"], namespace["env"], evaluations)
            namespace["run_upside_down"](max_episodes=sys.maxsize)
        except BudgetSpent:
            pass
    env = namespace["env"]
    return {
        "ends": env.ends,
        "returns": env.returns,
        "eval_steps": evaluations["steps"],
        "eval_returns": evaluations["returns"],
        "seconds": time.perf_counter() - started,
    }


def recorded(evaluate, env: OldGymEnv, evaluations: dict):
    """The notebook's ``evaluate``, its steps not counted, recording the training steps
    done so far and the return."""

    def run(*args, **kwargs):
        env.evaluating = True
        try:
            episode_return = evaluate(*args, **kwargs)
        finally:
            env.evaluating = False
        evaluations["steps"].append(env.steps)
        evaluations["returns"].append(float(episode_return))
        return episode_return

    return run


def reference_side(args: argparse.Namespace) -> dict:
    """The reference's seeds, run: training and evaluation returns per window, wall time."""
    runs, reference_s = reference_seeds(
        reference_run, args.workers, args.seeds, args.reference, args.steps
    )

    def windows(steps: str, returns: str) -> list:
        return np.round(
            [windowed(r[steps], r[returns], args.steps, args.window) for r in runs], 1
        ).tolist()

    return {
        "reference": windows("ends", "returns"),
        "reference_eval": windows("eval_steps", "eval_returns"),
        "reference_wall_s": round(reference_s, 1),
        "reference_seed_s": [round(r["seconds"], 1) for r in runs],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--reference",
        required=True,
        help="the folder of a BY571/Upside-Down-Reinforcement-Learning clone",
    )
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--window", type=int, default=25_000)
    parser.add_argument("--workers", type=int, default=2, help="reference seeds run at once")
    parser.add_argument("--out", default=None)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument(
        "--reference-from",
        type=Path,
        default=None,
        help="a row this script wrote (its last line) whose reference side, of the same "
        "steps, seeds and window, is reused: only Ajax's side runs again",
    )
    args = parser.parse_args()
    if not (Path(args.reference) / NOTEBOOK).exists():
        parser.error(
            f"{args.reference} has no {NOTEBOOK}: clone "
            "BY571/Upside-Down-Reinforcement-Learning and name its folder."
        )
    shape = {"steps": args.steps, "seeds": args.seeds, "window": args.window}
    if args.reference_from is not None:
        earlier = json.loads(args.reference_from.read_text().splitlines()[-1])
        if {k: earlier[k] for k in shape} != shape:
            parser.error(f"{args.reference_from}'s last row is of {earlier}, not of {shape}.")
        reference = {k: v for k, v in earlier.items() if k.startswith("reference")}
    else:
        reference = reference_side(args)
    import ajax  # after the workers have forked: JAX's threads do not survive a fork

    row = {
        "agent": "UDRL",
        "env": ENV_ID,
        **shape,
        "window_ends": np.arange(args.window, args.steps + 1, args.window).tolist(),
        **reference,
        **ajax_seeds(ajax.UDRL(env_id=ENV_ID), args.steps, args.seeds, args.window, 10),
        **provenance(args.reference),
    }
    emit(row, args.out)
    if args.plot:
        title = f"UDRL on {ENV_ID}: Ajax and BY571's notebook"
        plot(row, args.plot, title)


if __name__ == "__main__":
    sys.exit(main())
