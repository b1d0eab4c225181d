"""One DQN update phase in Ajax and in Stable-Baselines3, from the same weights on the same
minibatches, compared number by number.

Ajax's DQN with RL-Zoo's CartPole settings (``double_dqn=False, n_step=1,
anneal_lr=False``) collects its 1,000-step warm-up on CartPole-v1, then makes one update
phase (128 Huber-loss steps of Adam on minibatches of 64, gradient norms clipped at 10, the
target network copied from the online one). The script records the weights before, the 128
minibatches Ajax drew and the weights after, then runs SB3's ``DQN.train`` in SB3's own
interpreter from those weights on those minibatches (its replay buffer's ``sample`` hands
them over in order), and compares the losses step by step and the weights at the end.

    JAX_PLATFORMS=cpu python benchmarks/archive/dqn_sb3_step.py \
        --sb3-python PATH/TO/SB3/VENV/python --out benchmarks/archive/dqn_sb3_step.jsonl

SB3 and PyTorch are not Ajax dependencies: they live in an interpreter of their own (any
with ``stable-baselines3``, ``gymnasium`` and ``torch``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

# Archived: records.py, which this script imports, is one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from records import emit

SB3_SIDE = r"""
import sys
import numpy as np
import torch
import gymnasium as gym
from stable_baselines3 import DQN
from stable_baselines3.common.logger import configure
from stable_baselines3.common.type_aliases import ReplayBufferSamples

data = np.load(sys.argv[1])
torch.set_num_threads(1)
model = DQN(
    "MlpPolicy", gym.make("CartPole-v1"), learning_rate=2.3e-3, batch_size=64,
    gamma=0.99, max_grad_norm=10, policy_kwargs=dict(net_arch=[256, 256]), device="cpu",
)
model.set_logger(configure(None, []))
def load(net):
    layers = [m for m in net.q_net if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for i, layer in enumerate(layers):
            layer.weight.copy_(torch.from_numpy(data[f"kernel_{i}"].T))
            layer.bias.copy_(torch.from_numpy(data[f"bias_{i}"]))
    return layers
load(model.policy.q_net)
load(model.policy.q_net_target)
batches = iter(range(data["obs"].shape[0]))
def sample(batch_size, env=None):
    i = next(batches)
    t = lambda x: torch.from_numpy(np.ascontiguousarray(x))
    return ReplayBufferSamples(
        observations=t(data["obs"][i]),
        actions=t(data["action"][i][:, None].astype(np.int64)),
        next_observations=t(data["next_obs"][i]),
        dones=t(data["terminated"][i][:, None].astype(np.float32)),
        rewards=t(data["reward"][i][:, None].astype(np.float32)),
    )
model.replay_buffer.sample = sample
losses = []
original = torch.nn.functional.smooth_l1_loss
def recorded(*args, **kwargs):
    loss = original(*args, **kwargs)
    losses.append(float(loss.detach()))
    return loss
torch.nn.functional.smooth_l1_loss = recorded
import stable_baselines3.dqn.dqn as dqn_module
dqn_module.F.smooth_l1_loss = recorded
model.train(gradient_steps=data["obs"].shape[0], batch_size=64)
layers = [m for m in model.policy.q_net.q_net if isinstance(m, torch.nn.Linear)]
out = {"losses": np.asarray(losses)}
for i, layer in enumerate(layers):
    out[f"kernel_{i}"] = layer.weight.detach().numpy().T
    out[f"bias_{i}"] = layer.bias.detach().numpy()
np.savez(sys.argv[2], **out)
"""


def ajax_side(path: Path) -> dict[str, np.ndarray]:
    """Ajax's warm-up and first update phase; writes what SB3 needs to ``path`` and returns
    Ajax's losses and final weights."""
    import jax

    from ajax import DQN
    from ajax.run.plan import seed_array
    from ajax.run.program import init_program

    agent = DQN(env_id="CartPole-v1", double_dqn=False, n_step=1, anneal_lr=False)
    c = agent.config
    env = agent.env_copies(agent.n_envs)
    state = jax.tree.map(lambda x: x[0], init_program(agent, env, 100)(seed_array([0])))
    warmup = jax.jit(lambda s: agent.warmup(s, env)[0])
    for _ in range(-(-c.learning_starts // agent.steps_per_iteration)):
        state = warmup(state)
    _, *keys = jax.random.split(state.key, c.gradient_steps + 1)
    batches = [state.buffer.sample_sequences(k, c.batch_size, c.n_step, agent.n_envs) for k in keys]
    after, _ = jax.jit(agent._update)(state)
    losses = []
    params = state.params
    opt_state = state.opt_state
    for batch in batches:
        (loss, _), grads = jax.value_and_grad(agent._loss, has_aux=True)(
            params, state.params, batch
        )
        direction, opt_state = agent._optimizer.update(grads, opt_state, params)
        params = jax.tree.map(lambda p, d: p - c.learning_rate * d, params, direction)
        losses.append(float(loss))

    def layers(tree):
        dense = [tree["params"][f"Dense_{i}"] for i in range(len(c.hidden_sizes) + 1)]
        return {
            f"{kind}_{i}": np.asarray(d[kind])
            for i, d in enumerate(dense)
            for kind in ("kernel", "bias")
        }

    np.savez(
        path,
        obs=np.stack([np.asarray(b["obs"][:, 0]) for b in batches]),
        action=np.stack([np.asarray(b["action"][:, 0]) for b in batches]),
        reward=np.stack([np.asarray(b["reward"][:, 0]) for b in batches]),
        terminated=np.stack([np.asarray(b["terminated"][:, 0]) for b in batches]),
        next_obs=np.stack([np.asarray(b["next_obs"][:, 0]) for b in batches]),
        **layers(state.params),
    )
    replayed = layers(params)
    final = layers(after.params)
    gap = max(float(np.max(np.abs(replayed[k] - final[k]))) for k in final)
    return {"losses": np.asarray(losses), "weights": final, "replay_gap": gap}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sb3-python", required=True, help="an interpreter with SB3 and torch")
    parser.add_argument("--out", default=None, help="JSON-lines file to append the summary to")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        given, returned = Path(tmp) / "ajax.npz", Path(tmp) / "sb3.npz"
        ours = ajax_side(given)
        subprocess.run([args.sb3_python, "-c", SB3_SIDE, given, returned], check=True)
        theirs = dict(np.load(returned))
    loss_gap = np.abs(ours["losses"] - theirs["losses"]) / np.abs(theirs["losses"])
    weight_gap = {
        k: float(np.max(np.abs(ours["weights"][k] - theirs[k])) / np.max(np.abs(theirs[k])))
        for k in ours["weights"]
    }
    emit(
        {
            "date": datetime.now(UTC).date().isoformat(),
            "steps": len(ours["losses"]),
            "ajax_first_losses": ours["losses"][:3].tolist(),
            "sb3_first_losses": theirs["losses"][:3].tolist(),
            "ajax_last_losses": ours["losses"][-3:].tolist(),
            "sb3_last_losses": theirs["losses"][-3:].tolist(),
            "max_relative_loss_gap": float(loss_gap.max()),
            "max_relative_weight_gap": weight_gap,
            "ajax_update_vs_replayed_batches": ours["replay_gap"],
        },
        args.out,
    )


if __name__ == "__main__":
    sys.exit(main())
