"""How Ajax lowers and compiles an agent's programs for XLA.

**Matrix products.** On the CPU, the XLA of jaxlib 0.10 hands matrix products (and some
element-wise and reduction fusions) to YNNPACK by default, and the rest to Eigen and its own
code generator. For the batched products of updates through 256-unit layers (and ten such
critics at once for REDQ) Eigen measured faster on a 2-core AVX2 machine: REDQ's 20 critic
updates took a quarter less time, and DQN executed 55% faster, TD3 17%, PQN 9%, SAC 6%
(PERFORMANCE_REPORT.md, "YNNPACK against Eigen"). Through 64-unit layers YNNPACK was the
faster, by 7-20% for PPO and PQN; and for one-sample updates (AVG: a batch of one, so every
product is a vector-matrix product) AVG ran a third slower without it. So an agent's
products go to YNNPACK when its networks are narrow (:attr:`ajax.agents.base.Agent.ynnpack`)
and its programs are compiled with that. On a CPU with AVX-512 (:func:`cpu_has_avx512`),
where YNNPACK runs AVX-512 kernels and jaxlib's Eigen its AVX ones without FMA, the critic
agents and PQN send 256-unit products to YNNPACK as well (10-20% faster on a 2-core Zen 4;
DQN's were slower and stay with Eigen; PERFORMANCE_REPORT.md, "YNNPACK for wide networks
on AVX-512"). The option is per compile, so nothing else in the process changes. It is
left alone where the user's ``XLA_FLAGS`` names it already, off the CPU, and where this
jaxlib does not know it.

**The initialisation runs once.** The seeds' initial states are computed by a program that
runs once per run, in milliseconds, and whose compile took a fifth of a run's
compile-and-warm-up (PERFORMANCE_REPORT.md, "Where PPO's compile goes"). It is compiled
with XLA's backend optimisation off (:func:`compiler_options` with ``runs_once``), which
halves its compile: the code it makes runs a few times slower, on work that takes
milliseconds.

**Threefry unrolled.** Every ``jax.random`` call hashes with Threefry-2x32, whose 20 rounds
JAX lowers on the CPU as a loop of 5 iterations (to compile large programs faster), and
unrolled elsewhere. Inside the agents' programs, whose random calls are many and small, the
loop costs more than it saves: each iteration is a few tiny kernels plus copies of the loop's
carry (under the seeds' vmap, about 240 copies per environment step of PPO), where the
unrolled rounds fuse. Lowered unrolled, the segment programs compiled 2-17% faster for PPO,
PQN, DQN, SAC and TD3 at 1 and 8 seeds, and agent_bench's compile fell 9-21% for every agent;
execution moved from 21% faster (DQN) to level or 5-8% slower for PQN on 64-unit layers at
one seed (PERFORMANCE_REPORT.md, "Threefry unrolled, the initialisation at O0, YNNPACK by
width", and "One trace per iteration", where the 15-30% first read did not reproduce).
The hash is the same, so every random number is too. :func:`unrolled_threefry` scopes this
to the blocks Ajax lowers its programs in, so the user's own programs keep JAX's lowering.
The seeds' initialisation keeps the loop as well: it runs once, and rolled it is a third
fewer instructions, which shortened its compile (on another thread, alongside the segment's
trace) by 0.1-0.2 s for PPO and SAC (PERFORMANCE_REPORT.md, "The initialisation's Threefry").

**Weight gradients in the form the products' library takes.** A layer's weight gradient
is the product of its inputs, transposed, with the gradient of its outputs: a contraction
over the batch, the first axis of both. YNNPACK takes a product only where its left operand
is contracted over its last axis, so through narrow networks autodiff's weight gradients
went to Eigen, at about half YNNPACK's speed on a 64-unit layer. Where an agent's products
go to YNNPACK, :func:`weight_gradients_for` makes its layers (:func:`layer_product`)
transpose their inputs into a buffer of their own for the weight gradient
(:data:`YNNPACK_FORM`), a copy XLA would otherwise fold back into the product. At one seed
an iteration took 0.73-0.98 of the time (AVG 0.73, PQN 0.81-0.89, PPO 0.91-0.98;
PERFORMANCE_REPORT.md, "Weight gradients for YNNPACK"). Through Eigen that copy is pure
cost (DQN's 256-unit updates 13% slower, bit for bit the same results). There, autodiff's
own form costs something else: it contracts the output's gradient with the inputs and
transposes the result, and under a vmap (the critic ensembles, and the first layers XLA
merges into one product) XLA leaves the product transposed, so that the transposing copies
and the optimiser's passes read it across its rows. Written with the inputs first
(:data:`KERNEL_ORDER`), the product comes out in the kernel's own order: at the bench's
defaults on a 2-core AVX2 machine, REDQ's iteration took 0.85 of the time, PQN's 0.95, SAC's,
ASAC's and TD3's 0.96-0.97, but DQN's (no ensemble, batches of 64) 1.05. So the form is each
agent's choice (:attr:`ajax.agents.base.Agent.kernel_order_gradients`): the critic agents and
PQN take it, and the others keep autodiff's (PERFORMANCE_REPORT.md, "Weight gradients in the
kernel's order").
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ajax._compile_cache import cpuinfo_field

#: ``AJAX_CPU_TUNING=0`` turns every choice of this module off: the programs are then what
#: plain JAX lowers and XLA compiles by default.
TUNING_ENV = "AJAX_CPU_TUNING"


def tuning_enabled() -> bool:
    """Whether the choices of this module apply (``AJAX_CPU_TUNING`` is not ``0``)."""
    return os.environ.get(TUNING_ENV, "1").strip() != "0"


def set_cpu_tuning(enabled: bool) -> None:
    """Turn this module's choices on or off for the programs lowered from now on, as
    ``AJAX_CPU_TUNING`` does (and for processes this one starts)."""
    os.environ[TUNING_ENV] = "1" if enabled else "0"


#: The option's name; the empty list turns every YNNPACK fusion off.
YNN_FUSIONS = "xla_cpu_experimental_ynn_fusion_type"
#: XLA's backend (LLVM) optimisation level, 0-3; 2 by default.
BACKEND_OPT_LEVEL = "xla_backend_optimization_level"


@functools.cache
def _understood(option: str, value: Any) -> bool:
    """Whether this jaxlib's CPU compiler takes ``option`` (some are marked experimental)."""
    try:
        jax.jit(jnp.negative).lower(np.zeros(1, np.float32)).compile(
            compiler_options={option: value}
        )
    except jax.errors.JaxRuntimeError:
        return False
    return True


def compiler_options(agent: Any, runs_once: bool = False) -> dict[str, Any] | None:
    """The options to compile ``agent``'s programs with, or None for XLA's defaults;
    ``runs_once`` for a program that runs once per run (the seeds' initialisation)."""
    if jax.default_backend() != "cpu" or not tuning_enabled():
        return None
    options: dict[str, Any] = {}
    if not agent.ynnpack and not _user_sets(YNN_FUSIONS) and _understood(YNN_FUSIONS, ""):
        options[YNN_FUSIONS] = ""
    if runs_once and not _user_sets(BACKEND_OPT_LEVEL) and _understood(BACKEND_OPT_LEVEL, 0):
        options[BACKEND_OPT_LEVEL] = 0
    return options or None


@functools.cache
def cpu_has_avx512(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """Whether this machine's CPU has AVX-512: ``avx512f`` among the flags Linux reports in
    ``cpuinfo``; False where there is no such file."""
    return "avx512f" in (cpuinfo_field("flags", cpuinfo) or "").split()


def _user_sets(option: str) -> bool:
    """Whether the user's ``XLA_FLAGS`` name ``option``: Ajax then leaves it to them."""
    return option in os.environ.get("XLA_FLAGS", "")


@functools.cache
def _cpu_lowering_rules() -> tuple[dict, Any] | None:
    """JAX's CPU-only lowering rules and the Threefry primitive, reached through JAX's
    private modules; None, with one warning, where this JAX does not have them (the
    unrolled Threefry is then left off, and runs are otherwise the same)."""
    try:
        from jax._src.interpreters import mlir
        from jax.extend.random import threefry2x32_p

        return mlir._platform_specific_lowerings["cpu"], threefry2x32_p
    except (ImportError, AttributeError, KeyError) as error:
        warnings.warn(
            f"Ajax cannot reach JAX's CPU lowering rules in this JAX ({jax.__version__}: "
            f"{type(error).__name__}: {error}), so it lowers Threefry as JAX does: runs are the "
            f"same, their programs a little slower to compile. {TUNING_ENV}=0 turns the CPU "
            "tuning off and silences this.",
            stacklevel=2,
        )
        return None


@contextlib.contextmanager
def unrolled_threefry() -> Iterator[None]:
    """Within the block, JAX lowers Threefry for the CPU unrolled, as for other platforms.

    JAX registers the unrolled lowering for every platform and the rolled loop as the CPU's
    own; the block takes the CPU's away, so the common rule applies, and puts it back after.
    A no-op with the tuning off, or where JAX's rules cannot be reached.
    """
    rules = _cpu_lowering_rules() if tuning_enabled() else None
    if rules is None:
        yield
        return
    cpu_rules, threefry2x32_p = rules
    rolled = cpu_rules.pop(threefry2x32_p, None)
    try:
        yield
    finally:
        if rolled is not None:
            cpu_rules[threefry2x32_p] = rolled


#: The weight gradients :func:`layer_product` traces (:data:`YNNPACK_FORM`,
#: :data:`KERNEL_ORDER`, or None for autodiff's own); set at trace time by
#: :func:`weight_gradients_for`.
_WEIGHT_GRADIENTS: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "weight_gradients", default=None
)
#: The inputs transposed into a buffer of their own first, so that YNNPACK takes the product.
YNNPACK_FORM = "ynnpack"
#: One contraction over the batch axes, written inputs first, so that the product comes out
#: in the kernel's own order (Eigen's products).
KERNEL_ORDER = "kernel-order"


def products_go_to_ynnpack(agent: Any) -> bool:
    """Whether ``agent``'s programs hand their matrix products to YNNPACK: on the CPU, for
    narrow networks (:attr:`ajax.agents.base.Agent.ynnpack`), unless the user's
    ``XLA_FLAGS`` choose the YNNPACK fusions themselves."""
    return jax.default_backend() == "cpu" and agent.ynnpack and not _user_sets(YNN_FUSIONS)


def weight_gradient_form(agent: Any) -> str | None:
    """The form of ``agent``'s layers' weight gradients: :data:`YNNPACK_FORM` where its
    products go to YNNPACK, :data:`KERNEL_ORDER` where they go to Eigen on the CPU and the
    agent takes it (:attr:`ajax.agents.base.Agent.kernel_order_gradients`), else None
    (autodiff's own, and always off the CPU)."""
    if not tuning_enabled():
        return None
    if products_go_to_ynnpack(agent):
        return YNNPACK_FORM
    eigen = jax.default_backend() == "cpu"
    return KERNEL_ORDER if eigen and agent.kernel_order_gradients else None


@contextlib.contextmanager
def weight_gradients_for(agent: Any) -> Iterator[None]:
    """Within the block (on this thread), :func:`layer_product` traces its weight gradients
    in ``agent``'s form (:func:`weight_gradient_form`)."""
    token = _WEIGHT_GRADIENTS.set(weight_gradient_form(agent))
    try:
        yield
    finally:
        _WEIGHT_GRADIENTS.reset(token)


def layer_product(
    inputs: jax.Array,
    kernel: jax.Array,
    dimension_numbers: Any,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> jax.Array:
    """A dense layer's product (``flax.linen.Dense``'s ``dot_general``): ``lax.dot_general``
    itself, except inside :func:`weight_gradients_for` an agent with a form of its own,
    where a layer's product (the inputs' last axis with the kernel's first, at the default
    precision) takes its weight gradient in that form. The YNNPACK form leaves a layer of
    one output to autodiff (:func:`_ynnpack_takes_gradient`)."""
    form = _WEIGHT_GRADIENTS.get()
    layer = (((inputs.ndim - 1,), (0,)), ((), ()))
    plain = precision is None and preferred_element_type is None
    ours = form is not None and dimension_numbers == layer and plain
    if ours and form == KERNEL_ORDER:
        return _product_in_kernel_order(inputs, kernel)
    if ours and _ynnpack_takes_gradient(kernel):
        return _product_for_ynnpack(inputs, kernel)
    return lax.dot_general(
        inputs,
        kernel,
        dimension_numbers,
        precision=precision,
        preferred_element_type=preferred_element_type,
    )


def _ynnpack_takes_gradient(kernel: jax.Array) -> bool:
    """Whether YNNPACK would take the weight gradient of a layer with ``kernel``: not for a
    layer of one output (a critic's last), whose gradient is a matrix-vector product, which
    YNNPACK refuses and XLA's own emitter takes in either form, so that the transpose would
    be pure cost (PERFORMANCE_REPORT.md, "Critics' last layers")."""
    return kernel.shape[-1] > 1


def _layer(inputs: jax.Array, kernel: jax.Array) -> jax.Array:
    """``inputs [..., n_in] @ kernel [n_in, n_out]``."""
    return lax.dot_general(inputs, kernel, (((inputs.ndim - 1,), (0,)), ((), ())))


def _saved(inputs: jax.Array, kernel: jax.Array) -> tuple[jax.Array, tuple]:
    return _layer(inputs, kernel), (inputs, kernel)


def _input_gradient(kernel: jax.Array, grad: jax.Array) -> jax.Array:
    """The gradient of a layer's inputs, as autodiff writes it: ``grad @ kernel.T``."""
    return lax.dot_general(grad, kernel, (((grad.ndim - 1,), (1,)), ((), ())))


def _ynnpack_backward(saved: tuple, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    inputs, kernel = saved
    # The barrier keeps the transpose a buffer of its own: XLA would fold it into the
    # product's dimensions, giving back the contraction over the first axis.
    inputs_t = lax.optimization_barrier(inputs.reshape(-1, inputs.shape[-1]).T)
    grad_kernel = inputs_t @ grad.reshape(-1, grad.shape[-1])
    return _input_gradient(kernel, grad), grad_kernel


def _kernel_order_backward(saved: tuple, grad: jax.Array) -> tuple[jax.Array, jax.Array]:
    inputs, kernel = saved
    # Autodiff contracts the output's gradient with the inputs and transposes the result,
    # which XLA folds into whatever reads it: the optimiser's passes then read the weight
    # gradient across its rows. Inputs first, the product is written in the kernel's order.
    batch = tuple(range(inputs.ndim - 1))
    grad_kernel = lax.dot_general(inputs, grad, ((batch, batch), ((), ())))
    return _input_gradient(kernel, grad), grad_kernel


_product_for_ynnpack = jax.custom_vjp(_layer)
_product_for_ynnpack.defvjp(_saved, _ynnpack_backward)
_product_in_kernel_order = jax.custom_vjp(_layer)
_product_in_kernel_order.defvjp(_saved, _kernel_order_backward)
