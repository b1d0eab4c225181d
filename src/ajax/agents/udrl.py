"""Upside-Down Reinforcement Learning (Srivastava et al. 2019, "Training Agents using
Upside-Down Reinforcement Learning", arXiv:1912.02877).

A behaviour function ``pi(a | s, c)`` maps a state and a command ``c = (desired return,
desired horizon)`` to an action, and is trained by supervised learning alone: the store keeps
the best episodes seen (by return), and each update draws segments ``[t1, t2)`` of stored
episodes and raises the log-likelihood of the action taken at ``t1`` under the command the
segment fulfilled, in hindsight: its return and its length. ``t2`` is any later step, as
BY571 samples; the paper's trailing segments (``t2`` the episode's end, section 2.3.3) are
``trailing_segments=True``. On CartPole they tie short horizons to the steps before a fall,
so a command whose horizon has run down asks for a fall; with any segment UDRL learnt four
times faster (docs/agents/udrl.md).

Acting carries the command. Each episode starts from an exploratory command built from the
``last_few`` best stored episodes: their mean length as the horizon, and a return drawn
uniformly from ``[M, M + S]`` (their returns' mean and standard deviation; section 2.3.4).
After each step the command spends what was earned: ``d_r <- d_r - r``, ``d_h <- max(d_h - 1,
1)`` (Algorithm 2). Evaluation starts from ``(M, mean length)``, acts greedily, and updates the
command the same way (section 2.3.6 evaluates from ``M`` too).

The command enters the network as in the paper (section 3.2): scaled, through a sigmoid
layer, and multiplied elementwise with the sigmoid embedding of the observation, followed by
ReLU layers. Each iteration takes ``n_steps`` in each copy, offers every finished episode to
the store, then makes ``n_updates`` updates; the iterations that start before
``learning_starts`` steps act uniformly at random (the paper's warm-up episodes) and compute
no update (:meth:`warmup`).

The paper reports only the ranges it searched (appendix, LunarLander); the defaults are
within them and follow BY571/Upside-Down-Reinforcement-Learning's CartPole settings (batches
of 256, Adam at 1e-3, command scales 0.02, 100 updates per iteration, about 50 random warm-up
episodes, a store of 700 episodes and the best 50 for commands, and segments to any later step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax import struct

from ajax._xla import tuned_optimizer
from ajax.acting import (
    EnvCursor,
    PolicyFn,
    Transition,
    episode_metrics,
    rollout,
    uniform_action,
)
from ajax.agents.base import Agent, hyperparameter
from ajax.buffers import Episodes, EpisodeStore
from ajax.envs import Discrete, Env
from ajax.nn import MLP, Categorical, dense
from ajax.updates import optimizer_step

REFERENCE = "BY571 CartPole; within the paper's ranges"


@dataclass(frozen=True)
class UDRLConfig:
    """UDRL's hyperparameters."""

    n_steps: int = hyperparameter(32, "steps per copy per iteration; Ajax's.", low=1)
    n_updates: int = hyperparameter(
        100, f"updates per iteration (n_updates_per_iter); {REFERENCE}.", low=1
    )
    batch_size: int = hyperparameter(256, f"(state, command) pairs per update; {REFERENCE}.", low=1)
    learning_rate: float = hyperparameter(
        1e-3, f"Adam step size; {REFERENCE}.", low=0.0, low_open=True, batchable=True
    )
    store_size: int = hyperparameter(700, f"best episodes kept (replay_size); {REFERENCE}.", low=1)
    last_few: int = hyperparameter(
        50, f"best episodes the exploratory command comes from; {REFERENCE}.", low=1
    )
    learning_starts: int = hyperparameter(
        1_000,
        "steps of uniformly random actions before training (about 50 CartPole episodes, "
        f"BY571's n_warm_up_episodes); {REFERENCE}.",
        low=0,
    )
    return_scale: float = hyperparameter(
        0.02,
        f"factor on the desired return at the network's input; {REFERENCE}.",
        low=0.0,
        batchable=True,
    )
    horizon_scale: float = hyperparameter(
        0.02,
        f"factor on the desired horizon at the network's input; {REFERENCE}.",
        low=0.0,
        batchable=True,
    )
    trailing_segments: bool = hyperparameter(
        False,
        "True: hindsight commands only to the episode's end (trailing segments, paper sec. "
        "2.3.3); False: to any later step, as BY571 samples (docs/agents/udrl.md).",
    )
    hidden_sizes: tuple[int, ...] = hyperparameter(
        (64, 64, 64), f"embedding width, then ReLU layers; {REFERENCE}."
    )


@struct.dataclass
class UDRLState:
    params: dict[str, Any]
    opt_state: optax.OptState
    cursor: EnvCursor
    store: EpisodeStore
    #: The episode each copy is in: its steps so far, its length so far and its return so far.
    recording: Episodes
    key: jax.Array
    steps: jax.Array


class _Behaviour(nn.Module):
    """``pi(a | s, c)``: the observation's and the command's sigmoid embeddings multiplied
    elementwise (the paper's section 3.2), then ReLU layers, then the action logits."""

    hidden_sizes: tuple[int, ...]
    n_actions: int

    @nn.compact
    def __call__(self, obs: jax.Array, command: jax.Array) -> Categorical:
        width = self.hidden_sizes[0]
        state = nn.sigmoid(dense(width)(obs))
        gate = nn.sigmoid(dense(width)(command))
        mlp = MLP(self.hidden_sizes[1:], self.n_actions, "relu", weight_init="lecun")
        return Categorical(mlp(state * gate))


def command_targets(rewards: jax.Array, length: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The hindsight command at every step of one episode ``[max_length]`` of ``length``
    steps: the return from each step to the end, and the steps left (padding gets 0)."""
    t = jnp.arange(rewards.shape[0])
    inside = t < length
    rewards = jnp.where(inside, rewards, 0.0)
    to_go = jnp.cumsum(rewards[::-1])[::-1]
    return jnp.where(inside, to_go, 0.0), jnp.where(inside, length - t, 0)


class UDRL(Agent):
    """Upside-Down Reinforcement Learning for discrete actions."""

    Config = UDRLConfig
    action_spaces = (Discrete,)
    default_n_envs = 16

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        c = self.config
        self._require_at_most(
            "last_few", "store_size", "the exploratory command comes from the best stored episodes"
        )
        if not c.hidden_sizes:
            raise ValueError("hidden_sizes needs at least the embedding width, e.g. (64, 64).")
        self.network = _Behaviour(c.hidden_sizes, self.env.action_space.n)
        self._optimizer = tuned_optimizer(self, optax.adam(c.learning_rate))
        self._max_length = self.env.max_episode_steps

    @property
    def steps_per_iteration(self) -> int:
        return self.n_envs * self.config.n_steps

    # The command.

    def _scaled(self, command: jax.Array) -> jax.Array:
        return command * jnp.asarray([self.config.return_scale, self.config.horizon_scale])

    def _behaviour_at(self, params: dict[str, Any], obs: jax.Array, command: jax.Array):
        return self.network.apply(params["behaviour"], self._flat(obs), self._scaled(command))

    def initial_carry(self, params: dict[str, Any], n: int) -> jax.Array:
        """``[n, 2]``: the mean return and mean length of the best stored episodes."""
        command = params["command"]
        return jnp.broadcast_to(jnp.stack([command["return"], command["horizon"]]), (n, 2))

    def _exploratory(self, params: dict[str, Any], key: jax.Array, n: int) -> jax.Array:
        """``[n, 2]``: returns drawn from ``[M, M + S]``, the mean length as the horizon."""
        command = params["command"]
        spread = jax.random.uniform(key, (n,)) * command["return_std"]
        desired = command["return"] + spread
        return jnp.stack([desired, jnp.broadcast_to(command["horizon"], (n,))], axis=-1)

    def after_step(self, params: Any, carry: jax.Array, reward: jax.Array) -> jax.Array:
        """The command once ``reward`` is earned: ``d_r - r`` and ``max(d_h - 1, 1)``."""
        return jnp.stack([carry[:, 0] - reward, jnp.maximum(carry[:, 1] - 1.0, 1.0)], axis=-1)

    def act(self, params, obs, carry, key, deterministic):
        dist = self._behaviour_at(params, obs, carry)
        action = dist.mode() if deterministic else dist.sample(key)
        return self._env_action(action, obs), carry

    @staticmethod
    def _command_statistics(store: EpisodeStore, last_few: int) -> dict[str, jax.Array]:
        best = store.best(last_few)
        stored = jnp.isfinite(best.returns)
        count = jnp.maximum(stored.sum(), 1)
        returns = jnp.where(stored, best.returns, 0.0)
        mean = returns.sum() / count
        std = jnp.sqrt(jnp.where(stored, (returns - mean) ** 2, 0.0).sum() / count)
        horizon = jnp.where(stored, best.lengths, 0).sum() / count
        return {"return": mean, "return_std": std, "horizon": jnp.maximum(horizon, 1.0)}

    # Storage.

    def _record(
        self, store: EpisodeStore, recording: Episodes, steps: Transition
    ) -> tuple[EpisodeStore, Episodes]:
        """Write one step of every copy into its episode; offer the episodes that ended to
        the store, with their hindsight returns to go, and start new ones."""
        copies = jnp.arange(self.n_envs)
        t = jnp.minimum(recording.lengths, self._max_length - 1)
        written = {
            "obs": recording.steps["obs"].at[copies, t].set(steps.obs),
            "action": recording.steps["action"].at[copies, t].set(steps.action),
            "reward": recording.steps["reward"].at[copies, t].set(steps.reward),
        }
        lengths = recording.lengths + 1
        returns = recording.returns + steps.reward
        to_go, _ = jax.vmap(command_targets)(written["reward"], lengths)
        finished = Episodes(
            {"obs": written["obs"], "action": written["action"], "return_to_go": to_go},
            lengths,
            jnp.where(steps.done, returns, -jnp.inf),
        )
        store = store.add(finished)
        recording = Episodes(
            written, jnp.where(steps.done, 0, lengths), jnp.where(steps.done, 0.0, returns)
        )
        return store, recording

    # Learning.

    def hindsight(self, store: EpisodeStore, key: jax.Array) -> tuple[Any, jax.Array]:
        """A batch of stored steps and their hindsight commands ``[batch, 2]``: the return
        and the steps from each step to the episode's end (trailing segments), or to a step
        drawn after it (any segment)."""
        if self.config.trailing_segments:
            sampled, t, length = store.sample_steps(key, self.config.batch_size)
            horizon = length - t
            desired = sampled["return_to_go"]
        else:
            sampled, end, horizon, trailing = store.sample_segments(key, self.config.batch_size)
            desired = sampled["return_to_go"] - jnp.where(trailing, 0.0, end["return_to_go"])
        return sampled, jnp.stack([desired, horizon.astype(jnp.float32)], axis=-1)

    def _loss(self, params: dict[str, Any], store: EpisodeStore, key: jax.Array):
        """Minus the log-likelihood of stored actions under their hindsight commands."""
        sampled, command = self.hindsight(store, key)
        dist = self._behaviour_at(params, sampled["obs"], command)
        log_prob = dist.log_prob(sampled["action"])
        return -log_prob.mean(), dist.entropy().mean()

    def _update(self, state: UDRLState, key: jax.Array):
        def step(carry, key):
            behaviour, opt_state = carry
            (loss, entropy), grads = jax.value_and_grad(
                lambda p: self._loss({"behaviour": p}, state.store, key), has_aux=True
            )(behaviour)
            return optimizer_step(self._optimizer, grads, opt_state, behaviour), (loss, entropy)

        keys = jax.random.split(key, self.config.n_updates)
        (behaviour, opt_state), (loss, entropy) = jax.lax.scan(
            step, (state.params["behaviour"], state.opt_state), keys
        )
        return behaviour, opt_state, {"loss": loss.mean(), "entropy": entropy.mean()}

    # The contract.

    def init(self, key: jax.Array, env: Env, total_iterations: int) -> UDRLState:
        def init_params(params_key, obs):
            behaviour = self.network.init(params_key, self._flat(obs), jnp.zeros((len(obs), 2)))
            command = {"return": 0.0, "return_std": 0.0, "horizon": 1.0}
            return {
                "behaviour": behaviour,
                "command": jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), command),
            }

        params, cursor, key = self._start(key, env, init_params)
        step = {"obs": cursor.obs[0], "action": jnp.zeros((), jnp.int32)}
        stored = step | {"return_to_go": jnp.zeros(())}
        store = EpisodeStore.create(stored, self.config.store_size, self._max_length)
        recorded = step | {"reward": jnp.zeros(())}
        empty = EpisodeStore.create(recorded, self.n_envs, self._max_length).episodes
        return UDRLState(
            params=params,
            opt_state=self._optimizer.init(params["behaviour"]),
            cursor=cursor,
            store=store,
            recording=empty.replace(returns=jnp.zeros(self.n_envs)),
            key=key,
            steps=jnp.zeros((), jnp.int32),
        )

    @property
    def warmup_iterations(self) -> int:
        """The iterations that start before ``learning_starts`` steps: random, untrained.
        Rounded up where the replay agents round down: their first learning iteration acts
        at random step by step until ``learning_starts`` (as SB3's), while UDRL's acts on
        whole iterations of exploratory commands, so rounding up keeps every one of the first
        ``learning_starts`` steps uniform, as the paper's warm-up episodes are."""
        return -(-self.config.learning_starts // self.steps_per_iteration)

    def _collect(
        self, state: UDRLState, env: Env, policy_fn: PolicyFn
    ) -> tuple[UDRLState, dict[str, jax.Array]]:
        """``n_steps`` of every copy under exploratory commands, their finished episodes
        offered to the store, and the commands' statistics taken from it again."""
        c = self.config
        key, command_key, rollout_key = jax.random.split(state.key, 3)
        cursor, steps, _ = rollout(
            env,
            policy_fn,
            state.params,
            state.cursor,
            rollout_key,
            c.n_steps,
            self._exploratory(state.params, command_key, self.n_envs),
            lambda carry, reward: self.after_step(state.params, carry, reward),
        )

        def record(carry, step):
            return self._record(*carry, step), None

        (store, recording), _ = jax.lax.scan(record, (state.store, state.recording), steps)
        command = self._command_statistics(store, c.last_few)
        state = state.replace(
            params=state.params | {"command": command},
            store=store,
            recording=recording,
            cursor=cursor,
            key=key,
            steps=state.steps + self.steps_per_iteration,
        )
        metrics = {f"command_{name}": value for name, value in command.items()}
        return state, metrics | {"stored_episodes": store.size} | episode_metrics(steps)

    def warmup(self, state: UDRLState, env: Env) -> tuple[UDRLState, dict[str, jax.Array]]:
        """Uniformly random actions (the paper's warm-up episodes), stored; no training."""

        def uniform(params, obs, carry, key):
            return uniform_action(self.env.action_space, key, obs.shape[:1]), carry, ()

        return self._collect(state, env, uniform)

    def iteration(self, state: UDRLState, env: Env) -> tuple[UDRLState, dict[str, jax.Array]]:
        def explore(params, obs, carry, key):
            action, carry = self.act(params, obs, carry, key, deterministic=False)
            return action, carry, ()

        state, metrics = self._collect(state, env, explore)
        key, update_key = jax.random.split(state.key)
        behaviour, opt_state, update_metrics = self._update(state, update_key)
        state = state.replace(
            params=state.params | {"behaviour": behaviour}, opt_state=opt_state, key=key
        )
        return state, metrics | update_metrics
