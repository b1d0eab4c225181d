"""Agent speed benchmark: every agent on its fixed task, under one protocol.

Protocol (docs/performance.md): 4 environment copies, 8,000 steps, one seed, 3 trials, the
compile cache off, on the CPU. Each trial builds a fresh agent, so its program is traced and
compiled again. Reported per agent, as the median of the trials:

* execution steps/s: steps over the time the compiled programs ran (compile excluded);
* whole-run steps/s: steps over the wall time of the whole ``train`` call;
* compile and warm-up s: tracing, lowering and compiling the run's programs.

Results go to a JSON-lines file (``benchmarks/results/latest.jsonl`` unless ``--out`` names
another) and are compared with ``benchmarks/results/baseline.jsonl``: an agent more than 10%
slower in execution steps/s than its baseline is flagged, and the script exits with status 1.
``--peer rejax`` times rejax's implementation of the same agent under the same
protocol, in the same process, and prints Ajax's speed over rejax's; ``--peer brax`` does the
same for APG against Brax's trainer. ``--seeds N`` runs N seeds in one program on both sides
(rejax's train vmapped over seed keys); ``--rejax-buffers`` gives the replay agents rejax's
default buffer (131,072 transitions) on both sides instead of the bench's.

``--goals`` runs the comparison the goals against rejax are judged on (PERFORMANCE_REPORT.md,
"Against rejax"): PPO, PQN, DQN, SAC and TD3 at budgets where execution dominates (100k
steps for PPO and PQN, 10k for the others), rejax's default buffers, and prints each ratio
against its goal (Ajax's execution time at most 1/1.5 of rejax's; its compile time at most
rejax's).

    JAX_PLATFORMS=cpu python benchmarks/agent_bench.py [--agents PPO] [--peer rejax|brax]
        [--out benchmarks/results/latest.jsonl] [--record-baseline] [--n-timesteps N]
        [--set NAME=VALUE ...] [--seeds N] [--rejax-buffers] [--goals]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["AJAX_NO_COMPILE_CACHE"] = "1"

import jax
import numpy as np

import ajax
from ajax.agents.base import Agent

if TYPE_CHECKING:
    from ajax.run.lowering import RunPrograms
    from ajax.run.plan import RunPlan

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
BASELINE = RESULTS / "baseline.jsonl"
N_ENVS, N_TIMESTEPS, TRIALS, REGRESSION = 4, 8_000, 3, 0.10
#: rejax 0.1.3's default replay capacity (its ReplayMixin).
REJAX_BUFFER = 131_072
#: Budgets of the goals against rejax: long enough that execution dominates.
GOAL_BUDGETS = {"PPO": 100_000, "PQN": 100_000, "DQN": 10_000, "SAC": 10_000, "TD3": 10_000}
#: Ajax's execution time over rejax's, and its compile time over rejax's, at most.
GOAL_EXECUTION, GOAL_COMPILE = 1 / 1.5, 1.0

#: agent -> (task, the agent's hyperparameters for the bench). Every agent updates within
#: the 8,000 steps: the replay agents learn from step 1,000.
TASKS: dict[str, tuple[str, dict]] = {
    "PPO": ("CartPole-v1", {}),
    "DQN": ("CartPole-v1", {"learning_starts": 1_000}),
    "PQN": ("CartPole-v1", {}),
    "SAC": ("Pendulum-v1", {"learning_starts": 1_000}),
    "TD3": ("Pendulum-v1", {"learning_starts": 1_000}),
    "REDQ": ("Pendulum-v1", {"learning_starts": 1_000}),
    "APO": ("Pendulum-v1", {}),
    "APG": ("ajax/PendulumTracking-v0", {}),
    "UDRL": ("CartPole-v1", {}),
    "ASAC": ("Pendulum-v1", {"learning_starts": 1_000}),
    "AVG": ("Pendulum-v1", {}),
    "TDMPC2": ("Pendulum-v1", {"learning_starts": 1_000}),
    "DreamerV3": ("CartPole-v1", {"learning_starts": 1_000}),
}


def goal_agent(agent_name: str) -> Agent:
    """The agent as the goals time it against rejax: its bench task, 4 copies, rejax's
    networks and schedule where they differ from Ajax's defaults, and rejax's default replay
    buffer for the replay agents."""
    env_id, settings = TASKS[agent_name]
    settings = (settings or {}) | (PEERS["rejax"][agent_name].overrides or {})
    if agent_name in REPLAY_AGENTS:
        settings |= {"buffer_size": REJAX_BUFFER}
    return ajax.AGENTS[agent_name](env_id=env_id, n_envs=N_ENVS, **settings)


def goal_parser(doc: str) -> argparse.ArgumentParser:
    """The command line of a script that measures the goal agents one by one: ``--agents``
    (the goal agents by default), ``--seeds`` and ``--out`` (a JSON-lines file the rows are
    appended to, besides standard output), described by the first paragraph of the
    script's ``doc``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--agents", nargs="+", default=list(GOAL_BUDGETS))
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--out", default=None)
    return parser


def lower_goal_run(agent_name: str, agent: Agent, n_seeds: int) -> tuple[RunPlan, Any]:
    """``agent``'s run at ``agent_name``'s goal budget over seeds ``0..n_seeds-1``, planned
    and lowered as ``train`` lowers it without logging: the plan and the run's programs."""
    # Imported here, so that ab.py can time commits from before the run package with this
    # script: only the goals need it.
    from ajax.run.lowering import lower_run
    from ajax.run.plan import plan_run

    plan = plan_run(agent, GOAL_BUDGETS[agent_name], None)
    return plan, lower_run(agent, list(range(n_seeds)), plan, 1, evaluate=False)


def timed_segment_call(
    init: Any, segment: Any, programs: RunPrograms, n_iterations: int
) -> tuple[float, Any]:
    """One call of a compiled ``segment`` over ``n_iterations`` from a freshly initialised
    state (``init`` compiled, ``programs`` the run's): its seconds, the initialisation
    excluded, and the state it ended in."""
    state = jax.block_until_ready(init(programs.seeds, programs.values))
    args = (programs.health, programs.seeds, programs.values, np.int32(0), np.int32(n_iterations))
    start = time.perf_counter()
    end, _, _ = jax.block_until_ready(segment(state, *args))
    return time.perf_counter() - start, end


def time_ajax(
    agent_name: str,
    overrides: dict | None = None,
    log_frequency: int | None = None,
    task: tuple[str, dict] | None = None,
    n_timesteps: int = N_TIMESTEPS,
    seeds: int = 1,
) -> dict[str, float]:
    """One trial: a fresh agent, ``seeds`` seeds in one run, no logging unless
    ``log_frequency`` is given (then the run evaluates and logs to a temporary directory at
    that frequency). ``task`` (environment id, environment parameters) replaces the agent's
    bench task. Steps count every seed's."""
    env_id, hyperparameters = TASKS[agent_name]
    env_params = None
    if task is not None:
        env_id, env_params = task
    start = time.perf_counter()
    agent = ajax.AGENTS[agent_name](
        env_id=env_id,
        n_envs=N_ENVS,
        env_params=env_params,
        **(hyperparameters | (overrides or {})),
    )
    with tempfile.TemporaryDirectory() as log_dir:
        logging_config = None
        if log_frequency is not None:
            logging_config = ajax.LoggingConfig(log_frequency=log_frequency, log_dir=log_dir)
        result = agent.train(
            seed=list(range(seeds)), n_timesteps=n_timesteps, logging_config=logging_config
        )
    wall = time.perf_counter() - start
    steps = result.n_timesteps * seeds
    return {
        "steps": steps,
        "execution_sps": steps / result.timings["run_s"],
        "whole_run_sps": steps / wall,
        "compile_s": result.timings["compile_s"],
    }


class _FiveValueStep:
    """gymnax 1.x's ``step`` returns terminated and truncated apart; rejax 0.1.3 expects the
    old single ``done``. This forwards everything else to the gymnax environment."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        if name == "_env":  # not yet set, as while copy.deepcopy rebuilds the object
            raise AttributeError(name)
        return getattr(self._env, name)

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        return obs, state, reward, terminated | truncated, info


def _rejax(algorithm: str, **settings) -> Callable[..., dict[str, float]]:
    """A trial of rejax's ``algorithm`` with ``settings``, evaluating nothing (as Ajax without
    a logging config): compile its jitted train (vmapped over ``seeds`` keys), then time one
    call. ``overrides`` replace settings (the buffer size)."""

    def trial(env_id: str, n_timesteps: int, seeds: int = 1, **overrides) -> dict[str, float]:
        import gymnax
        import rejax

        start = time.perf_counter()
        env, params = gymnax.make(env_id)
        algo = rejax.get_algo(algorithm).create(
            env=_FiveValueStep(env),
            env_params=params,
            total_timesteps=n_timesteps,
            eval_freq=n_timesteps,
            skip_initial_evaluation=True,
            num_envs=N_ENVS,
            **(settings | overrides),
        )
        algo = algo.replace(eval_callback=lambda algo, ts, rng: ())
        keys = jax.random.split(jax.random.PRNGKey(0), seeds)
        compiled = jax.jit(jax.vmap(algo.train)).lower(keys).compile()
        compile_s = time.perf_counter() - start
        run_start = time.perf_counter()
        jax.block_until_ready(compiled(keys))
        run_s = time.perf_counter() - run_start
        # rejax rounds the budget up to whole iterations.
        per_iteration = N_ENVS * settings.get("num_steps", 1)
        steps = -(-n_timesteps // per_iteration) * per_iteration * seeds
        return {
            "steps": steps,
            "execution_sps": steps / run_s,
            "whole_run_sps": steps / (compile_s + run_s),
            "compile_s": compile_s,
        }

    return trial


def _replicate_for_pmap(tree, devices):
    """``jax.device_put_replicated``, which JAX 0.10 removed and Brax 0.14's APG still calls:
    a leading axis of one entry per device."""
    import jax.numpy as jnp

    stacked = jax.tree.map(lambda x: jnp.stack([x] * len(devices)), tree)
    return jax.device_put(stacked, devices[0])


def _brax_apg(env_id: str, n_timesteps: int, seeds: int = 1) -> dict[str, float]:
    """A trial of Brax's APG trainer (``brax.training.agents.apg.train``) with the settings of
    Ajax's APG defaults: windows of 32 steps, step size 3e-3, observation normalisation.

    Brax's trainer is a Python loop over pmapped epochs with an evaluation after each, not one
    program, so it is timed from its own progress reports: the run is split into 6 epochs, the
    first two compile (the second again, as its input's placement differs from the first's),
    and execution is the steps of the last four over their wall time. Compile and warm-up is
    the first two epochs' wall time less their steps at that speed. The whole run includes
    Brax's evaluations (one copy, one 1,000-step episode each). One seed only: Brax's
    trainer runs one seed per call."""
    if seeds != 1:
        raise ValueError("Brax's APG trainer runs one seed per call; drop --seeds.")
    from brax import envs
    from brax.training.agents.apg import train as brax_apg

    jax.device_put_replicated = _replicate_for_pmap
    horizon, epochs = 32, 6
    per_update = N_ENVS * horizon
    updates = -(-n_timesteps // (per_update * epochs)) * epochs
    walltimes = []
    start = time.perf_counter()
    brax_apg.train(
        environment=envs.get_environment(env_id.removeprefix("brax/")),
        episode_length=1000,
        policy_updates=updates,
        horizon_length=horizon,
        num_envs=N_ENVS,
        num_evals=epochs + 1,
        num_eval_envs=1,
        learning_rate=3e-3,
        normalize_observations=True,
        progress_fn=lambda step, m: walltimes.append(float(m.get("training/walltime", 0.0))),
    )
    wall = time.perf_counter() - start
    per_epoch = updates // epochs * per_update
    execution_sps = (epochs - 2) * per_epoch / (walltimes[-1] - walltimes[2])
    return {
        "steps": updates * per_update,
        "execution_sps": execution_sps,
        "whole_run_sps": updates * per_update / wall,
        "compile_s": walltimes[2] - 2 * per_epoch / execution_sps,
    }


class Peer(NamedTuple):
    """A peer's implementation of an agent: ``trial(env_id, n_timesteps, seeds, **overrides)``
    times it once;
    ``overrides`` are Ajax settings that match the peer's networks and schedule where its
    defaults differ (Ajax is timed again with them); ``task`` (environment id and parameters)
    and ``n_timesteps`` replace the bench's for both, where the peer cannot run the bench task
    or its timing needs a longer run."""

    trial: Callable[..., dict[str, float]]
    overrides: dict | None = None
    task: tuple[str, dict | None] | None = None
    n_timesteps: int = N_TIMESTEPS


PEERS: dict[str, dict[str, Peer]] = {
    "rejax": {
        # Ajax's PPO defaults: 64x64 tanh networks, 4 x 128 rollout, 4 epochs x 4 minibatches.
        "PPO": Peer(
            _rejax(
                "ppo",
                num_steps=128,
                num_epochs=4,
                num_minibatches=4,
                learning_rate=2.5e-4,
                max_grad_norm=0.5,
                gamma=0.99,
                gae_lambda=0.95,
                clip_eps=0.2,
                ent_coef=0.01,
                vf_coef=0.5,
                agent_kwargs={"activation": "tanh", "hidden_layer_sizes": (64, 64)},
            ),
            {},
        ),
        # rejax's DQN makes one update per iteration of one step per copy, on 64x64 networks.
        "DQN": Peer(
            _rejax(
                "dqn",
                num_epochs=1,
                batch_size=64,
                buffer_size=100_000,
                fill_buffer=1_000,
                learning_rate=2.3e-3,
                ddqn=False,
                agent_kwargs={"activation": "relu"},
            ),
            {"train_frequency": 1, "gradient_steps": 1, "hidden_sizes": (64, 64)},
        ),
        # rejax's PQN has 64x64 LayerNorm networks.
        "PQN": Peer(
            _rejax(
                "pqn",
                num_steps=64,
                num_epochs=4,
                num_minibatches=16,
                learning_rate=1e-4,
                td_lambda=0.95,
                gamma=0.99,
            ),
            {"hidden_sizes": (64, 64)},
        ),
        # rejax's SAC and TD3: 64x64 networks, one update per iteration, batches of 256.
        "SAC": Peer(
            _rejax(
                "sac",
                buffer_size=1_000_000,
                fill_buffer=1_000,
                batch_size=256,
                agent_kwargs={"activation": "relu"},
            ),
            {"hidden_sizes": (64, 64)},
        ),
        "TD3": Peer(
            _rejax(
                "td3",
                buffer_size=1_000_000,
                fill_buffer=1_000,
                batch_size=256,
                actor_kwargs={"activation": "relu"},
                critic_kwargs={"activation": "relu"},
            ),
            {"hidden_sizes": (64, 64)},
        ),
    },
    # Brax's APG needs a Brax environment: both run brax/fast (whose reward does not depend on
    # the action, so this times the machinery, not learning), 64k steps so that execution is
    # not a few milliseconds. Brax's wrapper restarts episodes from their first state; Ajax's
    # differentiable reset draws a fresh one.
    "brax": {
        "APG": Peer(
            _brax_apg, task=("brax/fast", {"differentiable_reset": True}), n_timesteps=64_000
        )
    },
}


#: The agents that keep a replay buffer (``--rejax-buffers`` sizes theirs).
REPLAY_AGENTS = ("DQN", "SAC", "TD3")


def time_peer(
    peer: str, agent_name: str, n_timesteps: int, seeds: int, buffers: dict
) -> dict[str, float]:
    entry = PEERS[peer][agent_name]
    env_id = (entry.task or TASKS[agent_name])[0]
    return entry.trial(env_id, n_timesteps, seeds, **buffers)


def alternating_medians(
    implementations: list[tuple[str, Callable[[], dict[str, float]]]], trials: int = TRIALS
) -> dict[str, dict[str, float]]:
    """Each implementation's median figures over ``trials`` rounds, one trial of each per
    round in turn, so that the machine's drift falls on all of them alike."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in implementations}
    for _ in range(trials):
        for name, trial in implementations:
            runs[name].append(trial())
    return {
        name: {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        for name, rows in runs.items()
    }


def read_baseline(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["agent"]: r for r in rows if r.get("implementation") == "ajax"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", nargs="+", default=sorted(TASKS), choices=sorted(TASKS))
    parser.add_argument("--peer", choices=sorted(PEERS), default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "latest.jsonl")
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    parser.add_argument(
        "--record-baseline", action="store_true", help="record the agents run in the baseline"
    )
    parser.add_argument(
        "--trials", type=int, default=TRIALS, help="trials per agent (the protocol's is 3)"
    )
    parser.add_argument(
        "--log-frequency",
        type=int,
        default=None,
        help="time logged runs that evaluate every this many steps (the protocol logs nothing)",
    )
    parser.add_argument(
        "--n-timesteps",
        type=int,
        default=N_TIMESTEPS,
        help="steps per trial (the protocol's is 8,000); a measurement of its own, not for the "
        "baseline",
    )
    parser.add_argument(
        "--set",
        nargs="+",
        default=[],
        metavar="NAME=VALUE",
        help="hyperparameters over the bench task's (Python literals), e.g. learning_starts=10_000",
    )
    parser.add_argument("--seeds", type=int, default=1, help="seeds per run, on both sides")
    parser.add_argument(
        "--rejax-buffers",
        action="store_true",
        help=f"replay agents keep rejax's default buffer ({REJAX_BUFFER:,}) on both sides",
    )
    parser.add_argument(
        "--goals",
        action="store_true",
        help="the goals against rejax: its agents at their goal budgets, rejax's buffers",
    )
    args = parser.parse_args(argv)
    overrides = {k: ast.literal_eval(v) for k, v in (item.split("=", 1) for item in args.set)}
    measurement = bool(
        overrides
        or args.n_timesteps != N_TIMESTEPS
        or args.seeds != 1
        or args.goals
        or args.rejax_buffers
    )
    if args.record_baseline and measurement:
        parser.error(
            "--record-baseline records the protocol alone: drop --set, --n-timesteps, "
            "--seeds, --rejax-buffers and --goals"
        )
    if args.goals:
        args.peer, args.rejax_buffers = "rejax", True
        if args.agents == sorted(TASKS):
            args.agents = list(GOAL_BUDGETS)
        unknown = set(args.agents) - set(GOAL_BUDGETS)
        if unknown:
            parser.error(f"--goals covers {', '.join(GOAL_BUDGETS)}; not {', '.join(unknown)}")

    machine = {
        "date": time.strftime("%Y-%m-%d"),
        "cpu": ajax._compile_cache.cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        # The devices Ajax shards a run's seeds over (ajax._devices; AJAX_CPU_DEVICES).
        "devices": jax.device_count(),
    }
    protocol = {"n_envs": N_ENVS, "trials": args.trials, "seeds": args.seeds}
    protocol["log_frequency"] = args.log_frequency
    protocol["overrides"] = overrides
    protocol["rejax_buffers"] = args.rejax_buffers
    protocol["goals"] = args.goals
    baseline = read_baseline(args.baseline)
    rows, regressions = [], []
    header = f"{'agent':<8}{'impl':<14}{'task':<14}{'exec steps/s':>14}{'whole steps/s':>15}"
    print(header + f"{'compile s':>11}{'vs baseline':>13}")
    for name in args.agents:
        budget = GOAL_BUDGETS[name] if args.goals else args.n_timesteps
        buffers = {}
        if args.rejax_buffers and name in REPLAY_AGENTS:
            buffers = {"buffer_size": REJAX_BUFFER}
        implementations = [
            (
                "ajax",
                lambda n=name, b=budget, bu=buffers: time_ajax(
                    n,
                    overrides | bu,
                    log_frequency=args.log_frequency,
                    n_timesteps=b,
                    seeds=args.seeds,
                ),
            )
        ]
        if args.peer and name in PEERS[args.peer]:
            entry = PEERS[args.peer][name]
            peer_budget = budget if args.goals else entry.n_timesteps
            if entry.overrides or entry.task or buffers or peer_budget != budget:
                implementations.append(
                    (
                        "ajax-as-peer",
                        lambda n=name, e=entry, b=peer_budget, bu=buffers: time_ajax(
                            n,
                            (e.overrides or {}) | bu,
                            task=e.task,
                            n_timesteps=b,
                            seeds=args.seeds,
                        ),
                    )
                )
            implementations.append(
                (
                    args.peer,
                    lambda n=name, b=peer_budget, bu=buffers: time_peer(
                        args.peer, n, b, args.seeds, bu
                    ),
                )
            )
        figures = alternating_medians(implementations, args.trials)
        for implementation, stats in figures.items():
            task = TASKS[name][0]
            row_budget = budget
            if implementation != "ajax":
                entry = PEERS[args.peer][name]
                task, row_budget = (entry.task or TASKS[name])[0], peer_budget
            row = {"agent": name, "implementation": implementation, "task": task}
            row |= stats | protocol | machine | {"n_timesteps": row_budget}
            rows.append(row)
            change = ""
            if implementation == "ajax" and name in baseline and not measurement:
                ratio = stats["execution_sps"] / baseline[name]["execution_sps"] - 1
                change = f"{ratio:+.1%}"
                if ratio < -REGRESSION:
                    regressions.append(f"{name}: {change} execution steps/s against the baseline")
            print(
                f"{name:<8}{implementation:<14}{task:<14}"
                f"{stats['execution_sps']:>14,.0f}{stats['whole_run_sps']:>15,.0f}"
                f"{stats['compile_s']:>11.2f}{change:>13}"
            )
        if args.peer in figures:
            ours, theirs = figures.get("ajax-as-peer", figures["ajax"]), figures[args.peer]
            for key in ("execution_sps", "whole_run_sps"):
                ratio = ours[key] / theirs[key]
                print(f"  {name} ajax/{args.peer} {key.replace('_sps', '')}: {ratio:.2f}x")
            if args.goals:
                for what, ratio, goal in (
                    (
                        "execution time",
                        theirs["execution_sps"] / ours["execution_sps"],
                        GOAL_EXECUTION,
                    ),
                    ("compile time", ours["compile_s"] / theirs["compile_s"], GOAL_COMPILE),
                ):
                    verdict = "met" if ratio <= goal else "NOT met"
                    print(f"  {name} {what} ajax/rejax {ratio:.2f} (goal <= {goal:.2f}): {verdict}")
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"wrote {args.out}")
    if args.record_baseline:
        # The agents run replace their rows; the others keep theirs, so one slow agent (REDQ)
        # can be recorded in a run of its own.
        recorded = baseline | {r["agent"]: r for r in rows if r["implementation"] == "ajax"}
        ordered = [recorded[name] for name in TASKS if name in recorded]
        args.baseline.write_text("".join(json.dumps(r) + "\n" for r in ordered))
        print(f"recorded the baseline of {', '.join(args.agents)} in {args.baseline}")
    for line in regressions:
        print(f"REGRESSION (more than {REGRESSION:.0%} slower): {line}", file=sys.stderr)
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
