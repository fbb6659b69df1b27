"""flax.nnx layers: the diagonal LRU baseline, H-LRU and BD-LRU, ``[..., T, d] -> [..., T, d]``."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float

from jaxpapers.lrnn._checks import check_finite, check_mode
from jaxpapers.lrnn._recurrences import bdlru_recurrence, hlru_recurrence, lru_recurrence

# Gate projections start small, so every channel begins near its bias: a slowly decaying memory.
_GATE_INIT = nnx.initializers.variance_scaling(0.01, "fan_in", "normal")


def _check_input(x: Array, d_model: int, debug: bool) -> None:
    if jnp.ndim(x) < 2 or jnp.shape(x)[-1] != d_model:
        raise ValueError(f"x has shape {jnp.shape(x)}; expected [..., T, {d_model}] (d_model)")
    if debug:
        check_finite("x", x)


def _along_last(v: Array, x: Array) -> Array:
    """``v [n]`` reshaped to ``[1, ..., 1, n]`` for the last axis of ``x`` (no rank promotion)."""
    return v.reshape((1,) * (x.ndim - 1) + v.shape)


def _check_sizes(d_model: int, d_state: int) -> None:
    for name, v in (("d_model", d_model), ("d_state", d_state)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name}={v!r}; expected a positive integer")


def _memory_bias(key: jax.Array, rows: int, width: int, diag: int | None) -> Array:
    """Gate bias: weight 1 on the previous state, input gate c ~ U[0.01, 0.1] (keeps 91-99%)."""
    bias = jnp.zeros((rows, width + 1))
    cols = jnp.zeros((rows,), jnp.int32) if diag is None else jnp.arange(rows) % diag
    bias = bias.at[jnp.arange(rows), cols].set(1.0)
    return bias.at[:, -1].set(jax.random.uniform(key, (rows,), minval=0.01, maxval=0.1))


class LRU(nnx.Module):
    """Diagonal Linear Recurrent Unit (Orvieto et al., 2023), the baseline.

    .. math:: h_t = \\lambda \\odot h_{t-1} + \\gamma \\odot (B x_t), \\qquad
              y_t = \\mathrm{Re}(C h_t) + D \\odot x_t,

    with ``lambda = exp(-exp(nu) + i exp(theta))`` initialised uniformly on the ring
    ``r_min <= |lambda| <= r_max``, phase in ``[0, max_phase]``, and
    ``gamma = sqrt(1 - |lambda|^2)``.
    """

    def __init__(
        self,
        d_model: int,
        d_state: int,
        *,
        r_min: float = 0.9,
        r_max: float = 0.999,
        max_phase: float = 2 * math.pi,
        mode: str = "auto",
        chunk: int = 64,
        debug: bool = False,
        rngs: nnx.Rngs,
    ):
        _check_sizes(d_model, d_state)
        check_mode(mode, chunk)
        if not 0.0 <= r_min < r_max <= 1.0:
            raise ValueError(f"r_min={r_min}, r_max={r_max}; expected 0 <= r_min < r_max <= 1")
        self.d_model, self.d_state = d_model, d_state
        self.mode, self.chunk, self.debug = mode, chunk, debug
        k = jax.random.split(rngs.params(), 6)
        u1 = jax.random.uniform(k[0], (d_state,))
        u2 = jax.random.uniform(k[1], (d_state,))
        nu = -0.5 * jnp.log(u1 * (r_max**2 - r_min**2) + r_min**2)
        self.nu_log = nnx.Param(jnp.log(nu))
        self.theta_log = nnx.Param(jnp.log(max_phase * u2))
        self.gamma_log = nnx.Param(jnp.log(jnp.sqrt(1.0 - jnp.exp(-2.0 * nu))))
        scale_b = 1.0 / math.sqrt(2 * d_model)
        self.b_re = nnx.Param(jax.random.normal(k[2], (d_model, d_state)) * scale_b)
        self.b_im = nnx.Param(jax.random.normal(k[3], (d_model, d_state)) * scale_b)
        scale_c = 1.0 / math.sqrt(d_state)
        self.c_re = nnx.Param(jax.random.normal(k[4], (d_state, d_model)) * scale_c)
        self.c_im = nnx.Param(jax.random.normal(k[5], (d_state, d_model)) * scale_c)
        self.d = nnx.Param(jax.random.normal(rngs.params(), (d_model,)))

    def __call__(self, x: Float[Array, "*batch T d"]) -> Float[Array, "*batch T d"]:
        _check_input(x, self.d_model, self.debug)
        gamma = jnp.exp(self.gamma_log[...])
        u = (x @ self.b_re[...] + 1j * (x @ self.b_im[...])) * _along_last(gamma, x)
        h = lru_recurrence(
            self.nu_log[...], self.theta_log[...], u, mode=self.mode, chunk=self.chunk
        )
        return h.real @ self.c_re[...] - h.imag @ self.c_im[...] + x * _along_last(self.d[...], x)


def _init_projections(
    layer: nnx.Module, d_model: int, d_state: int, gates_per_state: int, bias, rngs: nnx.Rngs
) -> None:
    """The projections H-LRU and BD-LRU share: selective gates (``gates_per_state`` per state,
    biased towards memory), the value map, the readout ``C`` and the skip ``D``."""
    layer.gate = nnx.Linear(
        d_model,
        d_state * gates_per_state,
        kernel_init=_GATE_INIT,
        bias_init=lambda *_: bias,
        rngs=rngs,
    )
    layer.value = nnx.Linear(d_model, d_state, use_bias=False, rngs=rngs)
    layer.out = nnx.Linear(d_state, d_model, use_bias=False, rngs=rngs)
    layer.d = nnx.Param(jax.random.normal(rngs.params(), (d_model,)))


class HLRU(nnx.Module):
    """Higher-order Linear Recurrent Unit of order ``K`` with selective, L1-normalised gates.

    Per state channel ``n``: ``h_t = sum_k alpha_{t,k} h_{t-k} + alpha_{t,0} v_t`` where
    ``(alpha_{t,1..K}, alpha_{t,0}) = l1_normalise(W_g x_t + b_g)`` and ``v_t = W_v x_t``;
    output ``y_t = C h_t + D * x_t``.
    """

    def __init__(
        self,
        d_model: int,
        d_state: int,
        order: int,
        *,
        mode: str = "auto",
        chunk: int = 64,
        debug: bool = False,
        rngs: nnx.Rngs,
    ):
        _check_sizes(d_model, d_state)
        check_mode(mode, chunk)
        if not isinstance(order, int) or order < 1:
            raise ValueError(f"order={order!r}; expected an integer K >= 1")
        self.d_model, self.d_state, self.order = d_model, d_state, order
        self.mode, self.chunk, self.debug = mode, chunk, debug
        bias = _memory_bias(rngs.params(), d_state, order, None).reshape(-1)
        _init_projections(self, d_model, d_state, order + 1, bias, rngs)

    def __call__(self, x: Float[Array, "*batch T d"]) -> Float[Array, "*batch T d"]:
        _check_input(x, self.d_model, self.debug)
        gates = self.gate(x).reshape(*x.shape[:-1], self.d_state, self.order + 1)
        h = hlru_recurrence(gates, self.value(x), mode=self.mode, chunk=self.chunk)
        return self.out(h) + x * _along_last(self.d[...], x)


class BDLRU(nnx.Module):
    """Block-Diagonal Linear Recurrent Unit: dense ``b x b`` selective blocks, row-wise L1 gates.

    ``h_{t,g} = A_{t,g} h_{t-1,g} + alpha_{t,g} * v_{t,g}`` for each of the ``d_state / b``
    blocks, rows of ``[A_{t,g} | alpha_{t,g}]`` = ``l1_normalise`` of a linear map of ``x_t``;
    output ``y_t = C h_t + D * x_t``.
    """

    def __init__(
        self,
        d_model: int,
        d_state: int,
        block: int,
        *,
        mode: str = "auto",
        chunk: int = 64,
        debug: bool = False,
        rngs: nnx.Rngs,
    ):
        _check_sizes(d_model, d_state)
        check_mode(mode, chunk)
        if not isinstance(block, int) or block < 1 or d_state % block:
            raise ValueError(f"block={block!r} must be a positive divisor of d_state={d_state}")
        self.d_model, self.d_state, self.block = d_model, d_state, block
        self.mode, self.chunk, self.debug = mode, chunk, debug
        bias = _memory_bias(rngs.params(), d_state, block, block).reshape(-1)
        _init_projections(self, d_model, d_state, block + 1, bias, rngs)

    def __call__(self, x: Float[Array, "*batch T d"]) -> Float[Array, "*batch T d"]:
        _check_input(x, self.d_model, self.debug)
        b = self.block
        gates = self.gate(x).reshape(*x.shape[:-1], self.d_state // b, b, b + 1)
        h = bdlru_recurrence(gates, self.value(x), mode=self.mode, chunk=self.chunk)
        return self.out(h) + x * _along_last(self.d[...], x)
