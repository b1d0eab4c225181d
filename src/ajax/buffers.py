"""Replay memory that lives inside the scanned training state, one buffer per seed.

A buffer is a pytree of arrays with ``capacity`` rows each (one row per transition), a write
position and a fill count. ``add`` writes the batch of all copies' transitions of one step;
``sample`` draws uniformly from what has been written. Because it is part of the state, it is
vmapped with everything else: memory grows linearly with the number of seeds (docs/memory.md).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct


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


def transition_bytes(example: Any) -> int:
    """Bytes one stored transition takes, for memory estimates."""
    return sum(
        int(np.prod(np.shape(x))) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(example)
    )
