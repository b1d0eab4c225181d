"""GAE against a direct, loop-by-loop reading of its definition."""

import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ajax.returns import gae


def _reference(rewards, values, next_values, terminated, truncated, gamma, lam):
    advantages = np.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        done = terminated[t] or truncated[t]
        bootstrap = 0.0 if terminated[t] else gamma * next_values[t]
        delta = rewards[t] + bootstrap - values[t]
        running = delta + (0.0 if done else gamma * lam * running)
        advantages[t] = running
    return advantages


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12),
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.integers(0, 2**31 - 1),
)
def test_gae_matches_reference(length, gamma, lam, seed):
    rng = np.random.default_rng(seed)
    rewards, values, next_values = rng.normal(size=(3, length)).astype(np.float32)
    ends = rng.integers(0, 3, size=length)  # 0 running, 1 terminated, 2 truncated
    terminated, truncated = ends == 1, ends == 2
    advantages, targets = gae(
        jnp.asarray(rewards),
        jnp.asarray(values),
        jnp.asarray(next_values),
        jnp.asarray(terminated, jnp.float32),
        jnp.asarray(terminated | truncated, jnp.float32),
        gamma,
        lam,
    )
    expected = _reference(rewards, values, next_values, terminated, truncated, gamma, lam)
    np.testing.assert_allclose(advantages, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(targets, expected + values, rtol=1e-4, atol=1e-4)


def test_truncation_bootstraps_from_the_final_observation_and_termination_does_not():
    ones = jnp.ones(1)
    kwargs = dict(values=jnp.zeros(1), next_values=10 * ones, gamma=0.5, lam=0.9)
    truncated, _ = gae(ones, terminated=jnp.zeros(1), done=ones, **kwargs)
    terminated, _ = gae(ones, terminated=ones, done=ones, **kwargs)
    assert float(truncated[0]) == 1.0 + 0.5 * 10.0
    assert float(terminated[0]) == 1.0
