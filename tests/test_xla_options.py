"""The XLA options each agent's programs are compiled with (ajax._xla)."""

import jax
import jax.numpy as jnp
import numpy as np

from ajax import AVG, DQN, PPO, LoggingConfig, evaluate
from ajax._xla import YNN_FUSIONS, compiler_options

NO_YNNPACK = {YNN_FUSIONS: ""}


def test_agents_turn_ynnpack_off_but_avg_and_a_user_choice_wins(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert compiler_options(DQN(env_id="CartPole-v1")) == NO_YNNPACK
    assert compiler_options(AVG(env_id="Pendulum-v1")) is None
    monkeypatch.setenv("XLA_FLAGS", f"--{YNN_FUSIONS}=+dot")
    assert compiler_options(DQN(env_id="CartPole-v1")) is None


def test_the_option_takes_products_from_ynnpack():
    product = jax.jit(lambda a, b: jnp.einsum("nij,njk->nik", a, b))
    x = jnp.ones((2, 64, 64))
    lowered = product.lower(x, x)
    assert "__ynn_fusion" in lowered.compile().as_text(), "the premise: YNNPACK by default"
    assert "__ynn_fusion" not in lowered.compile(NO_YNNPACK).as_text()


def test_every_program_of_a_run_gets_the_agents_options(monkeypatch, tmp_path):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    compiled, jitted = [], []
    compile_, jit = jax.stages.Lowered.compile, jax.jit

    def recorded_compile(self, compiler_options=None, **kwargs):
        compiled.append(compiler_options)
        return compile_(self, compiler_options, **kwargs)

    def recorded_jit(fun, **kwargs):
        jitted.append(kwargs.get("compiler_options"))
        return jit(fun, **kwargs)

    agent = PPO(env_id="CartPole-v1", n_envs=2, n_steps=16)
    assert compiler_options(agent) == NO_YNNPACK  # and whether jaxlib takes it is known
    monkeypatch.setattr(jax.stages.Lowered, "compile", recorded_compile)
    logging = LoggingConfig(log_frequency=32, log_dir=tmp_path)
    result = agent.train(seed=0, n_timesteps=64, num_episode_test=1, logging_config=logging)
    # The seeds' initialisation and the segment, with its evaluation.
    assert compiled == [NO_YNNPACK, NO_YNNPACK]
    monkeypatch.setattr(jax, "jit", recorded_jit)
    evaluate(result, num_episodes=1)
    result.act(np.zeros(4, np.float32))
    assert jitted == [NO_YNNPACK, NO_YNNPACK]
