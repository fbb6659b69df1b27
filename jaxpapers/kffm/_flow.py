r"""Functional flow matching (Kerrigan et al., 2024): the path, the regression loss, generation.

Conditional path between a prior function :math:`x_0` (a GP draw) and a data function :math:`x_1`:

.. math:: x_t = t\,x_1 + (1 - (1 - \sigma_{\min}) t)\,x_0, \qquad
          u_t(x_t \mid x_1) = \frac{x_1 - (1 - \sigma_{\min}) x_t}{1 - (1 - \sigma_{\min}) t}
          = x_1 - (1 - \sigma_{\min}) x_0 .

The last form (substitute :math:`x_t`) is what :func:`ffm_target` computes: it never divides by
:math:`1 - (1-\sigma_{\min})t`. The loss is :math:`\mathbb E_{t, (x_0, x_1)}\|v_\theta(x_t, t) -
u_t\|^2_{L^2}` with :math:`t \sim U[0, 1]` and :math:`(x_0, x_1)` from a pairing (independent for
FFM, a Hilbert-cost OT coupling for kFFM). Samples are :math:`x_1 \approx \Phi_1(x_0)`, the flow of
:math:`\dot x = v_\theta(x, t)` from :math:`t = 0` to 1, integrated with diffrax.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_finite, check_key, check_range, check_shape
from jaxpapers.kffm._hilbert_ot import check_functions

SIGMA_MIN = 1e-4
ApplyFn = Callable[[Any, jax.Array, jax.Array], jax.Array]


def _bcast(t: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.reshape(t, t.shape + (1,) * (x.ndim - t.ndim))


def ffm_interpolant(
    x0: Float[Array, "b grid"],
    x1: Float[Array, "b grid"],
    t: Float[Array, " b"],
    sigma_min: float = SIGMA_MIN,
) -> Float[Array, "b grid"]:
    r""":math:`x_t = t x_1 + (1 - (1 - \sigma_{\min}) t) x_0` (``t`` per sample)."""
    check_functions(x0, x1, ("x0", "x1"))
    check_shape("x1", x1, jnp.shape(x0))
    check_shape("t", t, jnp.shape(x0)[:1])
    check_finite("t", t)
    check_range("sigma_min", sigma_min, 0.0, 1.0)
    tb = _bcast(jnp.asarray(t, x0.dtype), x0)
    return tb * x1 + (1.0 - (1.0 - sigma_min) * tb) * x0


def ffm_target(
    x0: Float[Array, "b grid"], x1: Float[Array, "b grid"], sigma_min: float = SIGMA_MIN
) -> Float[Array, "b grid"]:
    r"""Conditional velocity :math:`u_t = x_1 - (1 - \sigma_{\min}) x_0` (constant in ``t``)."""
    check_functions(x0, x1, ("x0", "x1"))
    check_shape("x1", x1, jnp.shape(x0))
    check_range("sigma_min", sigma_min, 0.0, 1.0)
    return x1 - (1.0 - sigma_min) * x0


def regression_loss(
    apply_fn: ApplyFn,
    params: Any,
    x0: Float[Array, "b grid"],
    x1: Float[Array, "b grid"],
    t: Float[Array, " b"],
    sigma_min: float = SIGMA_MIN,
) -> Float[Array, ""]:
    r"""Flow-matching regression :math:`\frac1B\sum_i \|v_\theta(x_t^{(i)}, t_i) - u^{(i)}\|^2`
    (mean over grid points, i.e. the :math:`L^2` quadrature) for given pairs and times."""
    xt = ffm_interpolant(x0, x1, t, sigma_min)
    v = apply_fn(params, xt, t)
    return jnp.mean((v - ffm_target(x0, x1, sigma_min)) ** 2)


def flow_matching_loss(
    apply_fn: ApplyFn,
    params: Any,
    x1: Float[Array, "b grid"],
    *,
    key: jax.Array,
    prior: Any,
    pairing: Callable[..., Any],
    sigma_min: float = SIGMA_MIN,
) -> Float[Array, ""]:
    """(k)FFM training loss of one batch of data functions.

    Args:
      apply_fn: ``apply_fn(params, x [B, grid], t [B]) -> v [B, grid]``.
      params: model parameters.
      x1: ``[B, grid]`` data functions.
      key: PRNG key (prior draw, times, pair draw).
      prior: an object with ``sample(n, *, key) -> [n, grid]`` (e.g. a ``GaussianProcessPrior``).
      pairing: ``pairing(x0, x1, *, key) -> Pairing`` (independent, Euclidean or kernel OT, or
        :func:`make_pairing_fn` for data-parallel scope).
      sigma_min: minimal noise of the path.

    Returns:
      Scalar loss.
    """
    check_key("key", key)
    check_range("sigma_min", sigma_min, 0.0, 1.0)
    k0, kt, kp = jax.random.split(key, 3)
    x0 = prior.sample(x1.shape[0], key=k0).astype(x1.dtype)
    check_functions(x0, x1, ("prior samples", "x1"))
    pairs = pairing(x0, x1, key=kp)
    t = jax.random.uniform(kt, (x1.shape[0],), dtype=x1.dtype)
    return regression_loss(apply_fn, params, pairs.x0, pairs.x1, t, sigma_min)


class Generation(NamedTuple):
    """Output of :func:`generate`.

    Attributes:
      samples: ``x(1)``, same shape as ``x0``.
      nfe: number of vector-field evaluations (from the solver's step counts).
      steps: accepted solver steps.
    """

    samples: jax.Array
    nfe: jax.Array
    steps: jax.Array


_SOLVERS: dict[str, tuple[str, int, int]] = {
    # name: (diffrax class, new evaluations per step, extra first evaluation (FSAL))
    "euler": ("Euler", 1, 0),
    "heun": ("Heun", 2, 0),
    "midpoint": ("Midpoint", 2, 0),
    "tsit5": ("Tsit5", 6, 1),
    "dopri5": ("Dopri5", 6, 1),
}


def generate(
    vector_field: Callable[[jax.Array, jax.Array], jax.Array],
    x0: Float[Array, "b ..."],
    *,
    solver: Literal["euler", "heun", "midpoint", "tsit5", "dopri5"] = "tsit5",
    steps: int | jax.Array | None = None,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    max_steps: int = 4096,
) -> Generation:
    r"""Integrate :math:`\dot x = v(t, x)` from :math:`t = 0` to 1 with diffrax.

    Args:
      vector_field: ``vector_field(t, x) -> dx/dt`` for a batch ``x`` (``t`` a scalar).
      x0: initial functions (prior draws), any shape with a leading batch axis.
      solver: fixed-step ``"euler"``/``"heun"``/``"midpoint"`` (give ``steps``) or adaptive
        ``"tsit5"``/``"dopri5"`` (PID controller with ``rtol``/``atol``; ``steps`` ignored).
      steps: number of fixed steps; may be a traced integer (one compilation for many step
        counts) as long as it is at most ``max_steps``.
      rtol, atol: adaptive tolerances.
      max_steps: step limit (static).

    Returns:
      A :class:`Generation` with the samples and the count of field evaluations: steps x
      evaluations per step (+1 for the first-same-as-last stage of Tsit5/Dopri5; rejected steps
      of the adaptive solvers are counted as evaluations too).
    """
    import diffrax

    if solver not in _SOLVERS:
        raise ValueError(f"solver={solver!r}; expected one of {tuple(_SOLVERS)}")
    if jnp.ndim(x0) < 1:
        raise ValueError(f"x0 has shape {jnp.shape(x0)}; expected a leading batch axis")
    check_finite("x0", x0)
    check_range("rtol", rtol, 0.0, low_open=True)
    check_range("atol", atol, 0.0, low_open=True)
    cls_name, per_step, first = _SOLVERS[solver]
    adaptive = solver in ("tsit5", "dopri5")
    if not adaptive:
        if steps is None or (isinstance(steps, int) and steps < 1):
            raise ValueError(f"steps={steps!r}; fixed-step solver {solver!r} needs steps >= 1")
        if isinstance(steps, int) and steps > max_steps:
            raise ValueError(f"steps={steps} exceeds max_steps={max_steps}")
    term = diffrax.ODETerm(lambda t, y, args: vector_field(t, y))
    kwargs: dict[str, Any] = {"max_steps": max_steps}
    if adaptive:
        kwargs["stepsize_controller"] = diffrax.PIDController(rtol=rtol, atol=atol)
        kwargs["dt0"] = None
    else:
        kwargs["dt0"] = 1.0 / jnp.asarray(steps, dtype=jnp.result_type(float))
    sol = diffrax.diffeqsolve(term, getattr(diffrax, cls_name)(), t0=0.0, t1=1.0, y0=x0, **kwargs)
    n_steps = jnp.asarray(sol.stats["num_steps"])
    nfe = n_steps * per_step + first
    return Generation(sol.ys[-1], nfe, jnp.asarray(sol.stats["num_accepted_steps"]))


__all__ = [
    "SIGMA_MIN",
    "Generation",
    "ffm_interpolant",
    "ffm_target",
    "flow_matching_loss",
    "generate",
    "regression_loss",
]
