"""TD-MPC2 (Hansen, Su and Wang 2024, "TD-MPC2: Scalable, Robust World Models for Continuous
Control", arXiv:2310.16828; reference nicklashansen/tdmpc2).

A model of the task in a latent space, learnt without reconstructing observations: an encoder
``z = h(s)`` and latent dynamics ``z' = d(z, a)``, each ending in SimNorm, a reward head, a
policy prior and an ensemble of Q-functions, the reward and Q heads predicting two-hot
distributions over symlog bins (:mod:`ajax.nn.twohot`). An update samples runs of ``horizon``
consecutive steps, rolls the dynamics from each run's first latent, and minimises, with step
``t`` weighted ``rho^t`` (section 3.2, eq. 3):

* latent consistency, ``||d(z_t, a_t) - sg(h(s_{t+1}))||^2``, weighted 20;
* the reward's cross-entropy, weighted 0.1;
* every Q-function's cross-entropy to ``r_t + gamma min(Q'_i, Q'_j)(z_{t+1}, pi(z_{t+1}))``,
  two target heads drawn at random, weighted 0.1;

then the policy prior maximises ``entropy_coef * H + Q / S`` over the rolled latents, ``S``
the running spread of the Q-values (:class:`ajax.returns.SpreadScale`). The Q targets follow
at rate ``tau``.

Acting plans (section 3.3): MPPI (:class:`ajax.planning.MPPI`) scores action sequences by the
model's discounted rewards over the horizon plus a Q-value at its end, warm-started from the
previous step's plan, which is the acting carry. The schedule is the reference's online
trainer: ``learning_starts`` steps of random actions (its ``seed_steps``), then an iteration
whose step is random too and whose updates are a burst of as many (:attr:`pretrain_updates`),
then ``gradient_steps`` updates per iteration.

Where this differs from the reference (docs/agents/tdmpc2.md lists them):

* the termination head is off by default, as the reference's ``episodic`` mode, but a run
  whose episodes terminate is not refused: its TD targets do not bootstrap from a terminated
  step, but only ``episodic=True`` lets the planner foresee one;
* a sampled run may cross an episode's end, and its steps after that end are left out of the
  losses (the reference's sampler never crosses one);
* with ``n_envs`` copies an iteration takes a step in each, then ``gradient_steps`` updates.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import struct

from ajax.acting import EnvCursor, PolicyFn
from ajax.agents.base import hyperparameter
from ajax.agents.replay import ReplayAgent
from ajax.buffers import ReplayBuffer, within_first_episode
from ajax.critics import critic_subset
from ajax.envs import Box, Env
from ajax.nn import TanhNormal
from ajax.nn.normed import NormedEnsemble, NormedMLP
from ajax.nn.twohot import symlog_bins
from ajax.planning import MPPI, shifted
from ajax.returns import SpreadScale, discount_for_episodes
from ajax.updates import clipped_over_one_vector, optimizer_step, soft_update

#: The policy prior's log standard deviation is squashed into this range (the reference's
#: ``log_std_min`` and ``log_std_max``).
LOG_STD_MIN, LOG_STD_MAX = -10.0, 2.0


@dataclass(frozen=True)
class Preset:
    """A model size: the encoder's width and hidden layers, the other networks' width, the
    latent's width, the Q-functions, and the planner."""

    encoder_dim: int
    mlp_dim: int
    latent_dim: int
    encoder_layers: int
    num_q: int
    planner: MPPI = MPPI()


#: The reference's ``MODEL_SIZE`` (``common/__init__.py``; ``num_q`` 5 where it names none,
#: its ``config.yaml``), by parameter count; ``"cpu"``, Ajax's own, narrowed so that a step
#: (planning, then an update) fits a laptop's CPU; and ``"tiny"``, for probes and smoke runs.
PRESETS: dict[str, Preset] = {
    "1m": Preset(256, 384, 128, 2, 2),
    "5m": Preset(256, 512, 512, 2, 5),
    "19m": Preset(1024, 1024, 768, 3, 5),
    "48m": Preset(1792, 1792, 768, 4, 5),
    "317m": Preset(4096, 4096, 1376, 5, 8),
    "cpu": Preset(64, 64, 64, 2, 2, MPPI(samples=128, policy_samples=8, elites=16, iterations=3)),
    "tiny": Preset(32, 32, 32, 2, 2, MPPI(samples=64, policy_samples=4, elites=8, iterations=2)),
}


@dataclass(frozen=True)
class TDMPC2Config:
    """TD-MPC2's hyperparameters; defaults are the reference's ``config.yaml``."""

    size: str = hyperparameter(
        "cpu",
        "model and planner size: a key of PRESETS (the reference's 1m, 5m, 19m, 48m, 317m; "
        "Ajax's narrowed cpu, or tiny for probes).",
    )
    learning_rate: float = hyperparameter(
        3e-4,
        "Adam step size; reference lr.",
        low=0.0,
        low_open=True,
        batchable=True,
    )
    encoder_lr_scale: float = hyperparameter(
        0.3,
        "the encoder's step size relative to the rest; the reference's value.",
        low=0.0,
        batchable=True,
    )
    grad_clip_norm: float = hyperparameter(
        20.0,
        "global gradient-norm clip; the reference's value.",
        low=0.0,
        low_open=True,
        batchable=True,
    )
    buffer_size: int = hyperparameter(
        1_000_000, "replay capacity in transitions per seed; the reference's value.", low=1
    )
    learning_starts: int = hyperparameter(
        0,
        "steps of random actions before updates begin, and updates in the burst that follows "
        "(the reference's seed_steps); 0 takes the reference's max(1000, 5 T) for episodes "
        "of T steps.",
        low=0,
    )
    batch_size: int = hyperparameter(256, "runs per minibatch; the reference's value.", low=1)
    horizon: int = hyperparameter(
        3, "steps per run, and the planner's horizon; the reference's value.", low=1
    )
    gamma: float = hyperparameter(
        0.0,
        "discount; 0 takes the reference's clip((T/5 - 1) / (T/5), 0.95, 0.995) for "
        "episodes of T steps.",
        low=0.0,
        high=1.0,
        high_open=True,
        batchable=True,
    )
    tau: float = hyperparameter(
        0.01,
        "Polyak rate of the target Q-functions; the reference's value.",
        low=0.0,
        high=1.0,
        batchable=True,
    )
    gradient_steps: int = hyperparameter(
        1, "updates per iteration; reference (one per environment step).", low=1
    )
    rho: float = hyperparameter(
        0.5,
        "weight decay of the losses over the horizon, rho^t; the reference's value.",
        low=0.0,
        batchable=True,
    )
    consistency_coef: float = hyperparameter(
        20.0,
        "weight of the latent consistency loss; the reference's value.",
        low=0.0,
        batchable=True,
    )
    reward_coef: float = hyperparameter(
        0.1,
        "weight of the reward loss; the reference's value.",
        low=0.0,
        batchable=True,
    )
    value_coef: float = hyperparameter(
        0.1,
        "weight of the Q-value loss; the reference's value.",
        low=0.0,
        batchable=True,
    )
    entropy_coef: float = hyperparameter(
        1e-4,
        "weight of the policy prior's entropy; the reference's value.",
        low=0.0,
        batchable=True,
    )
    dropout: float = hyperparameter(
        0.01,
        "dropout after the Q-functions' first layer; the reference's value.",
        low=0.0,
        high=1.0,
        high_open=True,
    )
    episodic: bool = hyperparameter(
        False,
        "a termination head, whose predicted ends cut the planner's rewards and values: for "
        "tasks whose episodes end early (a fall); reference episodic (off there too).",
    )
    termination_coef: float = hyperparameter(
        1.0,
        "weight of the termination loss (with episodic); the reference's value.",
        low=0.0,
        batchable=True,
    )
    normalize_observations: bool = hyperparameter(
        False,
        "running observation standardisation, for observations far from unit scale (the "
        "reference's tasks need none). The replay buffer keeps observations as normalised "
        "when collected.",
    )


@struct.dataclass
class TDMPC2State:
    """Parameters (``encoder``, ``dynamics``, ``reward``, ``q``, ``pi``, and ``termination``
    with ``episodic``), the target Q-functions, the two optimisers' states (``model``,
    ``pi``), the Q-values' running scale, the replay buffer, the copies and the steps taken."""

    params: dict[str, Any]
    target_q: Any
    opt_state: dict[str, Any]
    scale: SpreadScale
    buffer: ReplayBuffer
    cursor: EnvCursor
    key: jax.Array
    steps: jax.Array


class TDMPC2(ReplayAgent):
    """TD-MPC2 for continuous actions: a latent world model, planned with MPPI."""

    Config = TDMPC2Config
    action_spaces = (Box,)
    example_env = "Pendulum-v1"

    def __init__(self, env_id, n_envs=None, env_params=None, **hyperparameters):
        super().__init__(env_id, n_envs, env_params, **hyperparameters)
        self._require_one_of("size", PRESETS, "TD-MPC2 preset")
        episode = self.env.max_episode_steps
        resolved = {}
        if self.config.learning_starts == 0:
            resolved["learning_starts"] = max(1000, 5 * episode)
        # A swept discount is traced and is the discount itself (check_values refuses 0).
        if not isinstance(self.config.gamma, jax.core.Tracer) and self.config.gamma == 0.0:
            resolved["gamma"] = discount_for_episodes(episode)
        self.config = dataclasses.replace(self.config, **resolved)
        self._require_sequences_at_start(self.config.horizon)
        c, p = self.config, PRESETS[self.config.size]
        self.preset = p
        self.planner = dataclasses.replace(p.planner, horizon=c.horizon)
        self._action_dim = math.prod(self.env.action_space.shape)
        self.bins = symlog_bins()
        n_bins = self.bins.values.shape[0]
        hidden = (p.mlp_dim, p.mlp_dim)
        self.encoder = NormedMLP(
            (p.encoder_dim,) * max(p.encoder_layers - 1, 1), p.latent_dim, simnorm=True
        )
        self.dynamics = NormedMLP(hidden, p.latent_dim, simnorm=True)
        self.reward_head = NormedMLP(hidden, n_bins, zero_out=True)
        self.prior = NormedMLP(hidden, 2 * self._action_dim)
        self.q_heads = NormedEnsemble(hidden, n_bins, p.num_q, c.dropout)
        self.termination_head = NormedMLP(hidden, 1) if c.episodic else None
        # Adam over one vector of the parameters (the clipping's norm and the moments a few
        # kernels, not a few per leaf: TD-MPC2's update is bound by its kernel count), then
        # the step sizes, the encoder's scaled: the reference's two Adams, the same sums.
        self._model_optimizer = optax.chain(
            clipped_over_one_vector(c.grad_clip_norm, optax.scale_by_adam()),
            optax.multi_transform(
                {
                    "encoder": optax.scale(-c.learning_rate * c.encoder_lr_scale),
                    "rest": optax.scale(-c.learning_rate),
                },
                lambda params: {
                    name: jax.tree.map(lambda _, n=name: "encoder" if n == "encoder" else "rest", p)
                    for name, p in params.items()
                },
            ),
        )
        # The prior's Adam has eps 1e-5, the reference's pi_optim.
        self._prior_optimizer = clipped_over_one_vector(
            c.grad_clip_norm, optax.adam(c.learning_rate, eps=1e-5)
        )

    def check_values(self, values: dict[str, Any]) -> None:
        """Also refuse a swept discount of 0: as an argument it asks for the discount of the
        task's episode length, which a traced value cannot ask."""
        if values.get("gamma") == 0.0:
            raise ValueError(
                "gamma=0 cannot be swept: TD-MPC2 reads it as 'derive the discount from the "
                f"episode length' ({self.config.gamma:g} here), which a value of a sweep "
                "cannot ask for. Sweep discounts above 0."
            )
        super().check_values(values)

    @property
    def pretrain_updates(self) -> int:
        """The reference's burst of ``seed_steps`` updates, in calls of :meth:`_update` (each
        ``gradient_steps`` updates), in place of the first learning iteration's one call."""
        return -(-self.config.learning_starts // self.config.gradient_steps)

    # The model's parts.

    def _encode(self, params: dict[str, Any], obs: jax.Array) -> jax.Array:
        return self.encoder.apply(params["encoder"], self._flat(obs))

    def _next(self, params: dict[str, Any], z: jax.Array, action: jax.Array) -> jax.Array:
        return self.dynamics.apply(params["dynamics"], jnp.concatenate([z, action], axis=-1))

    def _reward_logits(self, params: dict[str, Any], z: jax.Array, action: jax.Array):
        return self.reward_head.apply(params["reward"], jnp.concatenate([z, action], axis=-1))

    def _termination_logits(self, params: dict[str, Any], z: jax.Array) -> jax.Array:
        """The logit of the episode having ended on arriving at latent ``z``."""
        return self.termination_head.apply(params["termination"], z)[..., 0]

    def _prior(self, prior_params: Any, z: jax.Array) -> TanhNormal:
        """The policy prior at latents ``z``: a tanh-squashed Gaussian whose log standard
        deviation is squashed into ``[LOG_STD_MIN, LOG_STD_MAX]`` (the reference's)."""
        mean, raw = jnp.split(self.prior.apply(prior_params, z), 2, axis=-1)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (jnp.tanh(raw) + 1.0)
        return TanhNormal(mean, log_std)

    def _sample_prior(
        self, prior_params: Any, z: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """A reparameterised action of the prior at ``z`` and its entropy term. The term is
        the reference's "scaled entropy": minus the Gaussian log-density of the sample
        before the squash, times the action's dimension."""
        dist = self._prior(prior_params, z)
        noise = jax.random.normal(key, dist.mean.shape)
        action = jnp.tanh(dist.mean + noise * jnp.exp(dist.log_std))
        log_density = jnp.sum(-0.5 * noise**2 - dist.log_std - 0.5 * math.log(2 * math.pi), axis=-1)
        return action, -self._action_dim * log_density

    def _q_logits(
        self, q_params: Any, z: jax.Array, action: jax.Array, dropout_key: jax.Array | None = None
    ) -> jax.Array:
        """Every Q-function's logits ``[members, ..., bins]``, with dropout where a key is
        given (training) and without it (targets, planning)."""
        members = jax.tree.leaves(q_params)[0].shape[0]
        heads = self.q_heads.clone(members=members)
        if dropout_key is None:
            return heads.apply(q_params, z, action)
        return heads.apply(q_params, z, action, False, rngs={"dropout": dropout_key})

    def _two_q(
        self, q_params: Any, z: jax.Array, action: jax.Array, key: jax.Array, dropout=False
    ) -> jax.Array:
        """The values of two Q-functions drawn at random ``[2, ...]`` (the reference's
        ``Q(..., return_type="min" | "avg")``)."""
        subset_key, dropout_key = jax.random.split(key)
        pair = critic_subset(subset_key, q_params, 2)
        return self.bins.decode(self._q_logits(pair, z, action, dropout_key if dropout else None))

    # Acting.

    def initial_carry(self, params: Any, n: int) -> jax.Array:
        """The plan's mean ``[n, horizon, A]``: zeros at an episode's start."""
        return jnp.zeros((n, self.config.horizon, self._action_dim))

    def policy(self, params: dict[str, Any], obs: jax.Array) -> TanhNormal:
        """The policy prior at ``obs``, in ``[-1, 1]``: what the planner proposes from, not
        what the agent does (:meth:`act` plans)."""
        return self._prior(params["pi"], self._encode(params, obs))

    def act(self, params, obs, carry, key, deterministic):
        """The first action of the plan MPPI makes at each copy's ``obs``, warm-started from
        ``carry``; the carry becomes the plan, one step on."""
        z = self._encode(params, obs)
        keys = jax.random.split(key, z.shape[0])
        plan = lambda z, mean, key: self._plan(params, z, mean, key, deterministic)  # noqa: E731
        action, mean = jax.vmap(plan)(z, carry, keys)
        return self._env_action(action, obs), jax.vmap(shifted, (0, None))(mean, False)

    def _plan(self, params, z, mean, key, deterministic):
        """MPPI from one latent ``z``: the prior's proposals rolled through the model, then
        the planner's refits, scored by :meth:`_trajectory_value`."""
        prior_key, plan_key = jax.random.split(key)
        planner = self.planner

        def propose(latents, step_key):
            action, _ = self._sample_prior(params["pi"], latents, step_key)
            return self._next(params, latents, action), action

        latents = jnp.broadcast_to(z, (planner.policy_samples, *z.shape))
        # The horizon's few steps, here and in every rollout, are unrolled, as the planner's
        # refits are (ajax.planning).
        _, proposals = jax.lax.scan(
            propose, latents, jax.random.split(prior_key, self.config.horizon), unroll=True
        )
        value_of = lambda actions, key: self._trajectory_value(params, z, actions, key)  # noqa: E731
        return planner.plan(value_of, mean, jnp.swapaxes(proposals, 0, 1), plan_key, deterministic)

    def _trajectory_value(self, params, z, actions, key):
        """``sum_t gamma^t r_t + gamma^H Q(z_H, pi(z_H))`` of each sequence ``actions
        [samples, horizon, A]`` from latent ``z``, the Q-value the mean of two random heads.
        With ``episodic``, as the reference's: the rewards after the first latent the
        termination head calls an end (logit above 0) count nothing, nor does the Q-value."""
        gamma = self.config.gamma

        def step(carry, action):
            latents, value, discount, alive = carry
            reward = self.bins.decode(self._reward_logits(params, latents, action))
            latents = self._next(params, latents, action)
            if alive is None:
                value = value + discount * reward
            else:
                value = value + discount * alive * reward
                alive = alive * (self._termination_logits(params, latents) <= 0.0)
            return (latents, value, discount * gamma, alive), None

        samples = actions.shape[0]
        start = (
            jnp.broadcast_to(z, (samples, *z.shape)),
            jnp.zeros(samples),
            1.0,
            jnp.ones(samples) if self.config.episodic else None,
        )
        (latents, value, discount, alive), _ = jax.lax.scan(
            step, start, jnp.swapaxes(actions, 0, 1), unroll=True
        )
        action_key, q_key = jax.random.split(key)
        action, _ = self._sample_prior(params["pi"], latents, action_key)
        q = self._two_q(params["q"], latents, action, q_key).mean(axis=0)
        return value + discount * (q if alive is None else alive * q)

    def _explorer_at(self, state: TDMPC2State) -> PolicyFn:
        # Up to and including the burst's iteration: the reference's step at seed_steps is
        # random, and its burst follows it.
        warming_up = state.steps <= self.config.learning_starts

        def policy_fn(params, obs, carry, key):
            plan_key, random_key = jax.random.split(key)
            action, carry = self.act(params, obs, carry, plan_key, False)
            action = jnp.where(warming_up, self._uniform_action(random_key, obs), action)
            return action, carry, ()

        return policy_fn

    # Values, for users and tests.

    def q_values(self, params: dict[str, Any], obs: jax.Array, action: jax.Array) -> jax.Array:
        """Every Q-function's value ``[num_q, ...]`` at ``obs`` and ``action`` (in ``[-1,
        1]``): the discounted return it expects."""
        action = action.reshape(*obs.shape[: obs.ndim - self._obs_ndim], self._action_dim)
        return self.bins.decode(self._q_logits(params["q"], self._encode(params, obs), action))

    def value(self, params: dict[str, Any], obs: jax.Array) -> jax.Array:
        """The Q-functions' mean at the prior's deterministic action."""
        return self.q_values(params, obs, self.policy(params, obs).mode()).mean(axis=0)

    # Learning.

    def _init_params(self, key: jax.Array, obs: jax.Array) -> dict[str, Any]:
        keys = jax.random.split(key, 5)
        p, a = self.preset, jnp.zeros((1, self._action_dim))
        z = jnp.zeros((1, p.latent_dim))
        za = jnp.concatenate([z, a], axis=-1)
        params = {
            "encoder": self.encoder.init(keys[0], self._flat(obs[:1])),
            "dynamics": self.dynamics.init(keys[1], za),
            "reward": self.reward_head.init(keys[2], za),
            "q": self.q_heads.init(keys[3], z, a),
            "pi": self.prior.init(keys[4], z),
        }
        if self.config.episodic:  # a key of its own: the other networks start as without it
            params["termination"] = self.termination_head.init(jax.random.fold_in(key, 5), z)
        return params

    def init(self, key: jax.Array, env: Env, total_iterations: int) -> TDMPC2State:
        params, cursor, key = self._start(key, env, self._init_params)
        model = {name: p for name, p in params.items() if name != "pi"}
        obs = cursor.obs
        action = jnp.zeros(self.env.action_space.shape)
        return TDMPC2State(
            params=params,
            target_q=params["q"],
            opt_state={
                "model": self._model_optimizer.init(model),
                "pi": self._prior_optimizer.init(params["pi"]),
            },
            scale=SpreadScale.ones(),
            buffer=ReplayBuffer.for_transitions(
                obs[0], action, self.config.buffer_size, episode_ends=True
            ),
            cursor=cursor,
            key=key,
            steps=jnp.zeros((), jnp.int32),
        )

    def _sample(self, buffer: ReplayBuffer, key: jax.Array) -> dict[str, jax.Array]:
        """Runs of ``horizon`` steps, time-major (leaves ``[horizon, batch, ...]``), with
        ``valid`` marking the steps of the episode each run starts in."""
        c = self.config
        runs = buffer.sample_sequences(key, c.batch_size, c.horizon, self.n_envs)
        runs["valid"] = within_first_episode(
            jnp.maximum(runs["terminated"], runs["truncated"])
        ).astype(jnp.float32)
        return jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), runs)

    def _weighted(self, loss: jax.Array, valid: jax.Array) -> jax.Array:
        """``sum_t rho^t mean_b loss[t, b] / T`` over the valid steps ``[T, batch]``."""
        per_step = (loss * valid).sum(axis=1) / jnp.maximum(valid.sum(axis=1), 1.0)
        weights = self.config.rho ** jnp.arange(loss.shape[0], dtype=loss.dtype)
        return (weights * per_step).sum() / loss.shape[0]

    def _td_target(self, params, target_q, next_z, run, key):
        """``r + gamma (1 - terminated) min(Q'_i, Q'_j)(z', pi(z'))``."""
        action_key, q_key = jax.random.split(key)
        next_action, _ = self._sample_prior(params["pi"], next_z, action_key)
        next_value = self._two_q(target_q, next_z, next_action, q_key).min(axis=0)
        return run["reward"] + self.config.gamma * (1.0 - run["terminated"]) * next_value

    def _model_loss(self, model, params, target_q, run, key):
        """The world model's loss (consistency, reward, value) and the rolled latents."""
        c = self.config
        target_key, dropout_key = jax.random.split(key)
        params = params | model
        next_z = jax.lax.stop_gradient(self._encode(params, run["next_obs"]))
        target = jax.lax.stop_gradient(self._td_target(params, target_q, next_z, run, target_key))

        def roll(z, action):
            z = self._next(params, z, action)
            return z, z

        first = self._encode(params, run["obs"][0])
        _, rolled = jax.lax.scan(roll, first, run["action"], unroll=True)
        latents = jnp.concatenate([first[None], rolled], axis=0)
        valid = run["valid"]
        consistency = self._weighted(((rolled - next_z) ** 2).mean(axis=-1), valid)
        reward_logits = self._reward_logits(params, latents[:-1], run["action"])
        reward = self._weighted(self.bins.loss(reward_logits, run["reward"]), valid)
        q_logits = self._q_logits(params["q"], latents[:-1], run["action"], dropout_key)
        value = self._weighted(self.bins.loss(q_logits, target[None]).mean(axis=0), valid)
        total = c.consistency_coef * consistency + c.reward_coef * reward + c.value_coef * value
        metrics = {"consistency_loss": consistency, "reward_loss": reward, "value_loss": value}
        if c.episodic:
            # The reference's: cross-entropy at every rolled latent, unweighted by rho.
            logits = self._termination_logits(params, rolled)
            ended = run["terminated"].astype(logits.dtype)
            loss = optax.sigmoid_binary_cross_entropy(logits, ended)
            termination = (loss * valid).sum() / jnp.maximum(valid.sum(), 1.0)
            total = total + c.termination_coef * termination
            metrics["termination_loss"] = termination
        return total, (latents, metrics)

    def _prior_loss(self, prior_params, q_params, latents, valid, scale, key):
        """``-(entropy_coef * H + Q / S)`` over the rolled latents, ``Q`` the mean of two
        random Q-functions (dropout on, their parameters fixed) and ``S`` the scale after
        this batch's first step."""
        action_key, q_key = jax.random.split(key)
        action, entropy = self._sample_prior(prior_params, latents, action_key)
        q = self._two_q(jax.lax.stop_gradient(q_params), latents, action, q_key, True).mean(0)
        scale = scale.update(q[0])
        objective = self.config.entropy_coef * entropy + q / scale.value
        loss = self._weighted(-objective, valid)
        return loss, (scale, entropy.mean())

    def _one_update(self, state: TDMPC2State, key: jax.Array):
        sample_key, model_key, prior_key = jax.random.split(key, 3)
        run = self._sample(state.buffer, sample_key)
        params = state.params
        model = {name: p for name, p in params.items() if name != "pi"}
        grads, (latents, metrics) = jax.grad(self._model_loss, has_aux=True)(
            model, params, state.target_q, run, model_key
        )
        model, model_opt = optimizer_step(
            self._model_optimizer, grads, state.opt_state["model"], model
        )
        # The prior learns on every rolled latent; those past an episode's end stay out.
        valid = jnp.concatenate([jnp.ones_like(run["valid"][:1]), run["valid"]], axis=0)
        (prior_loss, (scale, entropy)), grads = jax.value_and_grad(self._prior_loss, has_aux=True)(
            params["pi"], model["q"], jax.lax.stop_gradient(latents), valid, state.scale, prior_key
        )
        prior, prior_opt = optimizer_step(
            self._prior_optimizer, grads, state.opt_state["pi"], params["pi"]
        )
        state = state.replace(
            params=model | {"pi": prior},
            target_q=soft_update(state.target_q, model["q"], self.config.tau),
            opt_state={"model": model_opt, "pi": prior_opt},
            scale=scale,
        )
        return state, metrics | {
            "pi_loss": prior_loss,
            "pi_entropy": entropy,
            "q_scale": scale.value,
        }

    def _update(self, state: TDMPC2State) -> tuple[TDMPC2State, dict[str, jax.Array]]:
        key, update_key = jax.random.split(state.key)
        state, metrics = jax.lax.scan(
            self._one_update,
            state.replace(key=key),
            jax.random.split(update_key, self.config.gradient_steps),
        )
        return state, jax.tree.map(jnp.mean, metrics)
