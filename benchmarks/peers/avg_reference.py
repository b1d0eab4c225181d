"""AVG beside its authors' implementation (gauthamvasan/avg, ``avg.py``): the same task,
budget and settings, several seeds each, compared on the return of the training episodes
(both learn from every step they act in, so training returns are what each learns from),
averaged in windows of ``--window`` steps.

The reference is not part of Ajax: clone it and name its folder.

    git clone https://github.com/gauthamvasan/avg /tmp/avg-reference
    pip install -e ".[peers]"        # PyTorch (CPU) and gymnasium
    JAX_PLATFORMS=cpu python benchmarks/peers/avg_reference.py --reference /tmp/avg-reference \\
        --seeds 5 --out benchmarks/results/peer_avg.jsonl --plot docs/agents/avg_reference.png

The reference runs ``avg.main`` with its own argument defaults (``avg.py``: actor step size
0.0063, critic 0.0087, Adam beta1 0, gamma 0.99, entropy coefficient 0.07, 256 units),
one process per seed, each on one thread as the reference sets itself; Ajax's AVG keeps its
defaults, which are those. The one stand-in: ``incremental_rl.experiment_tracker``, which
``avg.py`` imports only to record videos (``--n_eval``, unused here) and which needs OpenCV,
is replaced by an empty module.
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from records import emit  # noqa: E402
from side_by_side import ajax_seeds, plot, provenance, reference_seeds, windowed  # noqa: E402

#: ``avg.py``'s argument defaults, but for the task, budget and seed set per run; ``betas``,
#: ``algo`` and ``device`` are what its ``__main__`` block derives from them.
REFERENCE_ARGS = {
    "actor_lr": 0.0063,
    "critic_lr": 0.0087,
    "beta1": 0.0,
    "gamma": 0.99,
    "alpha_lr": 0.07,
    "l2_actor": 0.0,
    "l2_critic": 0.0,
    "nhid_actor": 256,
    "nhid_critic": 256,
    "checkpoint": 50_000,
    "results_dir": "./results",
    "save_model": False,
    "n_eval": 0,
    "betas": [0.0, 0.999],
    "algo": "AVG",
}


def reference_run(reference: str, env_id: str, steps: int, seed: int) -> tuple[list, list]:
    """One seed of the reference: the step at which each training episode ended, and its
    return."""
    import gymnasium

    sys.path.insert(0, reference)
    sys.modules["incremental_rl.experiment_tracker"] = types.SimpleNamespace(record_video=None)
    import avg

    args = argparse.Namespace(**REFERENCE_ARGS, env=env_id, N=steps, seed=seed)
    args.device = avg.torch.device("cpu")
    avg.set_one_thread()
    lengths, returns = avg.main(args)
    ends = np.cumsum(lengths)
    # The reference appends an unfinished last episode "to make plotting easier": one
    # shorter than the time limit at the budget's end is dropped.
    limit = gymnasium.spec(env_id).max_episode_steps
    keep = len(ends) - 1 if ends[-1] == steps and lengths[-1] < limit else len(ends)
    return ends[:keep].tolist(), np.asarray(returns)[:keep].tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", required=True, help="the folder of a gauthamvasan/avg clone")
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--window", type=int, default=5_000)
    parser.add_argument("--workers", type=int, default=2, help="reference seeds run at once")
    parser.add_argument("--out", default=None)
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args()
    if not (Path(args.reference) / "avg.py").exists():
        parser.error(f"{args.reference} has no avg.py: clone gauthamvasan/avg and name its folder.")
    runs, reference_s = reference_seeds(
        reference_run, args.workers, args.seeds, args.reference, args.env, args.steps
    )
    import ajax  # after the workers have forked: JAX's threads do not survive a fork

    row = {
        "agent": "AVG",
        "env": args.env,
        "steps": args.steps,
        "seeds": args.seeds,
        "window": args.window,
        "window_ends": np.arange(args.window, args.steps + 1, args.window).tolist(),
        "reference": np.round(
            [windowed(*run, args.steps, args.window) for run in runs], 1
        ).tolist(),
        "reference_wall_s": round(reference_s, 1),
        **ajax_seeds(ajax.AVG(env_id=args.env), args.steps, args.seeds, args.window, 10),
        **provenance(args.reference),
    }
    emit(row, args.out)
    if args.plot:
        plot(row, args.plot, f"AVG on {args.env}: Ajax and gauthamvasan/avg")


if __name__ == "__main__":
    sys.exit(main())
