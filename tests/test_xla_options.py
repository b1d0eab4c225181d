"""How each agent's programs are lowered and compiled (ajax._xla)."""

import contextlib
import re
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax._src.interpreters import mlir
from jax.extend.random import threefry2x32_p

import ajax._program_cache
import ajax.agents.asac
import ajax.agents.off_policy
import ajax.agents.udrl
import ajax.loop
from ajax import AGENTS, ASAC, AVG, DQN, PPO, PQN, REDQ, SAC, TD3, LoggingConfig, evaluate
from ajax._xla import (
    BACKEND_OPT_LEVEL,
    CHOICES,
    KERNEL_ORDER,
    SINGLE_PRODUCTS,
    TUNING_ENV,
    YNN_FUSIONS,
    YNNPACK_FORM,
    AgentTuning,
    active_choices,
    compiler_options,
    cpu_has_avx512,
    products_go_to_ynnpack,
    tuned_optimizer,
    tuning_of,
    unrolled_threefry,
    weight_gradient_form,
    weight_gradients_for,
    without,
)
from ajax.critics import QEnsemble
from ajax.nn import MLP, dense
from ajax.run.health import initial_health
from ajax.run.lowering import lower_run
from ajax.run.plan import plan_run, seed_key
from ajax.run.program import segment_program

from .states import SMALL

NO_YNNPACK = {YNN_FUSIONS: ""}
ONCE = {YNN_FUSIONS: "", BACKEND_OPT_LEVEL: 0}


def test_dreamers_products_go_to_ynnpack_alone_or_to_eigen_where_jaxlib_cannot(monkeypatch):
    """DreamerV3's option hands YNNPACK a product with nothing fused into it, the bias and
    activation staying XLA's; a jaxlib that knows no such value sends its products to Eigen."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    dreamer = AGENTS["DreamerV3"](env_id="CartPole-v1")
    layer = jax.jit(lambda x, w: jnp.tanh(x @ w + 1.0))
    hlo = layer.lower(jnp.ones((16, 64)), jnp.ones((64, 32))).compile(compiler_options(dreamer))
    fused = re.findall(r"\n%fused_computation[^\n]*\{\n(.*?)\n\}", hlo.as_text(), re.S)
    ops = [re.findall(r"= \S+ ([a-z-]+)\(", body) for body in fused]
    assert "__ynn_fusion" in hlo.as_text() and ["parameter", "parameter", "dot"] in ops
    understood = ajax._xla._understood
    monkeypatch.setattr(
        ajax._xla,
        "_understood",
        lambda option, value: value != SINGLE_PRODUCTS and understood(option, value),
    )
    assert compiler_options(dreamer) == NO_YNNPACK


def test_ynnpack_is_off_for_wide_networks_but_avgs_and_a_user_choice_wins(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setattr(ajax._xla, "cpu_has_avx512", lambda: False)
    assert compiler_options(DQN(env_id="CartPole-v1")) == NO_YNNPACK  # 256 units
    assert compiler_options(SAC(env_id="Pendulum-v1")) == NO_YNNPACK
    assert compiler_options(PQN(env_id="CartPole-v1", hidden_sizes=(64, 128))) == NO_YNNPACK
    assert compiler_options(PQN(env_id="CartPole-v1", hidden_sizes=(64, 64))) is None
    assert compiler_options(PPO(env_id="CartPole-v1")) is None  # 64 units
    assert compiler_options(AVG(env_id="Pendulum-v1")) is None  # 256 units, a batch of one
    assert compiler_options(AGENTS["TDMPC2"](env_id="Pendulum-v1")) == NO_YNNPACK  # any width
    assert compiler_options(AGENTS["DreamerV3"](env_id="CartPole-v1")) == {
        YNN_FUSIONS: SINGLE_PRODUCTS
    }
    assert compiler_options(DQN(env_id="CartPole-v1"), runs_once=True) == ONCE
    assert compiler_options(AVG(env_id="Pendulum-v1"), runs_once=True) == {BACKEND_OPT_LEVEL: 0}
    monkeypatch.setenv("XLA_FLAGS", f"--{YNN_FUSIONS}=+dot --{BACKEND_OPT_LEVEL}=3")
    assert compiler_options(DQN(env_id="CartPole-v1")) is None
    assert compiler_options(DQN(env_id="CartPole-v1"), runs_once=True) is None


def test_on_avx512_the_critics_and_pqns_wide_networks_go_to_ynnpack_but_dqns(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setattr(ajax._xla, "cpu_has_avx512", lambda: True)
    wide = [
        *(agent(env_id="Pendulum-v1") for agent in (SAC, TD3, REDQ, ASAC)),
        PQN(env_id="CartPole-v1", hidden_sizes=(256, 256)),
    ]
    for agent in wide:
        assert compiler_options(agent) is None and products_go_to_ynnpack(agent), agent.name
    assert compiler_options(DQN(env_id="CartPole-v1")) == NO_YNNPACK  # 256 units
    assert compiler_options(PPO(env_id="CartPole-v1", hidden_sizes=(128,))) == NO_YNNPACK
    tdmpc2 = AGENTS["TDMPC2"]
    assert compiler_options(tdmpc2(env_id="Pendulum-v1", size="tiny")) == NO_YNNPACK
    assert not products_go_to_ynnpack(tdmpc2(env_id="Pendulum-v1"))
    # The optimiser goes over one vector by width alone.
    adam = optax.adam(1e-3)
    assert tuned_optimizer(SAC(env_id="Pendulum-v1"), adam) is adam
    assert tuned_optimizer(SAC(env_id="Pendulum-v1", hidden_sizes=(64, 64)), adam) is not adam
    assert tuned_optimizer(PPO(env_id="CartPole-v1"), adam) is adam  # no entry: never


def test_avx512_is_read_from_the_cpus_flags(tmp_path):
    avx512, avx2 = tmp_path / "avx512", tmp_path / "avx2"
    avx512.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma avx512f avx512dq\n")
    avx2.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma avx512_bf16\n")
    assert cpu_has_avx512(avx512)
    assert not cpu_has_avx512(avx2)
    assert not cpu_has_avx512(tmp_path / "absent")


def test_the_option_takes_products_from_ynnpack():
    product = jax.jit(lambda a, b: jnp.einsum("nij,njk->nik", a, b))
    x = jnp.ones((2, 64, 64))
    lowered = product.lower(x, x)
    assert "__ynn_fusion" in lowered.compile().as_text(), "the premise: YNNPACK by default"
    assert "__ynn_fusion" not in lowered.compile(NO_YNNPACK).as_text()


def test_products_go_to_ynnpack_for_narrow_networks_unless_the_user_chooses(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setattr(ajax._xla, "cpu_has_avx512", lambda: False)
    assert products_go_to_ynnpack(PPO(env_id="CartPole-v1"))  # 64 units
    assert products_go_to_ynnpack(AVG(env_id="Pendulum-v1"))  # a batch of one
    assert not products_go_to_ynnpack(DQN(env_id="CartPole-v1"))  # 256 units
    monkeypatch.setenv("XLA_FLAGS", f"--{YNN_FUSIONS}=+dot")
    assert not products_go_to_ynnpack(PPO(env_id="CartPole-v1"))


def _mlp_gradients(inputs):
    mlp = MLP((64, 64), 2)
    params = mlp.init(jax.random.PRNGKey(0), inputs)
    return jax.jit(jax.grad(lambda p, x: (mlp.apply(p, x) ** 2).sum())), params


def _compiled(fn, *args) -> str:
    return fn.lower(*args).compile().as_text()


def _contractions_over_the_first_axis(text: str) -> int:
    """Products in a compiled program whose left operand is contracted over its first axis,
    which YNNPACK does not take (its rank-2 weight gradients, as autodiff makes them)."""
    return len(re.findall(r"dot\([^)]*\), lhs_contracting_dims=\{0\}", text))


def _product_shapes(text: str) -> set[tuple[int, ...]]:
    """The shapes of the products in a compiled program."""
    found = re.findall(r"= f32\[([\d,]+)\]\{[\d,]+\} dot\(", text)
    return {tuple(int(n) for n in shape.split(",")) for shape in found}


def _assert_close(got, expected):
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-5)


def test_weight_gradients_for_ynnpack_are_autodiffs_and_contract_over_the_last_axis(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    ppo, dqn = PPO(env_id="CartPole-v1"), DQN(env_id="CartPole-v1")
    assert weight_gradient_form(ppo) == YNNPACK_FORM
    for shape in [(128, 4), (16, 8, 4)]:
        inputs = jax.random.normal(jax.random.PRNGKey(1), shape)
        grad, params = _mlp_gradients(inputs)
        expected = grad(params, inputs)
        assert _contractions_over_the_first_axis(_compiled(grad, params, inputs)) > 0, "premise"
        with weight_gradients_for(ppo):
            grad, _ = _mlp_gradients(inputs)
            got = grad(params, inputs)
            batched = jax.jit(jax.vmap(grad, in_axes=(None, 0)))(params, inputs[None])
            if len(shape) == 2:
                assert _contractions_over_the_first_axis(_compiled(grad, params, inputs)) == 0
        with weight_gradients_for(dqn):  # Eigen's products, and autodiff's form
            grad, _ = _mlp_gradients(inputs)
            assert _contractions_over_the_first_axis(_compiled(grad, params, inputs)) > 0
        _assert_close(got, expected)
        _assert_close(jax.tree.map(lambda x: x[0], batched), expected)


def _ensemble_gradients(obs, action):
    critics = QEnsemble((64, 32), "relu", 3)
    params = critics.init(jax.random.PRNGKey(0), obs, action)
    return jax.jit(jax.grad(lambda p, o, a: (critics.apply(p, o, a) ** 2).sum())), params


def test_weight_gradients_through_eigen_come_out_in_the_kernels_order(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setattr(ajax._xla, "cpu_has_avx512", lambda: False)
    sac = SAC(env_id="Pendulum-v1")  # 256 units: Eigen's products
    assert weight_gradient_form(sac) == KERNEL_ORDER
    assert weight_gradient_form(PQN(env_id="CartPole-v1")) == KERNEL_ORDER
    assert weight_gradient_form(DQN(env_id="CartPole-v1")) is None  # measured slower
    assert weight_gradient_form(PPO(env_id="CartPole-v1", hidden_sizes=(256,))) is None
    keys = jax.random.split(jax.random.PRNGKey(1))
    obs, action = jax.random.normal(keys[0], (128, 4)), jax.random.normal(keys[1], (128, 1))
    grad, params = _ensemble_gradients(obs, action)
    expected = grad(params, obs, action)
    # Three critics' kernels of [5, 64], [64, 32] and [32, 1], the first layers' merged into
    # one product: autodiff writes the first and last layers' gradients transposed.
    transposed, kernel_order = {(192, 5), (3, 1, 32)}, {(5, 192), (3, 32, 1)}
    assert transposed <= _product_shapes(_compiled(grad, params, obs, action)), "the premise"
    with weight_gradients_for(sac):
        grad, _ = _ensemble_gradients(obs, action)
        got = grad(params, obs, action)
        batched = jax.jit(jax.vmap(grad, in_axes=(None, 0, 0)))(params, obs[None], action[None])
        shapes = _product_shapes(_compiled(grad, params, obs, action))
    assert kernel_order <= shapes and not transposed & shapes
    _assert_close(got, expected)
    _assert_close(jax.tree.map(lambda x: x[0], batched), expected)


def test_off_the_cpu_weight_gradients_are_autodiffs(monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert weight_gradient_form(PPO(env_id="CartPole-v1")) is None
    assert weight_gradient_form(SAC(env_id="Pendulum-v1")) is None


def _gradient_program(dense: nn.Dense) -> str:
    inputs = jnp.ones((8, 4))
    params = dense.init(jax.random.PRNGKey(0), inputs)
    return str(jax.make_jaxpr(jax.grad(lambda p: dense.apply(p, inputs).sum()))(params))


def test_outside_the_block_a_layer_is_flaxs_own():
    assert dense(3).dot_general is nn.Dense(3).dot_general
    assert _gradient_program(dense(3)) == _gradient_program(nn.Dense(3))


def test_a_layer_of_one_output_keeps_autodiffs_weight_gradient(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    with weight_gradients_for(PPO(env_id="CartPole-v1")):
        one, three = _gradient_program(dense(1)), _gradient_program(dense(3))
    assert one == _gradient_program(nn.Dense(1))
    assert three != _gradient_program(nn.Dense(3)), "the premise: wider layers transpose"


def test_each_choice_turns_off_alone_and_the_switch_turns_off_all(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setattr(ajax._xla, "cpu_has_avx512", lambda: False)
    sac, ppo = SAC(env_id="Pendulum-v1"), PPO(env_id="CartPole-v1")
    assert active_choices() == CHOICES
    with without("products_by_width"):
        assert compiler_options(sac) is None and products_go_to_ynnpack(sac)
        assert weight_gradient_form(sac) == YNNPACK_FORM
        assert compiler_options(sac, runs_once=True) == {BACKEND_OPT_LEVEL: 0}
    with without("init_at_o0"):
        assert compiler_options(sac, runs_once=True) == NO_YNNPACK
    with without("weight_gradients", "flat_optimizer"):
        assert weight_gradient_form(ppo) is None and compiler_options(ppo) is None
        adam = optax.adam(1e-3)
        assert tuned_optimizer(SAC(env_id="Pendulum-v1", hidden_sizes=(64,)), adam) is adam
        assert active_choices() == ("products_by_width", "unrolled_threefry", "init_at_o0")
    with pytest.raises(ValueError, match="Unknown tuning choices"), without("threefry"):
        pass
    assert active_choices() == CHOICES
    monkeypatch.setenv(TUNING_ENV, "0")
    assert active_choices() == ()
    assert compiler_options(sac) is None and weight_gradient_form(sac) is None


def test_an_agent_defined_outside_ajax_takes_the_defaults_and_subclasses_their_bases():
    class MySAC(SAC):
        pass

    assert tuning_of(MySAC(env_id="Pendulum-v1")) == tuning_of(SAC(env_id="Pendulum-v1"))
    assert tuning_of(REDQ(env_id="Pendulum-v1")) == tuning_of(SAC(env_id="Pendulum-v1"))
    assert tuning_of(DQN(env_id="CartPole-v1")) == AgentTuning()


def _loops(fn, *args) -> int:
    return jax.jit(fn).lower(*args).compile().as_text().count(" while(")


def test_threefry_is_unrolled_in_the_block_alone_and_draws_the_same_numbers():
    def draws(key):
        keys = jax.random.split(key, 3)
        return jax.random.normal(keys[0], (5,)), jax.random.bits(keys[1], (4,)), keys[2]

    key = jax.random.PRNGKey(7)
    # The premise: JAX lowers the hash for the CPU as a loop.
    assert _loops(lambda k: jax.random.split(k, 3), key) > 0
    rolled = jax.jit(draws)(key)
    with unrolled_threefry(DQN(env_id="CartPole-v1")):
        assert _loops(lambda k: jax.random.split(k, 4), key) == 0
        unrolled = jax.jit(lambda k: draws(k))(key)
    for a, b in zip(rolled, unrolled, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert threefry2x32_p in mlir._platform_specific_lowerings["cpu"], "put back after"
    assert _loops(lambda k: jax.random.split(k, 5), key) > 0
    # TD-MPC2's entry keeps JAX's loop: the block leaves its programs alone.
    with unrolled_threefry(AGENTS["TDMPC2"](env_id="Pendulum-v1")):
        assert _loops(lambda k: jax.random.split(k, 6), key) > 0


def _threefry_functions(module_text: str) -> list[str]:
    """The Threefry hash's functions in a lowered module's text."""
    functions = module_text.split("func.func ")
    return [f for f in functions if f.startswith("private @threefry2x32")]


def _rolled(module_text: str) -> bool:
    """Whether a lowered module hashes with JAX's CPU loop rather than unrolled."""
    return any("stablehlo.while" in f for f in _threefry_functions(module_text))


def test_every_program_of_a_run_is_compiled_with_the_agents_choices(monkeypatch, tmp_path):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setenv("AJAX_NO_COMPILE_CACHE", "1")
    exported, compiled, called = [], [], []
    compile_, jit, export = jax.stages.Lowered.compile, jax.jit, ajax._program_cache.export

    def kept_compile(self, compiler_options=None, **kwargs):
        program = compile_(self, compiler_options, **kwargs)
        compiled.append((program.as_text(), compiler_options))
        return program

    def kept_export(*args):
        program = export(*args)
        exported.append(program.exported.mlir_module())
        return program

    def kept_jit(fun, **kwargs):
        program = jit(fun, **kwargs)

        def call(*args):
            lowered = program.lower(*args)  # as the call lowers it, in the caller's blocks
            called.append((lowered.as_text(), compile_(lowered).as_text()))
            return program(*args)

        return call

    # Layers of 128 units: the agent's products go to Eigen.
    agent = PPO(env_id="CartPole-v1", n_envs=2, n_steps=16, hidden_sizes=(128,))
    # Whether jaxlib takes each option is probed (and cached) before compiles are kept.
    assert compiler_options(agent) == NO_YNNPACK
    assert compiler_options(agent, runs_once=True) == ONCE
    monkeypatch.setattr(jax.stages.Lowered, "compile", kept_compile)
    monkeypatch.setattr(ajax._program_cache, "export", kept_export)
    logging = LoggingConfig(log_frequency=32, log_dir=tmp_path)
    result = agent.train(seed=0, n_timesteps=64, num_episode_test=1, logging_config=logging)
    monkeypatch.setattr(jax, "jit", kept_jit)
    evaluate(result, num_episodes=1)
    result.act(np.zeros(4, np.float32), deterministic=False)
    monkeypatch.undo()
    # The run compiled two programs: its segment, and its seeds' initialisation at O0.
    assert sorted((options for _, options in compiled), key=len) == [NO_YNNPACK, ONCE]
    # Every program of the run, evaluate's and act's took no product to YNNPACK...
    texts = [text for text, _ in compiled] + [text for _, text in called]
    assert len(texts) == 4 and not any("__ynn_fusion" in text for text in texts)
    # ... and hashed unrolled, but the initialisation (the smaller module), which runs once
    # and keeps JAX's loop for a shorter compile.
    init, segment = sorted(exported, key=len)
    for module in (segment, *(lowered for lowered, _ in called)):
        assert _threefry_functions(module) and not _rolled(module)
    assert _rolled(init)
    assert "__ynn_fusion" in jax.jit(lambda x: x @ x).lower(jnp.ones((64, 64))).compile().as_text()


def test_a_tdmpc2_runs_segment_keeps_jaxs_rolled_hash_and_a_dqns_is_unrolled(monkeypatch):
    """The agents' choices reach the program ``train`` compiles: lowered by ``lower_run``."""
    monkeypatch.setenv("AJAX_NO_COMPILE_CACHE", "1")
    rolled = {}
    for name in ("TDMPC2", "DQN"):
        env_id, settings = SMALL[name]
        agent = AGENTS[name](env_id=env_id, n_envs=2, **settings)
        plan = plan_run(agent, 4 * agent.steps_per_iteration, None)
        segment = lower_run(agent, [0], plan, 0, evaluate=False).segment.as_text()
        assert _threefry_functions(segment), name
        rolled[name] = _rolled(segment)
    assert rolled == {"TDMPC2": True, "DQN": False}


def _lowered_segment(agent, tuned: bool) -> str:
    """The text of one seed's segment program for ``agent``, lowered inside the tuning
    module's blocks or, with ``tuned`` False, outside them."""
    env = agent.env_copies(agent.n_envs)
    state = jax.eval_shape(lambda: agent.init(seed_key(np.uint32(0)), env, 4))
    health = {k: v[0] for k, v in initial_health(1).items()}
    segment = jax.jit(segment_program(agent, env, None))
    blocks = (unrolled_threefry(agent), weight_gradients_for(agent)) if tuned else ()
    with contextlib.ExitStack() as stack:
        for block in blocks:
            stack.enter_context(block)
        lowered = segment.lower(state, health, np.uint32(0), {}, np.int32(0), np.int32(2))
    return lowered.as_text()


@pytest.mark.parametrize("name", ["PPO", "SAC"])
def test_with_the_tuning_off_a_segment_is_what_plain_jax_lowers(name, monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    env_id, settings = SMALL[name]
    make = lambda: AGENTS[name](env_id=env_id, **settings)  # noqa: E731
    tuned = _lowered_segment(make(), tuned=True)
    monkeypatch.setenv(TUNING_ENV, "0")
    agent = make()
    assert compiler_options(agent) is None and compiler_options(agent, runs_once=True) is None
    off = _lowered_segment(agent, tuned=True)
    # The tuning module bypassed: no blocks, and the optimiser as the agent wrote it.
    for module in (ajax.agents.off_policy, ajax.agents.asac, ajax.agents.udrl):
        monkeypatch.setattr(module, "tuned_optimizer", lambda agent, optimizer: optimizer)
    assert off == _lowered_segment(make(), tuned=False)
    # Tuned, these small networks' weight gradients take YNNPACK's form, which barriers
    # keep apart; off, none does. (A replay agent's own barrier holds its count of update
    # calls, a scalar: ajax.agents.replay.)
    array_barriers = re.compile(r"optimization_barrier [^\n]*: tensor<\d[^\n]*f32>")
    assert array_barriers.search(tuned) and not array_barriers.search(off)


def test_without_jaxs_private_lowering_rules_a_run_goes_on_with_one_warning(monkeypatch):
    import jax.extend.random

    agent = PPO(env_id="CartPole-v1", n_envs=2, n_steps=16)
    monkeypatch.delattr(jax.extend.random, "threefry2x32_p")
    ajax._xla._cpu_lowering_rules.cache_clear()

    def run():
        # A run's segment may come from the program cache, traced in another process;
        # evaluate traces its program in this one.
        evaluate(agent.train(seed=[0, 1], n_timesteps=64), num_episodes=1)

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            monkeypatch.setenv(TUNING_ENV, "0")
            run()
            assert not [w for w in caught if "lowering rules" in str(w.message)]
            monkeypatch.setenv(TUNING_ENV, "1")
            for _ in range(2):
                run()
        warned = [w for w in caught if "lowering rules" in str(w.message)]
        assert len(warned) == 1 and "AJAX_CPU_TUNING=0" in str(warned[0].message)
    finally:
        monkeypatch.undo()
        ajax._xla._cpu_lowering_rules.cache_clear()
