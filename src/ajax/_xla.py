"""Every CPU-specific choice in how Ajax lowers and compiles an agent's programs, and the one
switch that turns them off (``AJAX_CPU_TUNING=0``, or :func:`set_cpu_tuning`).

Each choice makes the same program faster on the CPU and leaves its results alone (bit for
bit, except where a product's summation order changes); the design notes in
``docs/developer-performance.md`` give the reasons and ``PERFORMANCE_REPORT.md`` the figures.

- **Products by width.** XLA's CPU backend hands matrix products to YNNPACK by default.
  Through 64-unit layers YNNPACK is the faster; through 256-unit updates Eigen is, except
  on AVX-512, where YNNPACK's kernels win for the critic agents and PQN. An agent's programs
  are compiled without YNNPACK's fusions where its widest layer exceeds its limit
  (:class:`AgentTuning`, :func:`compiler_options`); DreamerV3's keep YNNPACK's single
  products, nothing fused into them.
- **Weight gradients in the products' form** (:func:`weight_gradients_for`): for YNNPACK,
  the inputs transposed into a buffer of their own (YNNPACK takes only products contracted
  over the left operand's last axis); for Eigen, where the agent's entry asks, the
  contraction written inputs first so that it comes out in the kernel's order.
- **Threefry unrolled** (:func:`unrolled_threefry`): JAX lowers the hash's 20 rounds on the
  CPU as a loop, whose carry copies cost more than they save in programs of many small
  random calls. The numbers drawn are the same. Not for an agent whose entry says so
  (TD-MPC2): there the unrolled hash of large draws is fused into each of their uses.
- **The initialisation at O0** (:func:`compiler_options` with ``runs_once``): it runs once,
  in milliseconds, so a shorter compile beats faster code.
- **The optimiser over one vector** (:func:`tuned_optimizer`): through narrow networks an
  update is bound by its number of kernels, and one vector is a few kernels where every leaf
  was a few.

:data:`TUNING` holds each agent's entry. JAX's private lowering rules (for Threefry) are
reached lazily; where this JAX lacks them, runs go on with one warning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from ajax._compile_cache import cpuinfo_field
from ajax.nn.mlp import layer_products

#: ``AJAX_CPU_TUNING=0`` turns every choice of this module off: the programs are then what
#: plain JAX lowers and XLA compiles by default.
TUNING_ENV = "AJAX_CPU_TUNING"
#: The choices, each of which :func:`without` can turn off alone (for A/B measurements).
CHOICES = (
    "products_by_width",
    "weight_gradients",
    "unrolled_threefry",
    "init_at_o0",
    "flat_optimizer",
)
#: The choices turned off in this process by :func:`without`.
_TURNED_OFF: set[str] = set()


def tuning_enabled() -> bool:
    """Whether the choices of this module apply (``AJAX_CPU_TUNING`` is not ``0``)."""
    return os.environ.get(TUNING_ENV, "1").strip() != "0"


def set_cpu_tuning(enabled: bool) -> None:
    """Turn this module's choices on or off for the programs lowered from now on, as
    ``AJAX_CPU_TUNING`` does (and for processes this one starts)."""
    os.environ[TUNING_ENV] = "1" if enabled else "0"


def applies(choice: str) -> bool:
    """Whether ``choice`` (one of :data:`CHOICES`) applies to programs lowered now."""
    return tuning_enabled() and choice not in _TURNED_OFF


def active_choices() -> tuple[str, ...]:
    """The choices that apply now: part of the program cache's key."""
    return tuple(choice for choice in CHOICES if applies(choice))


@contextlib.contextmanager
def without(*choices: str) -> Iterator[None]:
    """Within the block, ``choices`` are off for every program lowered and every agent built,
    the rest as they were: how ``benchmarks/tuning_ab.py`` measures one choice at a time."""
    unknown = set(choices) - set(CHOICES)
    if unknown:
        raise ValueError(f"Unknown tuning choices {sorted(unknown)}; they are {list(CHOICES)}.")
    added = set(choices) - _TURNED_OFF
    _TURNED_OFF.update(added)
    try:
        yield
    finally:
        _TURNED_OFF.difference_update(added)


@dataclasses.dataclass(frozen=True)
class AgentTuning:
    """One agent's CPU choices, by the width of its widest hidden layer (its config's
    ``hidden_sizes``; 0 where it names none)."""

    #: The widest layer whose products go to YNNPACK; wider go to Eigen.
    ynnpack_max_width: float = 64
    #: The same on a CPU with AVX-512 (:func:`cpu_has_avx512`).
    ynnpack_max_width_avx512: float = 64
    #: Where its products go to Eigen, whether its weight gradients are written in the
    #: kernel's order (:data:`KERNEL_ORDER`) rather than autodiff's.
    kernel_order_gradients: bool = False
    #: The widest layer at which its optimiser runs over one vector (:func:`tuned_optimizer`).
    flat_optimizer_max_width: float = 0
    #: Whether its segment hashes Threefry unrolled (:func:`unrolled_threefry`).
    unrolled_threefry: bool = True
    #: Where its products go to Eigen, whether YNNPACK still takes each product it supports
    #: on its own (:data:`SINGLE_PRODUCTS`), the element-wise work and reductions left to
    #: XLA's fusions and the weight gradients in autodiff's form.
    ynnpack_single_products: bool = False


_CRITICS = AgentTuning(
    ynnpack_max_width_avx512=math.inf, kernel_order_gradients=True, flat_optimizer_max_width=64
)
#: Each agent's entry, found by class name along the agent's bases (REDQ and ASAC take SAC's);
#: an agent with none takes :class:`AgentTuning`'s defaults. The critic agents' and PQN's
#: 256-unit updates run faster through YNNPACK on AVX-512 and in the kernel's order through
#: Eigen; AVG's updates are of one sample (vector-matrix products), faster through YNNPACK at
#: any width; narrow networks' optimisers are bound by their kernel count. DQN's updates (no
#: ensemble, batches of 64) measured slower in both YNNPACK and the kernel's order. TD-MPC2's
#: products go to Eigen at any width: under the seeds' vmap YNNPACK also takes its many small
#: reductions (LayerNorm, two-hot), which then ran several times slower, and its update with
#: them (its width, 64 at "cpu", is its preset's, not a ``hidden_sizes``). Its Threefry stays
#: JAX's loop: unrolled, the hash of its Q-functions' dropout masks was fused into the update's
#: backward pass and computed there again, in transposing copies, about a fifth of its run.
#: DreamerV3's fusions stay off too: YNNPACK's weight-gradient form transposed its 16,384
#: imagined features (640 wide) for the actor's and critic's first layers, and its fusions
#: took the heads' normalisations, an update 13% slower (kernel order: no faster than YNNPACK).
#: Its single products go to YNNPACK: Eigen ran its recurrent steps' 16-row products up to six
#: times slower where the weight is the transposed operand (every input gradient).
TUNING: dict[str, AgentTuning] = {
    "SAC": _CRITICS,
    "TD3": _CRITICS,
    "PQN": AgentTuning(ynnpack_max_width_avx512=math.inf, kernel_order_gradients=True),
    "AVG": AgentTuning(ynnpack_max_width=math.inf, ynnpack_max_width_avx512=math.inf),
    "UDRL": AgentTuning(flat_optimizer_max_width=64),
    "DreamerV3": AgentTuning(
        ynnpack_max_width=-math.inf,
        ynnpack_max_width_avx512=-math.inf,
        ynnpack_single_products=True,
    ),
    "TDMPC2": AgentTuning(
        ynnpack_max_width=-math.inf, ynnpack_max_width_avx512=-math.inf, unrolled_threefry=False
    ),
}


def tuning_of(agent: Any) -> AgentTuning:
    """``agent``'s entry in :data:`TUNING`: that of the first of its classes, from its own
    along its bases, that is one of Ajax's agents and has one."""
    for cls in type(agent).__mro__:
        if cls.__module__.startswith("ajax.agents.") and cls.__name__ in TUNING:
            return TUNING[cls.__name__]
    return AgentTuning()


def _widest_layer(agent: Any) -> int:
    """The widest hidden layer ``agent``'s config names (``hidden_sizes``), 0 if none."""
    return max(getattr(agent.config, "hidden_sizes", ()), default=0)


def _narrow_for_ynnpack(agent: Any) -> bool:
    """Whether ``agent``'s layers are narrow enough for its products to go to YNNPACK."""
    entry = tuning_of(agent)
    limit = entry.ynnpack_max_width_avx512 if cpu_has_avx512() else entry.ynnpack_max_width
    return _widest_layer(agent) <= limit


def tuned_optimizer(
    agent: Any, optimizer: optax.GradientTransformation
) -> optax.GradientTransformation:
    """``optimizer`` over one vector of every parameter (``optax.flatten``) where ``agent``'s
    layers are no wider than its entry's ``flat_optimizer_max_width``; as given otherwise.
    Through wider layers concatenating the gradients and splitting the step cost more than
    they saved."""
    narrow = _widest_layer(agent) <= tuning_of(agent).flat_optimizer_max_width
    return optax.flatten(optimizer) if narrow and applies("flat_optimizer") else optimizer


#: The option's name; the empty list turns every YNNPACK fusion off.
YNN_FUSIONS = "xla_cpu_experimental_ynn_fusion_type"
#: The option's value that leaves YNNPACK each product it supports, alone: no element-wise
#: work or reductions fused into it.
SINGLE_PRODUCTS = "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"
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
    ``runs_once`` for a program that runs once per run (the seeds' initialisation). An option
    the user's ``XLA_FLAGS`` name is left to them."""
    if jax.default_backend() != "cpu":
        return None
    options: dict[str, Any] = {}
    to_eigen = applies("products_by_width") and not _narrow_for_ynnpack(agent)
    if to_eigen and not _user_sets(YNN_FUSIONS):
        single = tuning_of(agent).ynnpack_single_products
        fusions = SINGLE_PRODUCTS if single and _understood(YNN_FUSIONS, SINGLE_PRODUCTS) else ""
        if _understood(YNN_FUSIONS, fusions):
            options[YNN_FUSIONS] = fusions
    at_o0 = runs_once and applies("init_at_o0")
    if at_o0 and not _user_sets(BACKEND_OPT_LEVEL) and _understood(BACKEND_OPT_LEVEL, 0):
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
def unrolled_threefry(agent: Any) -> Iterator[None]:
    """Within the block, JAX lowers Threefry for the CPU unrolled, as for other platforms, for
    ``agent``'s programs.

    JAX registers the unrolled lowering for every platform and the rolled loop as the CPU's
    own; the block takes the CPU's away, so the common rule applies, and puts it back after.
    A no-op with the tuning off, where ``agent``'s entry keeps the loop, or where JAX's rules
    cannot be reached.
    """
    wanted = applies("unrolled_threefry") and tuning_of(agent).unrolled_threefry
    rules = _cpu_lowering_rules() if wanted else None
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


#: The inputs transposed into a buffer of their own first, so that YNNPACK takes the product.
YNNPACK_FORM = "ynnpack"
#: One contraction over the batch axes, written inputs first, so that the product comes out
#: in the kernel's own order (Eigen's products).
KERNEL_ORDER = "kernel-order"


def products_go_to_ynnpack(agent: Any) -> bool:
    """Whether ``agent``'s programs hand their matrix products to YNNPACK: on the CPU, unless
    its layers are too wide for its entry or the user's ``XLA_FLAGS`` choose the YNNPACK
    fusions themselves."""
    if jax.default_backend() != "cpu" or _user_sets(YNN_FUSIONS):
        return False
    return not applies("products_by_width") or _narrow_for_ynnpack(agent)


def weight_gradient_form(agent: Any) -> str | None:
    """The form of ``agent``'s layers' weight gradients: :data:`YNNPACK_FORM` where its
    products go to YNNPACK, :data:`KERNEL_ORDER` where they go to Eigen on the CPU and its
    entry asks, else None (autodiff's own, and always off the CPU)."""
    if not applies("weight_gradients"):
        return None
    if products_go_to_ynnpack(agent):
        return YNNPACK_FORM
    eigen = jax.default_backend() == "cpu"
    return KERNEL_ORDER if eigen and tuning_of(agent).kernel_order_gradients else None


@contextlib.contextmanager
def weight_gradients_for(agent: Any) -> Iterator[None]:
    """Within the block (on this thread), the layers :func:`ajax.nn.dense` makes take their
    weight gradients in ``agent``'s form (:func:`weight_gradient_form`); Flax's own where it
    has none."""
    form = weight_gradient_form(agent)
    product = None if form is None else functools.partial(layer_product, form)
    with layer_products(product):
        yield


def layer_product(
    form: str,
    inputs: jax.Array,
    kernel: jax.Array,
    dimension_numbers: Any,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> jax.Array:
    """A dense layer's product (``flax.linen.Dense``'s ``dot_general``) with its weight
    gradient in ``form``: for a layer's product (the inputs' last axis with the kernel's
    first, at the default precision); ``lax.dot_general`` itself for any other. The YNNPACK
    form leaves a layer of one output to autodiff (:func:`_ynnpack_takes_gradient`)."""
    layer = (((inputs.ndim - 1,), (0,)), ((), ()))
    ours = dimension_numbers == layer and precision is None and preferred_element_type is None
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
    be pure cost."""
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
