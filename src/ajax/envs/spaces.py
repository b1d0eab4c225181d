"""Action and observation spaces: what shape, dtype and bounds an environment speaks."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np


@dataclass(frozen=True)
class Discrete:
    """Integer actions ``0 .. n - 1``."""

    n: int
    shape: tuple[int, ...] = ()
    dtype: np.dtype = np.dtype(np.int32)

    def sample(self, key: jax.Array) -> jax.Array:
        return jax.random.randint(key, self.shape, 0, self.n, dtype=self.dtype)


@dataclass(frozen=True, eq=False)
class Box:
    """Real arrays of ``shape`` with elementwise bounds ``low`` and ``high`` (may be infinite)."""

    low: np.ndarray
    high: np.ndarray
    shape: tuple[int, ...]
    dtype: np.dtype = np.dtype(np.float32)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "low", np.broadcast_to(np.asarray(self.low, self.dtype), self.shape)
        )
        object.__setattr__(
            self, "high", np.broadcast_to(np.asarray(self.high, self.dtype), self.shape)
        )

    @property
    def bounded(self) -> bool:
        return bool(np.all(np.isfinite(self.low)) and np.all(np.isfinite(self.high)))

    def sample(self, key: jax.Array) -> jax.Array:
        low = jnp.where(jnp.isfinite(self.low), self.low, -1.0)
        high = jnp.where(jnp.isfinite(self.high), self.high, 1.0)
        return jax.random.uniform(key, self.shape, self.dtype, low, high)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Box)
            and self.shape == other.shape
            and self.dtype == other.dtype
            and np.array_equal(self.low, other.low)
            and np.array_equal(self.high, other.high)
        )

    def __hash__(self) -> int:
        return hash((self.shape, str(self.dtype), self.low.tobytes(), self.high.tobytes()))


Space = Discrete | Box
