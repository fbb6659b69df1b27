r"""Self-contrastive guidance (SCG) with a frozen self score: the target SCALE's guided network
learns, an offline fit of the self score, its fit diagnostic, and the two-pass oracle.

The SCG target. SCALE's real-data term (:func:`~jaxpapers.scale.scale_loss`) fits the likelihood
model :math:`\tfrac1w\epsilon_\theta + (1 - \tfrac1w)\,\mathrm{sg}[\epsilon_\psi]` to the noise
:math:`\epsilon`. For a fixed :math:`\psi` it is a least-squares problem in
:math:`\epsilon_\theta(x_t, c)` alone, minimised pointwise at
:math:`\tfrac1w\epsilon_\theta + (1 - \tfrac1w)\epsilon_\psi = \mathbb E[\epsilon \mid x_t, c]
= \epsilon_{\rm data}` (the data's ideal predictor), i.e.

.. math:: \epsilon_{\theta^*} = w\,\epsilon_{\rm data} - (w - 1)\,\epsilon_\psi
          = \epsilon_{\rm data} + (w - 1)(\epsilon_{\rm data} - \epsilon_\psi)

(:func:`scg_target`). With :math:`\epsilon_\psi` the exact unconditional predictor this is exact
CFG of scale ``w``; with the ideal predictor of the model's own samples it is self-contrastive
guidance. Whatever error :math:`\psi` carries enters :math:`\theta^*` multiplied by ``w - 1``: the
guidance trained into :math:`\theta` is only as good as :math:`\psi`.

The diagnostic (:func:`self_score_error`). After training, fresh samples of the final likelihood
model are drawn and a fresh self network :math:`\psi'` is fitted to them offline
(:func:`fit_self_score`, plain conditional denoising); on noised real data the mean squared
:math:`\|\epsilon_\psi - \epsilon_{\psi'}\|^2` (the online self score's estimation error) is set
against the contrast :math:`\|\epsilon_{\rm data} - \epsilon_{\psi'}\|^2` with the exact data
predictor. An error of the size of the contrast means the trained guidance is mostly noise.

The oracle. Two stages instead of SCALE's one: fit the likelihood model (the conditional model,
:math:`\epsilon_c \approx \epsilon_{\rm data}`), then fit :math:`\psi` well to its samples
offline. :func:`sample_scg` samples the SCG target itself, :math:`\epsilon_c + (w - 1)(\epsilon_c
- \epsilon_\psi)`, with two network passes a step (as CFG), so its scale is tuned at sampling
time; :func:`fit_scg` distils that target into one network for a given ``w`` (SCALE's real-data
term with :math:`\psi` frozen). What distillation can reach is the two-pass target (up to the
distilled network's own fitting error), so the two-pass sampler is the oracle the experiments
report: it separates "SCG does not help at this size" (the oracle no better than the conditional
model) from "SCALE does not learn SCG" (SCALE below the oracle).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Float, Int, PyTree

from jaxpapers.core.checks import check_key, check_positive, check_shape
from jaxpapers.core.diffusion import SampleOutput, VPSchedule
from jaxpapers.scale._losses import _keys, _mse, noise_batch
from jaxpapers.scale._network import DEFAULT_SCHEDULE, GUIDED, Denoiser
from jaxpapers.scale._sampling import _check, _draw
from jaxpapers.scale._train import ArrayData, DataSource, Method, _check_fit_args, refreshing_fit
from jaxpapers.scale._train import fit as fit_method


def scg_target(eps_data: ArrayLike, eps_self: ArrayLike, w: ArrayLike) -> Array:
    r"""The SCG optimum :math:`\epsilon_{\rm data} + (w - 1)(\epsilon_{\rm data} -
    \epsilon_{\rm self})` of SCALE's guided network for a fixed self score.

    Examples:
        >>> import jax.numpy as jnp
        >>> scg_target(jnp.array([1.0]), jnp.array([0.5]), 3.0).tolist()
        [2.0]
    """
    eps_data, eps_self = jnp.asarray(eps_data), jnp.asarray(eps_self)
    check_shape("eps_self", eps_self, eps_data.shape)
    return eps_data + (w - 1.0) * (eps_data - eps_self)


def scg_loss(
    net: Denoiser,
    theta: PyTree,
    psi: PyTree,
    x0: Float[Array, "b ..."],
    labels: Int[Array, " b"],
    *,
    key: Array,
    schedule: VPSchedule,
    w: ArrayLike,
) -> Float[Array, ""]:
    r"""SCALE's real-data term with the self network ``psi`` frozen:
    :math:`\|\tfrac1w\epsilon_\theta + (1 - \tfrac1w)\,\mathrm{sg}[\epsilon_\psi] -
    \epsilon\|^2` (batch mean), minimised by :func:`scg_target` (``scale_loss`` at
    ``self_weight = 0`` with the same key)."""
    check_key("key", key)
    check_positive("w", w)
    kr, _, _ = _keys(key)
    n = noise_batch(x0, key=kr, schedule=schedule)
    ones = jnp.full(n.t.shape, GUIDED, x0.dtype)
    e_g = net(theta, n.x_t, n.t, labels, ones)
    e_s = jax.lax.stop_gradient(net(psi, n.x_t, n.t, labels, ones))
    return _mse(e_g / w + (1.0 - 1.0 / w) * e_s, n.eps)


def fit_self_score(
    net: Denoiser,
    init: PyTree,
    x: Float[Array, "n ..."],
    labels: Int[Array, " n"],
    *,
    key: Array,
    steps: int,
    batch: int,
    lr: float = 2e-3,
    schedule: VPSchedule = DEFAULT_SCHEDULE,
) -> PyTree:
    """A self network fitted offline to the samples ``x`` (with their ``labels``): plain
    conditional denoising (no label dropout) from ``init`` on minibatches drawn with replacement;
    the EMA parameters (decay 0.99) are returned (the trained network's estimate)."""
    check_key("key", key)
    method = Method("conditional", p_uncond=0.0)
    return fit_method(
        net, method, init, ArrayData(x, labels), key=key, steps=steps, batch=batch, lr=lr,
        schedule=schedule,
    ).ema_params  # fmt: skip


@functools.partial(jax.jit, static_argnames=("net", "steps", "batch", "schedule"))
def _fit_scg(net, theta, psi, data, key, w, lr, steps, batch, schedule):
    def loss_fn(p, ema, buf, k, step):
        kd, kl = jax.random.split(k)
        x0, labels = data.draw(batch, key=kd)
        return scg_loss(net, p, psi, x0, labels, key=kl, schedule=schedule, w=w)

    res = refreshing_fit(loss_fn, theta, optax.adam(lr), key=key, steps=steps, block=1)
    return res.params


def fit_scg(
    net: Denoiser,
    theta: PyTree,
    psi: PyTree,
    data: DataSource,
    *,
    key: Array,
    steps: int,
    batch: int,
    w: ArrayLike,
    lr: float = 2e-3,
    schedule: VPSchedule = DEFAULT_SCHEDULE,
) -> PyTree:
    """Train the guided network ``theta`` for ``steps`` Adam steps on :func:`scg_loss` with the
    self network ``psi`` frozen (the oracle's second pass); returns ``theta``'s parameters.
    Same key schedule as :func:`~jaxpapers.scale.fit` of a one-step method."""
    check_key("key", key)
    _check_fit_args(steps, batch, lr)
    check_positive("w", w)
    return _fit_scg(net, theta, psi, data, key, w, lr, steps, batch, schedule)


def self_score_error(
    net: Denoiser,
    psi: PyTree,
    psi_ref: PyTree,
    mix,
    x0: Float[Array, "n d"],
    labels: Int[Array, " n"],
    *,
    key: Array,
    schedule: VPSchedule = DEFAULT_SCHEDULE,
) -> tuple[Array, Array]:
    r"""``(error, contrast)`` on the real points ``x0`` (labels ``labels``) of the mixture ``mix``,
    noised at :math:`t \sim U[t_{\min}, 1]`: the mean squared :math:`\|\epsilon_\psi -
    \epsilon_{\psi'}\|^2` of the self network against a reference ``psi_ref``, and the contrast
    :math:`\|\epsilon_{\rm data} - \epsilon_{\psi'}\|^2` of the reference against the exact data
    predictor."""
    check_key("key", key)
    n = noise_batch(x0, key=key, schedule=schedule)
    ones = jnp.full(n.t.shape, GUIDED, x0.dtype)
    e_psi = net(psi, n.x_t, n.t, labels, ones)
    e_ref = net(psi_ref, n.x_t, n.t, labels, ones)
    e_data = jax.vmap(lambda x, t, c: mix.eps(x, t, c, schedule))(n.x_t, n.t, labels)
    return _mse(e_psi, e_ref), _mse(e_data, e_ref)


@functools.partial(jax.jit, static_argnames=("net", "num_steps", "schedule", "x0_range"))
def _scg(net, cond, psi, labels, w, key, num_steps, schedule, x0_range=None):
    b = labels.shape[0]
    one = jnp.ones((b,), jnp.result_type(float))

    def eps_fn(x, t):
        tt = jnp.full((b,), t, x.dtype)
        e = scg_target(net(cond, x, tt, labels, one), net(psi, x, tt, labels, one), w)
        return e.astype(x.dtype)  # the state's dtype (a float64 ``w`` under x64)

    out = _draw(eps_fn, schedule, (b, *net.event_shape), key, num_steps, x0_range)
    return SampleOutput(out.x, 2 * out.nfe)


def sample_scg(
    net: Denoiser,
    cond: PyTree,
    psi: PyTree,
    labels: Int[Array, " b"],
    *,
    key: Array,
    num_steps: int,
    w: ArrayLike,
    schedule: VPSchedule = DEFAULT_SCHEDULE,
    x0_range: float | None = None,
) -> SampleOutput:
    r"""Deterministic DDIM of self-contrastive guidance at sampling time (the oracle):
    :func:`scg_target` of the conditional network ``cond`` and the self network ``psi``,
    :math:`\epsilon_c + (w - 1)(\epsilon_c - \epsilon_\psi)`, two passes a step. ``w = 1`` is
    the conditional model.

    Returns:
      ``SampleOutput(x [b, ...], nfe = 2 num_steps)``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.scale import mlp_denoiser, sample_scg
        >>> net, ps = mlp_denoiser(2, 3, seeds=jnp.arange(2), hidden=8, depth=1, emb=4)
        >>> p, q = (jax.tree.map(lambda a, i=i: a[i], ps) for i in range(2))
        >>> out = sample_scg(net, p, q, jnp.array([0, 1]), key=jax.random.key(0), num_steps=4,
        ...                  w=2.0)
        >>> out.x.shape, int(out.nfe)
        ((2, 2), 8)
    """
    check_key("key", key)
    labels = jnp.asarray(labels)
    _check(net, labels, num_steps, x0_range)
    check_positive("w", w)
    w = jnp.asarray(w, jnp.result_type(float))
    return _scg(net, cond, psi, labels, w, key, num_steps, schedule, x0_range)
