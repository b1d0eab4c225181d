"""DQN on CartPole-v1: does a configuration hold its result, and how do its policies fail?

Trains DQN with the given settings over several seeds in one vmapped run, evaluating every
``--log-frequency`` steps, then runs each seed's final greedy policy for ``--episodes`` fresh
episodes on gymnax's CartPole-v1 and counts how the failed ones ended: the cart out of
bounds, or the pole past its angle. Prints one JSON line (appended to ``--out``), with the
mean of the last three evaluations per half of the seeds. docs/agents/dqn.md quotes these.

    JAX_PLATFORMS=cpu python benchmarks/archive/dqn_cartpole.py --seeds 0 1 2 3 4 5 6 7 \\
        --settings '{"n_step": 1, "double_dqn": false, "anneal_lr": false}' \\
        --out benchmarks/archive/dqn_cartpole.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

# Archived: records.py, which this script imports, is one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
from records import emit

from ajax import DQN, LoggingConfig

X_LIMIT = 2.4


def final_policy_episodes(agent: DQN, params, n_episodes: int):
    """Each seed's greedy policy on fresh episodes: lengths and where each one ended."""
    env, env_params = gymnax.make("CartPole-v1")
    horizon = int(env_params.max_steps_in_episode)

    def episode(seed_params, key):
        obs, state = env.reset_env(key, env_params)

        def step(carry, _):
            obs, state, alive, length = carry
            action = jnp.argmax(agent.q_values(seed_params, obs[None])[0])
            obs, next_state, _, terminated, _ = env.step_env(key, state, action, env_params)
            state = jax.tree.map(lambda a, b: jnp.where(alive, a, b), next_state, state)
            return (obs, state, alive & ~terminated, length + alive), None

        carry = (obs, state, jnp.asarray(True), jnp.asarray(0))
        (_, state, _, length), _ = jax.lax.scan(step, carry, None, length=horizon)
        return length, state.x

    def per_seed(seed_params, key):
        return jax.vmap(lambda k: episode(seed_params, k))(jax.random.split(key, n_episodes))

    n_seeds = jax.tree.leaves(params)[0].shape[0]
    keys = jax.random.split(jax.random.PRNGKey(12_345), n_seeds)
    lengths, x = jax.jit(jax.vmap(per_seed))(params, keys)
    return np.asarray(lengths), np.asarray(x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    parser.add_argument("--settings", default="{}", help="DQN keyword arguments, as JSON")
    parser.add_argument("--n-timesteps", type=int, default=100_000)
    parser.add_argument("--log-frequency", type=int, default=5_000)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    settings = json.loads(args.settings)
    started = time.perf_counter()
    agent = DQN(env_id="CartPole-v1", **settings)
    result = agent.train(
        seed=args.seeds,
        n_timesteps=args.n_timesteps,
        num_episode_test=10,
        logging_config=LoggingConfig(
            log_frequency=args.log_frequency, log_dir=tempfile.mkdtemp(prefix="dqn-cartpole-")
        ),
    )
    returns = result.evaluations["episode_return"]
    lengths, x = final_policy_episodes(agent, result.state.params, args.episodes)
    failed = lengths < 500
    half = len(args.seeds) // 2
    emit(
        {
            "settings": settings,
            "seeds": args.seeds,
            "n_timesteps": args.n_timesteps,
            "timesteps": result.evaluations["timestep"].tolist(),
            "per_seed": np.round(returns, 1).tolist(),
            "mean_over_seeds": np.round(returns.mean(0), 1).tolist(),
            "last3_first_half": round(float(returns[:half, -3:].mean()), 2),
            "last3_second_half": round(float(returns[half:, -3:].mean()), 2),
            "final_policy_mean_length": np.round(lengths.mean(1), 1).tolist(),
            "final_policy_failures": int(failed.sum()),
            "failures_by_cart": int((failed & (np.abs(x) > X_LIMIT)).sum()),
            "wall_s": round(time.perf_counter() - started, 1),
        },
        args.out,
    )


if __name__ == "__main__":
    main()
