"""TD-MPC2's update and plan beside its reference's (nicklashansen/tdmpc2), timed side by side
in one process on the CPU at the agent bench's settings: Pendulum-v1's shapes, Ajax's
``size="cpu"`` preset on both sides, ``learning_starts`` 1,000 and 4 copies.

The reference is not part of Ajax: clone it and name its folder.

    git clone https://github.com/nicklashansen/tdmpc2 /tmp/tdmpc2-reference
    pip install -e ".[peers]"        # PyTorch (CPU), tensordict and hydra
    JAX_PLATFORMS=cpu python benchmarks/peers/tdmpc2_reference.py \\
        --reference /tmp/tdmpc2-reference --out benchmarks/results/peer_tdmpc2.jsonl

The reference runs on CUDA only; three edits to a copy of its package (:data:`CPU_EDITS`) put
it on the CPU: its device becomes the CPU, its model is built there rather than moved (its
ensemble keeps a copy on the meta device, which ``.to`` cannot move), and its Adams are not
``capturable`` (a CUDA-graph option the CPU refuses). Inductor's pattern matcher is turned
off: with it, this torch fails to compile the reference's update. Its ``_update`` is
timed on a fixed batch (its buffer's sampling left out) and ``act`` on one observation (it
plans one environment at a time), eager and compiled (its ``compile: true``, torch.compile);
Ajax's update for one seed, vmapped as training runs it, and one plan for the bench's 4
copies, compiled with the run's options and called in a loop inside one program. Trials
alternate the sides (``agent_bench.alternating_medians``).

Each row also gives the bench's execution speed these costs would allow: its 8,000 steps are
``learning_starts / n_envs`` iterations of random steps, a burst of ``learning_starts``
updates, and an update and ``n_envs`` plans in each iteration after it; environment steps and
sampling are left out on both sides.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from agent_bench import alternating_medians  # noqa: E402
from records import emit  # noqa: E402
from side_by_side import provenance  # noqa: E402

import ajax  # noqa: E402  (before JAX: each CPU core a device)

ENV_ID, N_ENVS, N_TIMESTEPS, LEARNING_STARTS = "Pendulum-v1", 4, 8_000, 1_000
CALLS = 50

#: The textual edits that put the reference on the CPU, by file of its ``tdmpc2`` package.
CPU_EDITS = {
    "tdmpc2.py": [
        ("torch.device('cuda:0')", "torch.device('cpu')"),
        ("device='cuda:0'", "device='cpu'"),
        ("self.model = WorldModel(cfg).to(self.device)", "self.model = WorldModel(cfg)"),
        ("capturable=True", "capturable=False"),
    ],
    "common/scale.py": [("torch.device('cuda:0')", "torch.device('cpu')")],
}


def bench_speed(update_ms: float, plan_ms_per_copy: float) -> float:
    """The bench's execution steps/s at these costs per update and per copy's plan."""
    iterations = (N_TIMESTEPS - LEARNING_STARTS) // N_ENVS
    seconds = (
        LEARNING_STARTS * update_ms + iterations * (update_ms + N_ENVS * plan_ms_per_copy)
    ) / 1e3
    return N_TIMESTEPS / seconds


def timed_ms(run: Callable[[], object]) -> float:
    """Milliseconds that ``run()`` takes."""
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1e3


def repeated(call: Callable[[], object]) -> Callable[[], None]:
    """``call`` made :data:`CALLS` times."""

    def run() -> None:
        for _ in range(CALLS):
            call()

    return run


def reference_agent(package: Path, compiled: bool, agent: ajax.TDMPC2):
    """The reference's agent (its package ``package``, on ``sys.path``) at ``agent``'s preset
    and task: :data:`CALLS` updates, and as many plans of one environment."""
    import torch
    import torch._inductor.config as inductor
    from common.parser import cfg_to_dataclass
    from omegaconf import OmegaConf
    from tdmpc2 import TDMPC2

    inductor.pattern_matcher = False
    preset, c = agent.preset, agent.config
    cfg = OmegaConf.load(package / "config.yaml")
    cfg.pop("defaults")
    cfg.update(
        task="pendulum",
        tasks=["pendulum"],
        obs="state",
        obs_shape={"state": list(agent.env.observation_space.shape)},
        action_dim=math.prod(agent.env.action_space.shape),
        episode_length=agent.env.max_episode_steps,
        multitask=False,
        task_dim=0,
        episodic=False,
        compile=compiled,
        bin_size=(cfg.vmax - cfg.vmin) / (cfg.num_bins - 1),
        enc_dim=preset.encoder_dim,
        mlp_dim=preset.mlp_dim,
        latent_dim=preset.latent_dim,
        num_enc_layers=preset.encoder_layers,
        num_q=preset.num_q,
        num_samples=preset.planner.samples,
        num_pi_trajs=preset.planner.policy_samples,
        num_elites=preset.planner.elites,
        iterations=preset.planner.iterations,
        batch_size=c.batch_size,
        horizon=c.horizon,
    )
    torch.manual_seed(0)
    reference = TDMPC2(cfg_to_dataclass(cfg))
    h, b, obs_dim = c.horizon, c.batch_size, cfg.obs_shape["state"][0]
    obs, action = torch.randn(h + 1, b, obs_dim), torch.rand(h, b, cfg.action_dim) * 2 - 1
    reward, terminated = torch.randn(h, b, 1), torch.zeros(h, b, 1)
    one = torch.randn(obs_dim)
    return (
        repeated(lambda: reference._update(obs, action, reward, terminated)),
        repeated(lambda: reference.act(one, t0=False)),
    )


def ajax_calls(agent: ajax.TDMPC2):
    """Ajax's :data:`CALLS` updates (one seed, vmapped) and as many plans (every copy), each
    lowered and compiled as one loop the way a run's segment is (the CPU tuning's lowering
    and compile options)."""
    import jax

    from ajax._xla import compiler_options, unrolled_threefry, weight_gradients_for
    from ajax.run.plan import seed_array
    from ajax.run.program import init_program

    state = init_program(agent, agent.env_copies(N_ENVS), 1)(seed_array([0]), {})

    def updates(state):
        step = lambda s, _: (jax.vmap(agent._update)(s)[0], None)  # noqa: E731
        return jax.lax.scan(step, state, None, CALLS)[0]

    def plans(state):
        act = jax.vmap(lambda p, o, c, k: agent.act(p, o, c, k, False))

        def step(carry, key):
            action, carry = act(state.params, state.cursor.obs, carry, key[None])
            return carry, action

        carry = jax.vmap(lambda p: agent.initial_carry(p, N_ENVS))(state.params)
        return jax.lax.scan(step, carry, jax.random.split(jax.random.key(1), CALLS))[1]

    with unrolled_threefry(agent), weight_gradients_for(agent):
        lowered = [jax.jit(f).lower(state) for f in (updates, plans)]
    compiled = [f.compile(compiler_options=compiler_options(agent)) for f in lowered]
    return tuple(lambda f=f: jax.block_until_ready(f(state)) for f in compiled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", required=True, help="a clone of nicklashansen/tdmpc2")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out", help="append the summary row to this JSON-lines file")
    args = parser.parse_args()

    agent = ajax.TDMPC2(env_id=ENV_ID, n_envs=N_ENVS, learning_starts=LEARNING_STARTS)
    with tempfile.TemporaryDirectory() as scratch:
        package = Path(scratch) / "tdmpc2"
        shutil.copytree(Path(args.reference) / "tdmpc2", package)
        for name, edits in CPU_EDITS.items():
            text = (package / name).read_text()
            for old, new in edits:
                if old not in text:
                    raise SystemExit(f"{name} no longer holds {old!r}: update CPU_EDITS.")
                text = text.replace(old, new)
            (package / name).write_text(text)
        sys.path.insert(0, str(package))
        # Each side's CALLS updates and CALLS plans, and the copies each plan is for.
        sides = {
            "reference_eager": (*reference_agent(package, False, agent), 1),
            "reference_compiled": (*reference_agent(package, True, agent), 1),
            "ajax": (*ajax_calls(agent), N_ENVS),
        }
        for update, plan, _ in sides.values():  # compile and warm up
            update()
            plan()

        def trial(update, plan, copies) -> dict[str, float]:
            return {
                "update_ms": timed_ms(update) / CALLS,
                "plan_ms_per_copy": timed_ms(plan) / (CALLS * copies),
            }

        trials = [(side, lambda calls=calls: trial(*calls)) for side, calls in sides.items()]
        medians = alternating_medians(trials, args.trials)

    import torch

    summary = {"agent": "TDMPC2", "env": ENV_ID, "size": agent.config.size, "n_envs": N_ENVS}
    for side, costs in medians.items():
        summary[side] = {name: round(ms, 2) for name, ms in costs.items()}
        speed = bench_speed(costs["update_ms"], costs["plan_ms_per_copy"])
        summary[side]["bench_steps_per_s"] = round(speed, 1)
    summary |= {"trials": args.trials, "torch": torch.__version__}
    summary |= provenance(args.reference)
    emit(summary, args.out)


if __name__ == "__main__":
    main()
