r"""Training objectives: conditional denoising with label dropout (for CFG), GFT, Model-Guidance
and SCALE. Every loss is a batch mean of an epsilon-prediction squared error and reduces to the
plain conditional loss in a stated limit (the tests check each limit and each stop-gradient).

With :math:`x_t = \alpha_t x_0 + \sigma_t\epsilon`, :math:`t \sim U[t_{\min}, 1]` and
:math:`\tilde c` the label replaced by the null label :math:`\varnothing` with probability
``p_uncond``:

* conditional: :math:`\|\epsilon_\theta(x_t, \tilde c) - \epsilon\|^2`;
* GFT (Chen et al. 2025): :math:`\|\beta\,\epsilon_\theta(x_t, c, \beta) + (1 - \beta)\,
  \mathrm{sg}[\epsilon_\theta(x_t, \varnothing, 1)] - \epsilon\|^2`, :math:`\beta \sim
  U[\beta_{\min}, 1]` (``beta = 1`` on dropped labels); sampling uses
  :math:`\epsilon_\theta(x, c, 1/w)`. ``beta_min = 1`` is the conditional loss;
* Model-Guidance (Tang et al. 2025): target :math:`\epsilon + (1 - 1/w)\,\mathrm{sg}[
  \epsilon_{\bar\theta}(x_t, c) - \epsilon_{\bar\theta}(x_t, \varnothing)]` with EMA weights
  :math:`\bar\theta` (dropped labels keep :math:`\epsilon`). The teacher is the model itself, so
  the fixed point is :math:`\epsilon_\theta(c) = \epsilon_\varnothing + w(\epsilon_c -
  \epsilon_\varnothing)`, CFG of scale ``w`` (a coefficient ``w - 1`` would compound to
  ``1 / (2 - w)``); ``w = 1`` is the conditional loss;
* SCALE (this paper, derived in the package docstring), parameters :math:`(\theta, \psi)`: on
  real data :math:`\|\tfrac1w\epsilon_\theta(x_t, c) + (1 - \tfrac1w)\,\mathrm{sg}[
  \epsilon_\psi(x_t, c)] - \epsilon\|^2` plus ``self_weight`` times
  :math:`\|\epsilon_\psi(\tilde x_t, \tilde c) - \tilde\epsilon\|^2` on the model's own
  samples :math:`\tilde x_0` (no gradient through them). ``w = 1`` makes the real-data term the
  conditional loss of :math:`\theta`; ``self_weight = 0`` as well makes it the whole loss.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int, PyTree

from jaxpapers.core.checks import check_key, check_positive
from jaxpapers.core.diffusion import VPSchedule
from jaxpapers.scale._network import GUIDED, Denoiser

T_MIN = 1e-3


class Noised(NamedTuple):
    """A noised batch: ``x_t``, the times ``t [b]`` and the noise ``eps``."""

    x_t: Array
    t: Array
    eps: Array


def noise_batch(x0: Float[Array, "b ..."], *, key: Array, schedule: VPSchedule) -> Noised:
    r"""Draw :math:`t \sim U[t_{\min}, 1]`, :math:`\epsilon \sim \mathcal N(0, I)` and return
    :math:`x_t = \alpha_t x_0 + \sigma_t \epsilon`."""
    check_key("key", key)
    kt, ke = jax.random.split(key)
    t = jax.random.uniform(kt, x0.shape[:1], x0.dtype, T_MIN, 1.0)
    eps = jax.random.normal(ke, x0.shape, x0.dtype)
    bshape = (-1,) + (1,) * (x0.ndim - 1)
    a, s = schedule.alpha(t).reshape(bshape), schedule.sigma(t).reshape(bshape)
    return Noised(a * x0 + s * eps, t, eps)


def drop_labels(labels: Int[Array, " b"], p: ArrayLike, null: int, *, key: Array) -> Array:
    """Replace each label by the null label ``null`` with probability ``p``."""
    check_key("key", key)
    return jnp.where(jax.random.uniform(key, labels.shape) < p, null, labels)


def _keys(key: Array) -> Array:
    """(noise, label-dropout, extra) keys: every loss draws its noise from the same key, so the
    limits in which two losses coincide hold exactly for a shared ``key``."""
    return jax.random.split(key, 3)


def _mse(pred: Array, target: Array) -> Array:
    return jnp.mean(jnp.sum((pred - target).reshape(pred.shape[0], -1) ** 2, -1))


def _bcast(v: Array, like: Array) -> Array:
    return v.reshape((-1,) + (1,) * (like.ndim - 1))


def gft_beta(key: Array, labels: Array, null: int, beta_min: float, dtype) -> Array:
    """GFT's per-example ``beta ~ U[beta_min, 1]``, 1 on dropped (null) labels."""
    beta = jax.random.uniform(key, labels.shape, dtype, beta_min, 1.0)
    return jnp.where(labels == null, 1.0, beta)


def mixture_mse(pred: Array, aux: Array, beta: Array, target: Array) -> Array:
    """GFT's objective ``|beta pred + (1 - beta) sg[aux] - target|^2`` (batch mean); with
    ``beta = 1`` and ``aux = 0`` it is the plain squared error of ``pred``."""
    b = _bcast(beta, pred)
    return _mse(b * pred + (1.0 - b) * jax.lax.stop_gradient(aux), target)


def mg_shift(e_c: Array, e_u: Array, labels: Array, null: int, w: ArrayLike) -> Array:
    """Model-Guidance's target shift ``(1 - 1/w) (e_c - e_u)`` of the teacher's conditional and
    null predictions, zero on dropped (null) labels (no stop-gradient: the caller's)."""
    return jnp.where(_bcast(labels == null, e_c), 0.0, (1.0 - 1.0 / w) * (e_c - e_u))


def conditional_loss(
    net: Denoiser,
    params: PyTree,
    x0: Float[Array, "b ..."],
    labels: Int[Array, " b"],
    *,
    key: Array,
    schedule: VPSchedule,
    p_uncond: float = 0.1,
) -> Float[Array, ""]:
    """Conditional denoising loss with label dropout (the model that CFG guides)."""
    check_key("key", key)
    kn, kd, _ = _keys(key)
    n = noise_batch(x0, key=kn, schedule=schedule)
    lab = drop_labels(labels, p_uncond, net.num_classes, key=kd)
    return _mse(net(params, n.x_t, n.t, lab, jnp.full(n.t.shape, GUIDED, x0.dtype)), n.eps)


def gft_loss(
    net: Denoiser,
    params: PyTree,
    x0: Float[Array, "b ..."],
    labels: Int[Array, " b"],
    *,
    key: Array,
    schedule: VPSchedule,
    p_uncond: float = 0.1,
    beta_min: float = 0.2,
) -> Float[Array, ""]:
    r"""Guidance-Free Training: the conditional model is the mixture
    :math:`\beta\epsilon_\theta(x, c, \beta) + (1-\beta)\,\mathrm{sg}[\epsilon_\theta(x,
    \varnothing, 1)]`, so that :math:`\epsilon_\theta(x, c, \beta)` learns CFG with
    :math:`w = 1/\beta`."""
    check_key("key", key)
    kn, kd, kb = _keys(key)
    n = noise_batch(x0, key=kn, schedule=schedule)
    null = net.num_classes
    lab = drop_labels(labels, p_uncond, null, key=kd)
    beta = gft_beta(kb, lab, null, beta_min, x0.dtype)
    e_beta = net(params, n.x_t, n.t, lab, beta)
    e_null = net(params, n.x_t, n.t, jnp.full_like(lab, null), jnp.ones_like(beta))
    return mixture_mse(e_beta, e_null, beta, n.eps)


def mg_loss(
    net: Denoiser,
    params: PyTree,
    ema_params: PyTree,
    x0: Float[Array, "b ..."],
    labels: Int[Array, " b"],
    *,
    key: Array,
    schedule: VPSchedule,
    w: ArrayLike,
    p_uncond: float = 0.1,
) -> Float[Array, ""]:
    r"""Model-Guidance: regress onto :math:`\epsilon + (1 - 1/w)\,\mathrm{sg}[\epsilon_{\bar
    \theta}(x_t, c) - \epsilon_{\bar\theta}(x_t, \varnothing)]` (EMA weights :math:`\bar
    \theta`), whose fixed point is CFG with scale ``w`` (``w > 0``)."""
    check_key("key", key)
    check_positive("w", w)
    kn, kd, _ = _keys(key)
    n = noise_batch(x0, key=kn, schedule=schedule)
    null = net.num_classes
    lab = drop_labels(labels, p_uncond, null, key=kd)
    one = jnp.full(n.t.shape, GUIDED, x0.dtype)
    e_c = net(ema_params, n.x_t, n.t, lab, one)
    e_u = net(ema_params, n.x_t, n.t, jnp.full_like(lab, null), one)
    target = n.eps + jax.lax.stop_gradient(mg_shift(e_c, e_u, lab, null, w))
    return _mse(net(params, n.x_t, n.t, lab, one), target)


def scale_loss(
    net: Denoiser,
    params: PyTree,
    x0: Float[Array, "b ..."],
    labels: Int[Array, " b"],
    self_x0: Float[Array, "m ..."],
    self_labels: Int[Array, " m"],
    *,
    key: Array,
    schedule: VPSchedule,
    w: ArrayLike,
    self_weight: float = 1.0,
) -> Float[Array, ""]:
    r"""SCALE: the likelihood loss of the reparameterised conditional model
    :math:`\tfrac1w\epsilon_\theta(x_t, c) + (1 - \tfrac1w)\,\mathrm{sg}[\epsilon_\psi(x_t,
    c)]` on real data, plus the self network's denoising loss on the model's own samples.

    At the optimum the self branch is the denoiser of the model's own sample distribution,
    :math:`\epsilon_{\rm self}`, and the guided branch is the self-contrastive prediction
    :math:`\epsilon_{\rm data} + (w - 1)(\epsilon_{\rm data} - \epsilon_{\rm self})`, returned in
    one forward pass.

    The guided network :math:`\theta` (the only one used at sampling time) and the self network
    :math:`\psi` share an architecture but not weights: with shared weights (a branch flag as
    input) the self branch's fit to the model's early, poor samples degraded the guided branch
    on the 2-D mixture (floored log-likelihood -11.8 against -2.6 for the plain conditional
    model at 1,500 steps).

    Args:
      net: the denoiser architecture.
      params: ``(theta, psi)``, the guided and the self network's parameters.
      x0, labels: a real batch ``[b, ...]`` and its labels ``[b]``.
      self_x0, self_labels: self-generated samples ``[m, ...]`` (treated as constants) and the
        labels they were generated for.
      key: PRNG key.
      schedule: VP schedule.
      w: self-contrastive guidance scale, ``w > 0`` (``1``: no guidance).
      self_weight: weight of the self-branch term.

    Returns:
      Scalar loss.
    """
    check_key("key", key)
    check_positive("w", w)
    kr, _, ks = _keys(key)
    theta, psi = params
    n = noise_batch(x0, key=kr, schedule=schedule)
    ones = jnp.ones(n.t.shape, x0.dtype)
    e_g = net(theta, n.x_t, n.t, labels, GUIDED * ones)
    e_s = net(psi, n.x_t, n.t, labels, GUIDED * ones)
    real = _mse(e_g / w + (1.0 - 1.0 / w) * jax.lax.stop_gradient(e_s), n.eps)
    m = noise_batch(jax.lax.stop_gradient(self_x0), key=ks, schedule=schedule)
    e_self = net(psi, m.x_t, m.t, self_labels, jnp.full(m.t.shape, GUIDED, x0.dtype))
    return real + self_weight * _mse(e_self, m.eps)
