"""Storage that lives inside the scanned training state, one store per seed.

Every store is a pytree with one small interface, :class:`Store`: ``add(batch) -> store``
and ``sample(key, n) -> batch``, both pure, so it is vmapped and donated with the rest of the
state: memory grows linearly with the number of seeds (docs/memory.md).

* :class:`ReplayBuffer`: transitions, one row each, in a ring of ``capacity`` rows. ``sample``
  draws rows uniformly; ``sample_sequences`` draws runs of consecutive steps of one copy
  (n-step returns, and the contiguous slices a world model trains on).
* :class:`EpisodeStore`: whole episodes at a fixed length, keeping the best ``capacity`` by
  return (UDRL's replay), sampled as episodes or as single steps.

flashbax's buffers fit this design too (pure pytrees); ``benchmarks/archive/storage_bench.py``
measured them against these under the replay agents' workloads, and PERFORMANCE_REPORT.md
("What was tried and dropped") gives the figures that decided for the code here.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct


class Store(Protocol):
    """What every store provides."""

    def add(self, batch: Any) -> Store:
        """The store with ``batch`` written (a leading axis of items)."""

    def sample(self, key: jax.Array, n: int) -> Any:
        """``n`` items drawn uniformly, with replacement, from those stored."""


@struct.dataclass
class ReplayBuffer:
    storage: Any
    position: jax.Array
    size: jax.Array

    @property
    def capacity(self) -> int:
        return jax.tree.leaves(self.storage)[0].shape[0]

    @classmethod
    def create(cls, example: Any, capacity: int) -> ReplayBuffer:
        """An empty buffer of ``capacity`` rows shaped like ``example`` (one transition)."""
        storage = jax.tree.map(
            lambda x: jnp.zeros((capacity, *jnp.shape(x)), jnp.asarray(x).dtype), example
        )
        return cls(storage, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))

    @classmethod
    def for_transitions(
        cls, obs: jax.Array, action: jax.Array, capacity: int, episode_ends: bool = False
    ) -> ReplayBuffer:
        """An empty buffer for the transitions of a task whose one-copy observation and
        action look like ``obs`` and ``action``: what :meth:`add_transitions` stores.

        With ``episode_ends`` the rows also keep ``truncated``, so that a read of several
        consecutive steps (:meth:`sample_sequences`) can stop at every episode boundary."""
        example = {
            "obs": obs,
            "action": action,
            "reward": jnp.zeros(()),
            "terminated": jnp.zeros(()),
            "next_obs": obs,
        }
        if episode_ends:
            example["truncated"] = jnp.zeros(())
        return cls.create(example, capacity)

    def add_transitions(self, transition: Any) -> ReplayBuffer:
        """Store one step of every copy (an :class:`ajax.acting.Transition`): what a
        one-step target needs, with the true next observation where an episode ended."""
        batch = {
            "obs": transition.obs,
            "action": transition.action,
            "reward": transition.reward,
            "terminated": transition.terminated.astype(jnp.float32),
            "next_obs": transition.next_obs,
        }
        if "truncated" in self.storage:
            batch["truncated"] = transition.truncated.astype(jnp.float32)
        return self.add(batch)

    def add(self, batch: Any) -> ReplayBuffer:
        """Write a batch of transitions (leading axis: one per environment copy)."""
        count = jax.tree.leaves(batch)[0].shape[0]
        rows = (self.position + jnp.arange(count)) % self.capacity
        storage = jax.tree.map(lambda s, b: s.at[rows].set(b), self.storage, batch)
        return ReplayBuffer(
            storage,
            (self.position + count) % self.capacity,
            jnp.minimum(self.size + count, self.capacity),
        )

    def sample(self, key: jax.Array, batch_size: int) -> Any:
        """``batch_size`` transitions drawn uniformly, with replacement, from the filled rows."""
        rows = jax.random.randint(key, (batch_size,), 0, jnp.maximum(self.size, 1))
        return jax.tree.map(lambda s: s[rows], self.storage)

    def sample_sequences(self, key: jax.Array, batch_size: int, length: int, stride: int) -> Any:
        """``batch_size`` runs of ``length`` consecutive steps of one environment copy, drawn
        uniformly from those wholly written: leaves shaped [batch_size, length, ...].

        ``stride`` is the number of rows one step writes (the number of copies): row ``r``
        and row ``r + stride`` are the same copy one step apart. Runs may cross episode
        boundaries; the stored ``terminated``/``truncated`` flags say where."""
        span = (length - 1) * stride
        oldest = (self.position - self.size) % self.capacity
        starts = jax.random.randint(key, (batch_size,), 0, jnp.maximum(self.size - span, 1))
        rows = (oldest + starts[:, None] + stride * jnp.arange(length)) % self.capacity
        return jax.tree.map(lambda s: s[rows], self.storage)


def within_first_episode(done: jax.Array) -> jax.Array:
    """Which steps of sampled runs ``done [batch, length]`` (terminated or truncated) belong
    to the episode each run starts in: those up to and including its first end. A world
    model trained on a run learns nothing across an episode's end (TD-MPC2's reference never
    samples across one)."""
    done = done.astype(jnp.int32)
    return (jnp.cumsum(done, axis=1) - done) == 0


@struct.dataclass
class Episodes:
    """Whole episodes at a fixed length: ``steps`` leaves ``[n, max_length, ...]`` (steps past
    an episode's ``length`` are padding), with each episode's undiscounted ``returns`` [n]."""

    steps: Any
    lengths: jax.Array
    returns: jax.Array


@struct.dataclass
class EpisodeStore:
    """The best ``capacity`` episodes offered, by undiscounted return.

    Each offered episode replaces the worst one stored if its return is higher, so an offer
    writes one episode whatever the capacity, and the store always holds the best
    ``capacity`` episodes offered so far (among equal returns, the one stored first stays).
    Empty slots hold a return of ``-inf``; they fill in order, so the filled slots are the
    first ``size``.
    """

    episodes: Episodes

    @property
    def capacity(self) -> int:
        return self.episodes.returns.shape[0]

    @property
    def size(self) -> jax.Array:
        """How many slots hold an episode."""
        return jnp.sum(jnp.isfinite(self.episodes.returns)).astype(jnp.int32)

    @classmethod
    def create(cls, example_step: Any, capacity: int, max_length: int) -> EpisodeStore:
        """An empty store for episodes of at most ``max_length`` steps like ``example_step``."""
        steps = jax.tree.map(
            lambda x: jnp.zeros((capacity, max_length, *jnp.shape(x)), jnp.asarray(x).dtype),
            example_step,
        )
        lengths = jnp.zeros(capacity, jnp.int32)
        return cls(Episodes(steps, lengths, jnp.full(capacity, -jnp.inf, jnp.float32)))

    def add(self, batch: Episodes) -> EpisodeStore:
        """Offer ``batch``'s episodes in turn (one with a return of ``-inf``, say an episode
        not yet finished, is never stored)."""

        def offer(episodes: Episodes, episode: Episodes) -> tuple[Episodes, None]:
            slot = jnp.argmin(episodes.returns)
            better = episode.returns > episodes.returns[slot]
            write = lambda stored, new: stored.at[slot].set(jnp.where(better, new, stored[slot]))  # noqa: E731
            return jax.tree.map(write, episodes, episode), None

        episodes, _ = jax.lax.scan(offer, self.episodes, batch)
        return EpisodeStore(episodes)

    def best(self, k: int) -> Episodes:
        """The ``k`` best episodes stored, best first (empty slots, with return ``-inf``, come
        last)."""
        _, index = jax.lax.top_k(self.episodes.returns, k)
        return jax.tree.map(lambda x: x[index], self.episodes)

    def sample(self, key: jax.Array, n: int) -> Episodes:
        """``n`` stored episodes drawn uniformly, with replacement."""
        index = jax.random.randint(key, (n,), 0, jnp.maximum(self.size, 1))
        return jax.tree.map(lambda x: x[index], self.episodes)

    def sample_steps(self, key: jax.Array, n: int) -> tuple[Any, jax.Array, jax.Array]:
        """``n`` steps: stored episodes drawn uniformly, then a step uniformly within each.
        Returns the steps (leaves ``[n, ...]``), their index in their episode and the
        episode's length."""
        episode_key, step_key = jax.random.split(key)
        index = jax.random.randint(episode_key, (n,), 0, jnp.maximum(self.size, 1))
        lengths = self.episodes.lengths[index]
        t = jnp.floor(jax.random.uniform(step_key, (n,)) * lengths).astype(jnp.int32)
        steps = jax.tree.map(lambda x: x[index, t], self.episodes.steps)
        return steps, t, lengths

    def sample_segments(self, key: jax.Array, n: int) -> tuple[Any, Any, jax.Array, jax.Array]:
        """``n`` segments ``[t1, t2)``: stored episodes drawn uniformly, ``t1`` uniformly
        within each, ``t2`` uniformly after it up to the episode's end (``t2 = length`` the
        trailing segment). Returns the steps at ``t1``, the steps at ``t2`` (at the last step
        where ``t2`` is the end), ``t2 - t1``, and whether ``t2`` is the end."""
        episode_key, start_key, end_key = jax.random.split(key, 3)
        index = jax.random.randint(episode_key, (n,), 0, jnp.maximum(self.size, 1))
        lengths = self.episodes.lengths[index]
        t1 = jnp.floor(jax.random.uniform(start_key, (n,)) * lengths).astype(jnp.int32)
        after = jnp.floor(jax.random.uniform(end_key, (n,)) * (lengths - t1)).astype(jnp.int32)
        t2 = t1 + 1 + after
        at = lambda t: jax.tree.map(lambda x: x[index, t], self.episodes.steps)  # noqa: E731
        return at(t1), at(jnp.minimum(t2, lengths - 1)), t2 - t1, t2 == lengths


def transition_bytes(example: Any) -> int:
    """Bytes one stored transition takes, for memory estimates."""
    return sum(
        int(np.prod(np.shape(x))) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(example)
    )
