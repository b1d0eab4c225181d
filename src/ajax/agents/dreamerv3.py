"""DreamerV3 (Hafner, Pasukonis, Ba and Lillicrap 2023, "Mastering Diverse Domains through World
Models", arXiv:2301.04104; reference danijar/dreamerv3).

A world model learns a recurrent state-space model (RSSM) of the task from replayed sequences:
a block GRU carries the deterministic state ``h``, and ``stoch`` categorical latents of
``classes`` classes (1% uniform mix, straight-through samples) carry the stochastic one ``z``.
The posterior sees the observation, the prior only ``h``. The model minimises the symlog
squared error of the decoded observation, the two-hot cross-entropy of the reward, the binary
cross-entropy of the continue flag (``gamma`` where the episode goes on, 0 where it
terminated), and the balanced KL with free bits ``max(1, KL[sg(q)||p]) + 0.1 max(1,
KL[q||sg(p)])``. An actor and a two-hot critic then learn from 15-step rollouts of the prior
started at every replayed latent: the critic regresses onto lambda-returns, regularised towards
a slow (EMA) copy of itself, and the actor maximises the advantages divided by the returns'
percentile spread (REINFORCE, for discrete and continuous actions alike) plus an entropy bonus.
A replay loss also fits the critic to lambda-returns along the replayed sequence itself,
bootstrapped from the imagined returns. One LaProp optimiser trains everything on the sum.

**Rows and sequences.** The store keeps one-step transitions (:class:`ajax.acting.Transition`):
a row's ``obs`` is the observation acted at (post-reset at an episode's start), its
``next_obs`` the true next one (the final one where the episode ended). An update samples
``batch_length`` consecutive rows of one copy and unrolls the RSSM once per row: the step of
row ``t`` goes from the latent acted at, with the row's action, into the posterior of its
``next_obs``, which is trained with the row's reward and continue target. So every final
observation is seen with its own target (0 where terminated, ``gamma`` where truncated: a
truncation is no termination). The latent acted at is the previous step's, except where the
row starts an episode (the previous row ended one: DreamerV3's ``is_first`` taken from the
previous row) and at the sequence's first row: there it is the posterior of the row's ``obs``
from the zero state, which is how acting begins an episode. These reset latents need no
recurrence, so they are computed for every row at once and kept only where needed; each
sequence thus starts from the zero state, and the reference's replay context (stored latents
to resume from) is not reproduced. Imagination starts from the latents acted at.

**Schedule.** ``train_ratio`` (replayed steps per environment step, the reference's
``run.train_ratio``) sets the replay schedule: an iteration is one step of every copy and a
whole number of updates of ``batch_size * batch_length`` replayed steps, or a whole number of
steps of every copy and one update. Until ``learning_starts`` steps actions are uniform and no
update is computed.

Where this differs from the reference (docs/agents/dreamerv3.md lists them): the MLPs use
LayerNorm (the paper's) where the reference uses RMSNorm, with orthogonal weights (gain 1; the
output layers' gains are the reference's ``outscale``); observations are flattened into the
MLP encoder (no CNN); evaluation acts with the posterior's and the policy's modes; the
replay loss bootstraps a truncated episode from the critic rather than from an imagined
return; the discrete actor mixes in 1% uniform as the paper says (the reference's
categorical head leaves it out); the warm-up acts uniformly, where the reference acts with its
untrained actor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from ajax.acting import EnvCursor, PolicyFn
from ajax.agents.base import hyperparameter
from ajax.agents.replay import ReplayAgent
from ajax.buffers import ReplayBuffer
from ajax.envs import Box, Discrete, Env
from ajax.nn import MLP, Categorical, Normal
from ajax.nn.latents import balanced_kl, straight_through_sample, unimix_logits
from ajax.nn.recurrent import BlockGRU
from ajax.nn.twohot import TwoHotBins, symexp_bins, symlog
from ajax.returns import PercentileScale, lambda_returns
from ajax.updates import laprop, optimizer_step, soft_update

#: The continuous actor's standard deviation lies in [MIN_STD, MAX_STD] (the reference's
#: ``policy.minstd`` and ``policy.maxstd``).
MIN_STD, MAX_STD = 0.1, 1.0
#: The output layers' initial gains (the reference's ``outscale``): the reward and value
#: heads start predicting exactly 0, the actor near uniform.
REWARD_GAIN, VALUE_GAIN, ACTOR_GAIN = 0.0, 0.0, 0.01


@dataclass(frozen=True)
class Preset:
    """A model size: the recurrent state's width (``deter``), the RSSM's hidden width, the
    categorical latents (``stoch`` variables of ``classes`` classes), the MLPs' width
    (``units``) and depth (``layers``: encoder, decoder, actor and critic), the GRU's blocks
    and the two-hot bins."""

    deter: int
    hidden: int
    classes: int
    units: int
    stoch: int = 32
    blocks: int = 8
    bins: int = 255
    layers: int = 3


#: The reference's ``configs.yaml`` size blocks (``size1m`` ... ``size400m``: ``rssm.deter``,
#: ``rssm.hidden``, ``rssm.classes``, ``units``; the rest its ``defaults``) and its ``debug``
#: block's network sizes, but for its 5 bins (spaced by symexp over [-20, 20], they leave
#: nothing between 0 and 2.2e4, so no reward of order one can be fitted; 255 here). Its
#: batch_size 8, batch_length 10 and train_ratio 8 are separate hyperparameters here. The
#: blocks' CNN ``depth`` has no counterpart: observations are flattened into the MLP encoder.
PRESETS: dict[str, Preset] = {
    "debug": Preset(deter=8, hidden=3, classes=4, units=8, stoch=2, blocks=4, layers=1),
    "1m": Preset(deter=512, hidden=64, classes=4, units=64),
    "12m": Preset(deter=2048, hidden=256, classes=16, units=256),
    "25m": Preset(deter=3072, hidden=384, classes=24, units=384),
    "50m": Preset(deter=4096, hidden=512, classes=32, units=512),
    "100m": Preset(deter=6144, hidden=768, classes=48, units=768),
    "200m": Preset(deter=8192, hidden=1024, classes=64, units=1024),
    "400m": Preset(deter=12288, hidden=1536, classes=96, units=1536),
}


@dataclass(frozen=True)
class DreamerV3Config:
    """DreamerV3's hyperparameters; defaults are the reference's ``configs.yaml``
    (``defaults``) unless a field says otherwise."""

    size: str = hyperparameter(
        "1m",
        "model size, a key of PRESETS (the reference's size1m ... size400m, and debug); 1m "
        "is the reference's size for proprioceptive control (dmc_proprio).",
    )
    learning_rate: float = hyperparameter(
        4e-5,
        "LaProp step size of every network; reference opt.lr.",
        low=0.0,
        low_open=True,
        batchable=True,
    )
    agc: float = hyperparameter(
        0.3,
        "adaptive gradient clip: each tensor's update at most this times its norm; "
        "reference opt.agc.",
        low=0.0,
        low_open=True,
        batchable=True,
    )
    lr_warmup: int = hyperparameter(
        1_000, "updates over which the step size ramps up from 0; reference opt.warmup.", low=0
    )
    buffer_size: int = hyperparameter(
        1_000_000,
        "replay capacity in steps per seed; the paper's replay capacity (the reference's "
        "replay.size is 5e6).",
        low=1,
    )
    learning_starts: int = hyperparameter(
        1_024,
        "steps of uniform random actions before updates begin; the reference trains once "
        "its replay holds batch_size x batch_length steps (embodied/run/train.py).",
        low=0,
    )
    batch_size: int = hyperparameter(16, "sequences per update; reference batch_size.", low=1)
    batch_length: int = hyperparameter(64, "steps per sequence; reference batch_length.", low=2)
    train_ratio: float = hyperparameter(
        32.0,
        "replayed steps per environment step; reference run.train_ratio.",
        low=0.0,
        low_open=True,
    )
    imagination_horizon: int = hyperparameter(
        15, "steps of each imagined rollout; reference imag_length.", low=1
    )
    gamma: float = hyperparameter(
        1 - 1 / 333,
        "discount, 1 - 1/horizon; reference horizon 333.",
        low=0.0,
        high=1.0,
        batchable=True,
    )
    lam: float = hyperparameter(
        0.95,
        "lambda of the lambda-returns; reference imag_loss.lam.",
        low=0.0,
        high=1.0,
        batchable=True,
    )
    actor_entropy: float = hyperparameter(
        3e-4,
        "weight of the actor's entropy bonus; reference imag_loss.actent.",
        low=0.0,
        batchable=True,
    )
    slow_critic_rate: float = hyperparameter(
        0.02,
        "rate at which the slow critic follows the critic each update; reference slowvalue.rate.",
        low=0.0,
        high=1.0,
        batchable=True,
    )
    repval_scale: float = hyperparameter(
        0.3,
        "weight of the critic's loss on replayed sequences; reference loss_scales.repval.",
        low=0.0,
        batchable=True,
    )
    representation_scale: float = hyperparameter(
        0.1,
        "weight of the KL that pulls the posterior towards the prior (the prior's own has "
        "weight 1); reference loss_scales.rep.",
        low=0.0,
        batchable=True,
    )
    free_nats: float = hyperparameter(
        1.0,
        "KL below which the KL losses are flat; reference rssm.free_nats.",
        low=0.0,
        batchable=True,
    )
    unimix: float = hyperparameter(
        0.01,
        "uniform mixed into the latents' and the discrete actor's probabilities; reference "
        "rssm.unimix and policy.unimix.",
        low=0.0,
        high=1.0,
        high_open=True,
    )


def replay_schedule(train_ratio: float, replayed: int, n_envs: int) -> tuple[int, int] | None:
    """The iteration that replays ``train_ratio`` steps per environment step, each update
    replaying ``replayed`` steps, on ``n_envs`` copies: ``(steps per copy, updates)`` with one
    of them 1, or None where no such iteration does it exactly."""
    updates = train_ratio * n_envs / replayed
    if updates >= 1 and math.isclose(updates, round(updates)):
        return 1, round(updates)
    if updates < 1 and math.isclose(1 / updates, round(1 / updates)):
        return round(1 / updates), 1
    return None


def _nearest_ratios(train_ratio: float, replayed: int, n_envs: int) -> tuple[float, float]:
    """The workable ratios just below and just above ``train_ratio``."""
    updates = train_ratio * n_envs / replayed
    if updates >= 1:
        low, high = math.floor(updates), math.ceil(updates)
        return replayed * low / n_envs, replayed * high / n_envs
    steps = 1 / updates
    return replayed / (n_envs * math.ceil(steps)), replayed / (n_envs * math.floor(steps))


def imagined_returns(reward: jax.Array, value: jax.Array, cont: jax.Array, lam: float) -> jax.Array:
    """The lambda-returns of an imagined rollout ``[H + 1, ...]`` (reward, value and continue
    probability predicted at each latent): ``R_t = r_{t+1} + c_{t+1} ((1 - lam) v_{t+1} + lam
    R_{t+1})`` for ``t < H``, with ``R_H = v_H``; ``[H, ...]``. The continue probability
    carries the discount (the reference's ``contdisc``), so it stands for ``gamma (1 -
    terminated)`` in :func:`ajax.returns.lambda_returns`, at a discount of 1."""
    never = jnp.zeros(cont[1:].shape, bool)
    return lambda_returns(reward[1:], value[1:], 1.0 - cont[1:], never, 1.0, lam)


class _Block(nn.Module):
    """Dense, LayerNorm, SiLU: the reference's hidden layer, normalised as the MLPs are, its
    weights drawn as the reference draws them (Flax's default: truncated normal of variance
    1/fan_in)."""

    units: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.silu(nn.LayerNorm()(nn.Dense(self.units)(x)))


def _mlp(hidden: tuple[int, ...], out: int, gain: float = 1.0) -> MLP:
    """The reference's MLP head: SiLU hidden layers with normalisation, a linear output whose
    initial gain is ``gain``."""
    return MLP(hidden, out, "silu", out_gain=gain, layer_norm=True, hidden_gain=1.0)


def features(latent: tuple[jax.Array, jax.Array]) -> jax.Array:
    """What the heads, actor and critic read of a latent ``(deter, stoch)``: both, flat."""
    deter, stoch = latent
    return jnp.concatenate([deter, stoch.reshape(*stoch.shape[:-2], -1)], axis=-1)


class WorldModel(nn.Module):
    """The RSSM with its encoder and heads. Latents are ``(deter [..., deter], stoch [...,
    stoch, classes])``; logits are unimixed log-probabilities ``[..., stoch, classes]``."""

    preset: Preset
    obs_dim: int
    unimix: float

    def setup(self) -> None:
        p = self.preset
        self.encoder = [_Block(p.units) for _ in range(p.layers)]
        self.deter_in, self.stoch_in, self.action_in = (_Block(p.hidden) for _ in range(3))
        self.gru = BlockGRU(p.deter, p.blocks, activation="silu")
        self.posterior_net = _mlp((p.hidden,), p.stoch * p.classes)
        self.prior_net = _mlp((p.hidden, p.hidden), p.stoch * p.classes)
        self.decoder = _mlp((p.units,) * p.layers, self.obs_dim)
        self.reward_head = _mlp((p.units,), p.bins, REWARD_GAIN)
        self.continue_head = _mlp((p.units,), 1)

    def encode(self, obs: jax.Array) -> jax.Array:
        """Tokens of flat observations, symlog-squashed first (the reference's encoder)."""
        x = symlog(obs)
        for block in self.encoder:
            x = block(x)
        return x

    def step(self, deter: jax.Array, stoch: jax.Array, action: jax.Array) -> jax.Array:
        """The next deterministic state from a latent and an encoded action: the deter, stoch
        and action each through a layer, then the block GRU."""
        stoch = stoch.reshape(*stoch.shape[:-2], -1)
        inputs = [self.deter_in(deter), self.stoch_in(stoch), self.action_in(action)]
        return self.gru(deter, jnp.concatenate(inputs, axis=-1))

    def posterior(self, deter: jax.Array, tokens: jax.Array) -> jax.Array:
        return self._logits(self.posterior_net(jnp.concatenate([deter, tokens], axis=-1)))

    def prior(self, deter: jax.Array) -> jax.Array:
        return self._logits(self.prior_net(deter))

    def heads(self, feat: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The decoded observation (in symlog units) and :meth:`predict`'s outputs."""
        return self.decoder(feat), *self.predict(feat)

    def predict(self, feat: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The reward's two-hot logits and the continue flag's logit: what imagination reads."""
        return self.reward_head(feat), self.continue_head(feat)[..., 0]

    def _logits(self, out: jax.Array) -> jax.Array:
        p = self.preset
        return unimix_logits(out.reshape(*out.shape[:-1], p.stoch, p.classes), self.unimix)

    def __call__(self, obs: jax.Array, action: jax.Array) -> Any:
        """Every part once, from the zero state: what ``init`` traces."""
        p = self.preset
        deter = jnp.zeros((*obs.shape[:-1], p.deter))
        deter = self.step(deter, jnp.zeros((*obs.shape[:-1], p.stoch, p.classes)), action)
        logits = self.posterior(deter, self.encode(obs))
        self.prior(deter)
        return self.heads(features((deter, jax.nn.softmax(logits))))


@struct.dataclass
class BoundedNormal(Normal):
    """The reference's bounded normal actor (its mean tanh-squashed, its standard deviation in
    [0.1, 1]), whose samples are clipped into [-1, 1] as the reference's environment wrapper
    clips them."""

    def sample(self, key: jax.Array) -> jax.Array:
        return jnp.clip(super().sample(key), -1.0, 1.0)


@struct.dataclass
class DreamerV3State:
    """The networks (``params``: model, actor, critic), the slow critic, LaProp's state, the
    return scale, the replay buffer, the training copies and the steps taken."""

    params: dict[str, Any]
    slow_critic: Any
    opt_state: Any
    return_scale: PercentileScale
    buffer: ReplayBuffer
    cursor: EnvCursor
    key: jax.Array
    steps: jax.Array


class DreamerV3(ReplayAgent):
    """DreamerV3 for discrete and continuous actions."""

    Config = DreamerV3Config
    action_spaces = (Discrete, Box)
    #: The reference's run.envs.
    default_n_envs = 16

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        c = self.config
        self._require_one_of("size", PRESETS, "DreamerV3 model size")
        replayed = c.batch_size * c.batch_length
        schedule = replay_schedule(c.train_ratio, replayed, self.n_envs)
        if schedule is None:
            low, high = _nearest_ratios(c.train_ratio, replayed, self.n_envs)
            raise ValueError(
                f"train_ratio={c.train_ratio:g} gives no whole schedule with "
                f"batch_size={c.batch_size}, batch_length={c.batch_length} and "
                f"n_envs={self.n_envs}: an iteration is one step of every copy and a whole "
                f"number of updates of {replayed} replayed steps, or a whole number of steps "
                f"of every copy and one update. The nearest ratios that work are {low:g} "
                f"and {high:g}."
            )
        self._copy_steps, self.updates_per_iteration = schedule
        self._require_sequences_at_start(c.batch_length)
        self.preset = PRESETS[c.size]
        p = self.preset
        space = self.env.action_space
        self._discrete = isinstance(space, Discrete)
        self._action_dim = space.n if self._discrete else math.prod(space.shape)
        self.model = WorldModel(p, math.prod(self.env.observation_space.shape), c.unimix)
        actor_out = self._action_dim * (1 if self._discrete else 2)
        self.actor = _mlp((p.units,) * p.layers, actor_out, ACTOR_GAIN)
        self.critic = _mlp((p.units,) * p.layers, p.bins, VALUE_GAIN)
        self._optimizer = laprop(c.learning_rate, agc=c.agc, warmup=c.lr_warmup)

    @property
    def _steps_per_copy(self) -> int:
        return self._copy_steps

    # Networks.

    def _bins(self) -> TwoHotBins:
        return symexp_bins(self.preset.bins)

    def _encode_action(self, action: jax.Array, batch_ndim: int) -> jax.Array:
        """Actions with ``batch_ndim`` batch axes as the RSSM reads them: one-hot, or flat and
        within [-1, 1] (the reference's ``action / max(1, |action|)``, so that imagined
        samples beyond the bounds enter as the environment takes them)."""
        if self._discrete:
            return jax.nn.one_hot(action, self._action_dim)
        return jnp.clip(action.reshape(*action.shape[:batch_ndim], -1), -1.0, 1.0)

    def _actor(self, actor_params: Any, feat: jax.Array) -> Categorical | Normal:
        """The actor's distribution at ``feat``: unimixed categorical, or the bounded normal
        (its samples unclipped, as imagination draws them)."""
        out = self.actor.apply(actor_params, feat)
        if self._discrete:
            return Categorical(unimix_logits(out, self.config.unimix))
        mean, std = jnp.split(out, 2, axis=-1)
        std = (MAX_STD - MIN_STD) * jax.nn.sigmoid(std + 2.0) + MIN_STD
        return Normal(jnp.tanh(mean), jnp.log(std))

    def _value(self, critic_params: Any, feat: jax.Array) -> tuple[jax.Array, jax.Array]:
        """The critic's two-hot logits at ``feat`` and the value they predict."""
        logits = self.critic.apply(critic_params, feat)
        return logits, self._bins().decode(logits)

    def _init_params(self, key: jax.Array, obs: jax.Array) -> dict[str, Any]:
        model_key, actor_key, critic_key = jax.random.split(key, 3)
        obs = self._flat(obs)
        action = jnp.zeros((obs.shape[0], self._action_dim))
        p = self.preset
        feat = jnp.zeros((obs.shape[0], p.deter + p.stoch * p.classes))
        return {
            "model": self.model.init(model_key, obs, action),
            "actor": self.actor.init(actor_key, feat),
            "critic": self.critic.init(critic_key, feat),
        }

    def _model(self, params: dict[str, Any], method: Any, *args: Any) -> Any:
        return self.model.apply(params["model"], *args, method=method)

    def _reset_deter(self, params: dict[str, Any]) -> jax.Array:
        """The deterministic state every episode starts from: the GRU's step from the zero
        latent and action ``[deter]``."""
        p = self.preset
        zero = (jnp.zeros((1, p.deter)), jnp.zeros((1, p.stoch, p.classes)))
        return self._model(params, WorldModel.step, *zero, jnp.zeros((1, self._action_dim)))[0]

    # Acting.

    def initial_carry(self, params: Any, n: int) -> dict[str, jax.Array]:
        """The zero latent and previous action: where every episode starts."""
        p = self.preset
        return {
            "deter": jnp.zeros((n, p.deter)),
            "stoch": jnp.zeros((n, p.stoch, p.classes)),
            "action": jnp.zeros((n, self._action_dim)),
        }

    def _observe(
        self, params: Any, obs: jax.Array, carry: dict[str, jax.Array], key: jax.Array | None
    ) -> tuple[jax.Array, jax.Array]:
        """The posterior latent at ``obs`` after ``carry``: a sample, or the mode for no key."""
        deter = self._model(
            params, WorldModel.step, carry["deter"], carry["stoch"], carry["action"]
        )
        tokens = self._model(params, WorldModel.encode, self._flat(obs))
        logits = self._model(params, WorldModel.posterior, deter, tokens)
        if key is None:
            stoch = jax.nn.one_hot(jnp.argmax(logits, -1), logits.shape[-1])
        else:
            stoch = jax.lax.stop_gradient(straight_through_sample(key, logits))
        return deter, stoch

    def _public(self, dist: Categorical | Normal) -> Categorical | BoundedNormal:
        """The actor's distribution in the agent's action space (continuous samples clipped)."""
        return dist if self._discrete else BoundedNormal(dist.mean, dist.log_std)

    def policy(self, params: dict[str, Any], obs: jax.Array) -> Categorical | BoundedNormal:
        """The actor at the first step of an episode: at the posterior's mode from the initial
        carry, in ``[-1, 1]`` for continuous actions."""
        latent = self._observe(params, obs, self.initial_carry(params, obs.shape[0]), None)
        return self._public(self._actor(params["actor"], features(latent)))

    def value(self, params: dict[str, Any], obs: jax.Array) -> jax.Array:
        """The critic's discounted return at the first step of an episode (the posterior's
        mode from the initial carry)."""
        latent = self._observe(params, obs, self.initial_carry(params, obs.shape[0]), None)
        return self._value(params["critic"], features(latent))[1]

    def _act(
        self, params: Any, obs: jax.Array, carry: dict[str, jax.Array], key: jax.Array, mode: bool
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The action at ``obs`` (flat, in the agent's action space) and the latent it was
        chosen at: modes of both when ``mode``, else samples."""
        latent_key, action_key = jax.random.split(key)
        latent = self._observe(params, obs, carry, None if mode else latent_key)
        dist = self._public(self._actor(params["actor"], features(latent)))
        return (dist.mode() if mode else dist.sample(action_key)), *latent

    def _next_carry(self, deter: jax.Array, stoch: jax.Array, action: jax.Array) -> dict:
        return {"deter": deter, "stoch": stoch, "action": self._encode_action(action, 1)}

    def act(
        self,
        params: dict[str, Any],
        obs: jax.Array,
        carry: dict[str, jax.Array],
        key: jax.Array,
        deterministic: bool,
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        action, deter, stoch = self._act(params, obs, carry, key, deterministic)
        return self._env_action(action, obs), self._next_carry(deter, stoch, action)

    def _explorer_at(self, state: DreamerV3State) -> PolicyFn:
        warming_up = state.steps < self.config.learning_starts

        def policy_fn(params, obs, carry, key):
            act_key, random_key = jax.random.split(key)
            action, deter, stoch = self._act(params, obs, carry, act_key, False)
            action = self._env_action(action, obs)
            action = jnp.where(warming_up, self._uniform_action(random_key, obs), action)
            return action, self._next_carry(deter, stoch, action), ()

        return policy_fn

    # Learning.

    def init(self, key: jax.Array, env: Env, total_iterations: int) -> DreamerV3State:
        params, cursor, key = self._start(key, env, self._init_params)
        space = self.env.action_space
        action = jnp.zeros((), jnp.int32) if self._discrete else jnp.zeros(space.shape)
        return DreamerV3State(
            params=params,
            slow_critic=params["critic"],
            opt_state=self._optimizer.init(params),
            return_scale=PercentileScale.zeros(),
            buffer=ReplayBuffer.for_transitions(
                cursor.obs[0], action, self.config.buffer_size, episode_ends=True
            ),
            cursor=cursor,
            key=key,
            steps=jnp.zeros((), jnp.int32),
        )

    def _observe_sequences(
        self, params: dict[str, Any], batch: dict[str, jax.Array], key: jax.Array
    ) -> dict[str, Any]:
        """The RSSM along replayed rows ``[B, L]`` (the module docstring's mapping): the reset
        latents of every row's ``obs`` with their logits, the latents acted at, and the
        latents of every row's ``next_obs`` with their posterior logits."""
        reset_key, step_key = jax.random.split(key)
        done = jnp.maximum(batch["terminated"], batch["truncated"]) > 0
        first = jnp.concatenate([jnp.ones_like(done[:, :1]), done[:, :-1]], axis=1)
        obs, next_obs = self._flat(batch["obs"]), self._flat(batch["next_obs"])
        reset_deter = jnp.broadcast_to(self._reset_deter(params), (*first.shape, self.preset.deter))
        reset_logits = self._model(
            params, WorldModel.posterior, reset_deter, self._model(params, WorldModel.encode, obs)
        )
        reset = (reset_deter, straight_through_sample(reset_key, reset_logits))
        tokens = self._model(params, WorldModel.encode, next_obs)
        action = self._encode_action(batch["action"], 2)

        def one_row(latent, row):
            is_first, reset_latent, action, tokens, key = row
            start = jax.tree.map(
                lambda r, x: jnp.where(is_first.reshape(-1, *(1,) * (x.ndim - 1)), r, x),
                reset_latent,
                latent,
            )
            deter = self._model(params, WorldModel.step, *start, action)
            logits = self._model(params, WorldModel.posterior, deter, tokens)
            latent = (deter, straight_through_sample(key, logits))
            return latent, (start, latent, logits)

        time_major = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
        rows = jax.tree.map(time_major, (first, reset, action, tokens))
        keys = jax.random.split(step_key, first.shape[1])
        zero = jax.tree.map(lambda x: jnp.zeros_like(x[:, 0]), reset)
        _, out = jax.lax.scan(one_row, zero, (*rows, keys))
        start, latent, logits = jax.tree.map(time_major, out)
        return {
            "first": first,
            "done": done,
            "reset": reset,
            "reset_logits": reset_logits,
            "start": start,
            "latent": latent,
            "logits": logits,
        }

    def _model_loss(
        self, params: dict[str, Any], batch: dict[str, jax.Array], seq: dict[str, Any]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The world model's loss, averaged over the latents of every ``next_obs`` and the
        reset latents in use: each with its observation, reward (0 at a reset, as the
        reference stores it) and continue target."""
        c = self.config
        cat = lambda a, b: jnp.concatenate([a, b], axis=1)  # noqa: E731
        latent = jax.tree.map(cat, seq["latent"], seq["reset"])
        logits = cat(seq["logits"], seq["reset_logits"])
        prior = self._model(params, WorldModel.prior, latent[0])
        obs = cat(self._flat(batch["next_obs"]), self._flat(batch["obs"]))
        reward = cat(batch["reward"], jnp.zeros_like(batch["reward"]))
        # The continue target carries the discount (the reference's contdisc), so that
        # imagination's continue probabilities discount its returns.
        cont = c.gamma * cat(1.0 - batch["terminated"], jnp.ones_like(batch["terminated"]))
        weight = cat(jnp.ones_like(batch["reward"]), seq["first"].astype(jnp.float32))

        decoded, reward_logits, cont_logit = self._model(params, WorldModel.heads, features(latent))
        kl, dyn_rep = balanced_kl(logits, prior, c.free_nats, 1.0, c.representation_scale)
        losses = {
            "decoder_loss": jnp.sum((decoded - symlog(obs)) ** 2, axis=-1),
            "reward_loss": self._bins().loss(reward_logits, reward),
            "continue_loss": -(
                cont * jax.nn.log_sigmoid(cont_logit) + (1 - cont) * jax.nn.log_sigmoid(-cont_logit)
            ),
            "dynamics_kl": dyn_rep[..., 0],
            "representation_kl": dyn_rep[..., 1],
        }
        mean = lambda x: jnp.sum(weight * x) / jnp.sum(weight)  # noqa: E731
        total = sum(losses[k] for k in ("decoder_loss", "reward_loss", "continue_loss")) + kl
        return mean(total), {k: mean(v) for k, v in losses.items()}

    def _imagine(
        self, params: dict[str, Any], start: tuple[jax.Array, jax.Array], key: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``imagination_horizon`` steps of the prior from ``start`` (latents ``[N, ...]``)
        under the actor: the features ``[H, N, F]`` of the latents acted at and the actions
        ``[H, N, ...]`` taken there, and the last latent's features ``[N, F]``, kept apart so
        that the rollout's features are never copied into one array with it."""

        def one_step(latent, key):
            action_key, latent_key = jax.random.split(key)
            feat = features(latent)
            action = self._actor(params["actor"], feat).sample(action_key)
            deter = self._model(params, WorldModel.step, *latent, self._encode_action(action, 1))
            logits = self._model(params, WorldModel.prior, deter)
            return (deter, straight_through_sample(latent_key, logits)), (feat, action)

        keys = jax.random.split(key, self.config.imagination_horizon)
        last, (feats, actions) = jax.lax.scan(one_step, start, keys)
        return feats, actions, features(last)

    def _actor_critic_loss(
        self,
        params: dict[str, Any],
        slow_critic: Any,
        return_scale: PercentileScale,
        start: tuple[jax.Array, jax.Array],
        key: jax.Array,
    ) -> tuple[jax.Array, jax.Array, PercentileScale, dict[str, jax.Array]]:
        """The actor's and the critic's losses on rollouts imagined from ``start`` (latents
        ``[N, ...]``, no gradient: the actor learns by REINFORCE). Returns the loss, each
        start's lambda-return ``[N]``, the return scale updated by this batch, and metrics."""
        c = self.config
        stop = jax.lax.stop_gradient
        feats, actions, last = self._imagine(stop(params), stop(start), key)

        def predicted(feat: jax.Array) -> tuple[jax.Array, jax.Array]:
            reward_logits, cont_logit = self._model(stop(params), WorldModel.predict, feat)
            return self._bins().decode(reward_logits), jax.nn.sigmoid(cont_logit)

        # Reward, continue and value at every latent of the rollout, the last one's appended.
        with_last = lambda rollout, at_last: jnp.concatenate([rollout, at_last[None]])  # noqa: E731
        reward, cont = jax.tree.map(with_last, predicted(feats), predicted(last))
        logits, value = self._value(params["critic"], feats)
        value = stop(with_last(value, self._value(params["critic"], last)[1]))
        slow_value = self._value(slow_critic, feats)[1]
        ret = imagined_returns(reward, value, cont, c.lam)
        return_scale = return_scale.update(ret)
        advantage = (ret - value[:-1]) / return_scale.scale
        # A step's weight is the probability that the rollout is still in its episode there.
        weight = stop(jnp.cumprod(cont, axis=0))[:-1]
        dist = self._actor(params["actor"], feats)
        entropy = dist.entropy()
        actor_loss = -jnp.mean(
            weight * (dist.log_prob(actions) * stop(advantage) + c.actor_entropy * entropy)
        )
        bins = self._bins()
        critic_loss = jnp.mean(weight * (bins.loss(logits, ret) + bins.loss(logits, slow_value)))
        metrics = {
            "actor_loss": actor_loss,
            "critic_loss": critic_loss,
            "entropy": entropy.mean(),
            "imagined_return": ret.mean(),
            "return_scale": return_scale.scale,
        }
        return actor_loss + critic_loss, ret[0], return_scale, metrics

    def _replay_critic_loss(
        self,
        params: dict[str, Any],
        slow_critic: Any,
        batch: dict[str, jax.Array],
        seq: dict[str, Any],
        boot: jax.Array,
    ) -> jax.Array:
        """The critic's loss at the replayed latents acted at (the reference's ``repval``):
        lambda-returns along the rows, bootstrapped from each next latent's imagined return
        ``boot [B, L]``, and from the critic where the row ended an episode. The sequence's
        last row has no next latent acted at, and no target."""
        c = self.config
        done = seq["done"][:, :-1]
        next_value = jax.lax.stop_gradient(
            self._value(params["critic"], features(seq["latent"]))[1]
        )
        next_values = jnp.where(done, next_value[:, :-1], boot[:, 1:])
        time_major = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
        ret = lambda_returns(
            time_major(batch["reward"][:, :-1]),
            time_major(next_values),
            time_major(batch["terminated"][:, :-1]),
            time_major(done),
            c.gamma,
            c.lam,
        )
        # The latents keep their gradient: the reference's replay value loss also trains the
        # representation (repval_grad).
        feat = features(jax.tree.map(lambda x: x[:, :-1], seq["start"]))
        logits = self._value(params["critic"], feat)[0]
        slow_value = self._value(slow_critic, feat)[1]
        bins = self._bins()
        return jnp.mean(bins.loss(logits, time_major(ret)) + bins.loss(logits, slow_value))

    def _loss(
        self,
        params: dict[str, Any],
        slow_critic: Any,
        return_scale: PercentileScale,
        batch: dict[str, jax.Array],
        key: jax.Array,
    ) -> tuple[jax.Array, tuple[PercentileScale, dict[str, jax.Array]]]:
        """Every loss on replayed rows ``[B, L]``, summed with the reference's scales."""
        observe_key, imagine_key = jax.random.split(key)
        seq = self._observe_sequences(params, batch, observe_key)
        model_loss, metrics = self._model_loss(params, batch, seq)
        start = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), seq["start"])
        ac_loss, boot, return_scale, ac_metrics = self._actor_critic_loss(
            params, slow_critic, return_scale, start, imagine_key
        )
        boot = boot.reshape(seq["first"].shape)
        replay_loss = self._replay_critic_loss(params, slow_critic, batch, seq, boot)
        total = model_loss + ac_loss + self.config.repval_scale * replay_loss
        metrics = (
            metrics | ac_metrics | {"model_loss": model_loss, "replay_critic_loss": replay_loss}
        )
        return total, (return_scale, metrics)

    def _update(self, state: DreamerV3State) -> tuple[DreamerV3State, dict[str, jax.Array]]:
        c = self.config

        def one_update(carry, key):
            params, opt_state, slow_critic, return_scale = carry
            sample_key, loss_key = jax.random.split(key)
            batch = state.buffer.sample_sequences(
                sample_key, c.batch_size, c.batch_length, self.n_envs
            )
            grads, (return_scale, metrics) = jax.grad(self._loss, has_aux=True)(
                params, slow_critic, return_scale, batch, loss_key
            )
            params, opt_state = optimizer_step(self._optimizer, grads, opt_state, params)
            slow_critic = soft_update(slow_critic, params["critic"], c.slow_critic_rate)
            return (params, opt_state, slow_critic, return_scale), metrics

        keys = jax.random.split(state.key, self.updates_per_iteration + 1)
        carry = (state.params, state.opt_state, state.slow_critic, state.return_scale)
        (params, opt_state, slow_critic, return_scale), metrics = jax.lax.scan(
            one_update, carry, keys[1:]
        )
        state = state.replace(
            params=params,
            opt_state=opt_state,
            slow_critic=slow_critic,
            return_scale=return_scale,
            key=keys[0],
        )
        return state, jax.tree.map(jnp.mean, metrics)
