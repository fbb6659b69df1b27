r"""One-step risk of LAMP on a Gaussian prior: exact bias-variance terms and a Monte-Carlo check.

Set-up (see the derivation in ``_lamp.py``): prior :math:`\mathcal N(\mu, vI)`, measurement
:math:`y = Ax_0 + \sigma_y n`, so the posterior is :math:`\mathcal N(m, C)` and its noised marginals
:math:`\mathcal N(\alpha_t m, \alpha_t^2 C + \sigma_t^2 I)` are exact. The backbone is
deterministic DiffPIR (:math:`\zeta = 0`) with the exact denoiser, so every map is affine. Draw
:math:`x_{t_{\rm prev}}` from the exact posterior marginal, take one backbone step to :math:`t`
(this sets LAMP's memory), then one step to :math:`t'` with the backbone and with LAMP. The ideal
transition is the posterior's probability-flow map
:math:`\Phi^\star(x) = \alpha_{t'} m + (\alpha_{t'}^2 C + \sigma_{t'}^2 I)^{1/2}
(\alpha_t^2 C + \sigma_t^2 I)^{-1/2}(x - \alpha_t m)` (the matrices commute).

With :math:`e = x^{\rm B}_{t'} - \Phi^\star(x_t)` and :math:`g = x^{\rm LAMP(\gamma=1)}_{t'} -
x^{\rm B}_{t'}`, :math:`R(\gamma) = R(0) + 2\gamma\,\mathbb E\langle e, g\rangle + \gamma^2
\mathbb E\lVert g\rVert^2`; each expectation splits into a bias part (product of means) and a
variance part (a trace), computed exactly from the affine maps' Jacobians.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from jaxpapers.core.checks import check_finite, check_int, check_key, check_range, check_shape
from jaxpapers.core.diffusion import DenoiserTerm, GaussianMixture, VPSchedule, zero_count
from jaxpapers.lamp._diffpir import DiffPIR
from jaxpapers.lamp._lamp import Lamp, LampMemory
from jaxpapers.lamp._operators import MatrixOperator


class OneStepRisk(NamedTuple):
    """Exact one-step risk terms (all scalars).

    Attributes:
      risk_backbone: :math:`R(0) = \\mathbb E\\lVert e\\rVert^2`.
      cross_bias, cross_variance: bias and variance parts of
        :math:`\\mathbb E\\langle e, g\\rangle`.
      increment_bias, increment_variance: the same for :math:`\\mathbb E\\lVert g\\rVert^2`.
      best_strength: :math:`\\gamma^\\star = -\\mathbb E\\langle e,g\\rangle/\\mathbb E\\lVert
        g\\rVert^2`; LAMP with strength :math:`\\gamma` helps iff :math:`0<\\gamma<2\\gamma^\\star`.
    """

    risk_backbone: Array
    cross_bias: Array
    cross_variance: Array
    increment_bias: Array
    increment_variance: Array
    best_strength: Array

    def risk(self, strength: ArrayLike) -> Array:
        """:math:`R(\\gamma)`."""
        cross = self.cross_bias + self.cross_variance
        inc = self.increment_bias + self.increment_variance
        return self.risk_backbone + 2 * strength * cross + strength**2 * inc


def _problem(mean, var, matrix, y, sigma_y, schedule, lam):
    prior = GaussianMixture(mean[None, :], jnp.ones(1, mean.dtype), var)
    term = DenoiserTerm(lambda x, t: prior.eps(x, t, schedule), schedule)
    bb = DiffPIR(_DenseOperator(matrix), sigma_y, lam=lam, zeta=0.0)
    post = prior.posterior(matrix, y, sigma_y)
    return term, bb, post.means[0], post.chol @ post.chol.T


class _DenseOperator(MatrixOperator):
    """A matrix operator whose SVD is computed with ``jnp`` (traceable inside ``jit``)."""

    def __init__(self, matrix):
        self.a = matrix
        self.in_shape, self.out_shape = (matrix.shape[1],), (matrix.shape[0],)
        self.u, self.s, self.vt = jnp.linalg.svd(matrix, full_matrices=False)


def _check(mean, var, matrix, y, sigma_y, t_prev, t, t_next, lam) -> None:
    """Shapes always; values when concrete (times decreasing in (0, 1], sigma_y and var > 0)."""
    if jnp.ndim(mean) != 1:
        raise ValueError(f"mean has shape {jnp.shape(mean)}; expected [d]")
    if jnp.ndim(matrix) != 2 or jnp.shape(matrix)[1] != jnp.shape(mean)[0]:
        raise ValueError(
            f"matrix has shape {jnp.shape(matrix)}; expected [m, {jnp.shape(mean)[0]}]"
        )
    check_shape("y", y, jnp.shape(matrix)[:1])
    for name, v in (("mean", mean), ("matrix", matrix), ("y", y)):
        check_finite(name, v)
    check_range("var", var, 0.0, low_open=True)
    check_range("sigma_y", sigma_y, 0.0, low_open=True)
    check_range("lam", lam, 0.0, low_open=True)
    check_range("t_next", t_next, 0.0, 1.0, low_open=True)
    check_range("t", t, float(t_next) if _known(t_next) else 0.0, 1.0, low_open=True)
    check_range("t_prev", t_prev, float(t) if _known(t) else 0.0, 1.0, low_open=True)


def _known(v) -> bool:
    return not isinstance(v, jax.core.Tracer) and jnp.ndim(v) == 0 and bool(jnp.isfinite(v))


def _maps(mean, var, matrix, y, sigma_y, schedule, t_prev, t, t_next, lam):
    """The affine map x_prev -> (e, g) and the law of x_prev."""
    _check(mean, var, matrix, y, sigma_y, t_prev, t, t_next, lam)
    term, bb, m, cov = _problem(mean, var, matrix, y, sigma_y, schedule, lam)
    lamp1 = Lamp(bb, 1.0, lag="data_consistent")
    key = jax.random.key(0)  # unused: zeta = 0 draws no noise into the state
    n0 = zero_count()
    a, s = schedule.alpha(t), schedule.sigma(t)
    a1, s1 = schedule.alpha(t_next), schedule.sigma(t_next)
    evals, evecs = jnp.linalg.eigh(cov)
    scale = jnp.sqrt((a1**2 * evals + s1**2) / (a**2 * evals + s**2))
    flow = (evecs * scale[None, :]) @ evecs.T

    def f(x_prev):
        x0_prev, _, _ = bb.estimate(term, x_prev, t_prev, t, y, n0)
        x_t = bb.renoise_step(schedule, x_prev, x0_prev, t_prev, t, y, key)
        x_b, _, _ = bb.transition(term, x_t, t, t_next, y, None, key, n0)
        mem = LampMemory(x0_prev, jnp.asarray(t_prev, x_t.dtype), jnp.ones((), bool))
        x_l, _, _ = lamp1.transition(term, x_t, t, t_next, y, mem, key, n0)
        target = a1 * m + flow @ (x_t - a * m)
        return x_b - target, x_l - x_b

    ap, sp = schedule.alpha(t_prev), schedule.sigma(t_prev)
    law_mean = ap * m
    law_cov = ap**2 * cov + sp**2 * jnp.eye(m.shape[0], dtype=m.dtype)
    return f, law_mean, law_cov


def one_step_risk(
    mean: Float[Array, " d"],
    var: ArrayLike,
    matrix: Float[Array, "m d"],
    y: Float[Array, " m"],
    sigma_y: ArrayLike,
    schedule: VPSchedule,
    t_prev: ArrayLike,
    t: ArrayLike,
    t_next: ArrayLike,
    *,
    lam: ArrayLike = 1.0,
) -> OneStepRisk:
    """Exact one-step risk terms of LAMP over deterministic DiffPIR on a Gaussian prior.

    Args:
      mean, var: prior :math:`\\mathcal N(\\mu, vI)`.
      matrix, y, sigma_y: measurement :math:`y = Ax_0 + \\sigma_y n` (``sigma_y > 0``).
      schedule: VP schedule.
      t_prev, t, t_next: consecutive decreasing times (``t_next > 0``).
      lam: DiffPIR's :math:`\\lambda`.

    Returns:
      :class:`OneStepRisk`.
    """
    f, mu, cov = _maps(mean, var, matrix, y, sigma_y, schedule, t_prev, t, t_next, lam)
    e0, g0 = f(mu)
    je, jg = jax.jacfwd(f)(mu)
    risk = e0 @ e0 + jnp.trace(je @ cov @ je.T)
    cb, cv = e0 @ g0, jnp.trace(je @ cov @ jg.T)
    ib, iv = g0 @ g0, jnp.trace(jg @ cov @ jg.T)
    return OneStepRisk(risk, cb, cv, ib, iv, -(cb + cv) / (ib + iv))


def monte_carlo_one_step_risk(
    mean: Float[Array, " d"],
    var: ArrayLike,
    matrix: Float[Array, "m d"],
    y: Float[Array, " m"],
    sigma_y: ArrayLike,
    schedule: VPSchedule,
    t_prev: ArrayLike,
    t: ArrayLike,
    t_next: ArrayLike,
    strength: ArrayLike,
    *,
    key: Array,
    n: int = 4096,
    lam: ArrayLike = 1.0,
) -> tuple[Array, Array]:
    """Monte-Carlo ``(R_backbone, R_LAMP(strength))`` by running the samplers' steps on ``n``
    draws of :math:`x_{t_{\\rm prev}}` (same set-up as :func:`one_step_risk`)."""
    check_key("key", key)
    check_int("n", n, minimum=1)
    check_finite("strength", strength)
    f, mu, cov = _maps(mean, var, matrix, y, sigma_y, schedule, t_prev, t, t_next, lam)
    chol = jnp.linalg.cholesky(cov)
    xs = mu[None, :] + jax.random.normal(key, (n, mu.shape[0]), mu.dtype) @ chol.T
    e, g = jax.vmap(f)(xs)
    return jnp.mean(jnp.sum(e**2, -1)), jnp.mean(jnp.sum((e + strength * g) ** 2, -1))
