r"""Class-conditional DDIM sampling through the diffusion core (a diffrax solver), with exact
network-evaluation counts.

* :func:`sample_one_pass`: one network pass a step, :math:`\epsilon_\theta(x, c, s)` with a fixed
  scalar input ``s`` (the conditional model and MG use ``s = 1``, GFT ``s = 1/w``, SCALE the
  guided branch ``s = 1``): ``nfe = num_steps``.
* :func:`sample_cfg`: classifier-free guidance :math:`\epsilon_\varnothing + w(\epsilon_c -
  \epsilon_\varnothing)`, the conditional and null passes run as one batch of ``2b``:
  ``nfe = 2 num_steps`` network passes.

SCALE's training draws its self-generated samples from the likelihood model that its real-data
loss fits, :math:`(\epsilon_\theta(x, c) + (w - 1)\,\epsilon_\psi(x, c)) / w`
(:func:`_likelihood_model`, two passes a step: guided and self network).

All return the core's ``SampleOutput(x, nfe)``; ``nfe`` counts network passes over the whole
batch (the core counts denoiser calls; a CFG call is two passes). ``x0_range=r`` clips the
predicted :math:`\hat x_0` of the (guided) prediction to ``[-r, r]`` at every step (the core's
:func:`~jaxpapers.core.diffusion.clip_x0`, static thresholding) for data on a bounded range such
as images in ``[-1, 1]``; ``None`` (default) leaves the sampler unchanged.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Int, PyTree

from jaxpapers.core.checks import check_key, check_labels, check_positive
from jaxpapers.core.diffusion import (
    CountingDenoiser,
    SampleOutput,
    VPSchedule,
    clip_x0,
    sample_ddim,
)
from jaxpapers.scale._network import DEFAULT_SCHEDULE, Denoiser


def _check(net: Denoiser, labels: Array, num_steps: int, x0_range: float | None = None) -> None:
    check_labels("labels", labels, net.num_classes + 1)
    if labels.ndim != 1:
        raise ValueError(f"labels has shape {labels.shape}; expected [batch]")
    if not isinstance(num_steps, int) or num_steps < 1:
        raise ValueError(f"num_steps={num_steps!r}; expected an integer >= 1")
    check_x0_range(x0_range)


def check_x0_range(x0_range: float | None) -> None:
    """``x0_range`` is ``None`` or a positive Python number (it is a static argument)."""
    if x0_range is None:
        return
    if isinstance(x0_range, bool) or not isinstance(x0_range, int | float):
        raise ValueError(f"x0_range={x0_range!r}; expected None or a positive Python number")
    check_positive("x0_range", x0_range)


def _draw(eps_fn, schedule, shape, key, num_steps, x0_range):
    """DDIM through the core (a diffrax solve), the prediction clipped where ``x0_range``."""
    if x0_range is not None:
        eps_fn = clip_x0(eps_fn, schedule, x0_range)
    return sample_ddim(CountingDenoiser(eps_fn), schedule, shape, key=key, num_steps=num_steps)


@functools.partial(jax.jit, static_argnames=("net", "num_steps", "schedule", "x0_range"))
def _one_pass(net, params, labels, scalar, key, num_steps, schedule, x0_range=None):
    dtype = jnp.result_type(float)
    s = jnp.broadcast_to(jnp.asarray(scalar, dtype), labels.shape)

    def eps_fn(x, t):
        return net(params, x, jnp.full(labels.shape, t, x.dtype), labels, s).astype(x.dtype)

    shape = (labels.shape[0], *net.event_shape)
    return _draw(eps_fn, schedule, shape, key, num_steps, x0_range)


@functools.partial(jax.jit, static_argnames=("net", "num_steps", "schedule", "x0_range"))
def _cfg(net, params, labels, w, key, num_steps, schedule, x0_range=None):
    b = labels.shape[0]
    both = jnp.concatenate([labels, jnp.full_like(labels, net.num_classes)])
    ones = jnp.ones((2 * b,), jnp.result_type(float))

    def eps_fn(x, t):
        e = net(params, jnp.concatenate([x, x]), jnp.full((2 * b,), t, x.dtype), both, ones)
        e_c, e_u = e[:b], e[b:]
        # the state's dtype: under x64 a float64 ``w`` would promote the guided eps of a float32
        # network, and the solver's loop needs the state's dtype unchanged
        return (e_u + w * (e_c - e_u)).astype(x.dtype)

    out = _draw(eps_fn, schedule, (b, *net.event_shape), key, num_steps, x0_range)
    return SampleOutput(out.x, 2 * out.nfe)


@functools.partial(jax.jit, static_argnames=("net", "num_steps", "schedule", "x0_range"))
def _likelihood_model(net, params, labels, w, key, num_steps, schedule, x0_range=None):
    b = labels.shape[0]
    theta, psi = params
    one = jnp.ones((b,), jnp.result_type(float))

    def eps_fn(x, t):
        tt = jnp.full((b,), t, x.dtype)
        e = (net(theta, x, tt, labels, one) + (w - 1.0) * net(psi, x, tt, labels, one)) / w
        return e.astype(x.dtype)  # the state's dtype (a float64 ``w`` under x64: see ``_cfg``)

    out = _draw(eps_fn, schedule, (b, *net.event_shape), key, num_steps, x0_range)
    return SampleOutput(out.x, 2 * out.nfe)


def sample_one_pass(
    net: Denoiser,
    params: PyTree,
    labels: Int[Array, " b"],
    *,
    key: Array,
    num_steps: int,
    scalar: ArrayLike = 1.0,
    schedule: VPSchedule = DEFAULT_SCHEDULE,
    x0_range: float | None = None,
) -> SampleOutput:
    r"""Deterministic DDIM with one network pass a step.

    Args:
      net, params: the denoiser and its parameters (one seed).
      labels: ``[b]`` integer labels in ``[0, C]`` (``C`` = null: unconditional).
      key: PRNG key of the initial noise.
      num_steps: DDIM steps (= network passes).
      scalar: the network's scalar input (``1``; GFT: ``1 / w``).
      schedule: VP schedule.
      x0_range: clip the predicted :math:`\hat x_0` to ``[-x0_range, x0_range]`` at every step
        (bounded data such as images); ``None``: no clipping.

    Returns:
      ``SampleOutput(x [b, ...], nfe = num_steps)``.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.scale import mlp_denoiser, sample_one_pass
        >>> net, ps = mlp_denoiser(2, 3, seeds=jnp.arange(1), hidden=8, depth=1, emb=4)
        >>> p0 = jax.tree.map(lambda a: a[0], ps)
        >>> out = sample_one_pass(net, p0, jnp.array([0, 1]), key=jax.random.key(0), num_steps=4)
        >>> out.x.shape, int(out.nfe)
        ((2, 2), 4)
    """
    check_key("key", key)
    labels = jnp.asarray(labels)
    _check(net, labels, num_steps, x0_range)
    return _one_pass(net, params, labels, scalar, key, num_steps, schedule, x0_range)


def sample_cfg(
    net: Denoiser,
    params: PyTree,
    labels: Int[Array, " b"],
    *,
    key: Array,
    num_steps: int,
    w: ArrayLike,
    schedule: VPSchedule = DEFAULT_SCHEDULE,
    x0_range: float | None = None,
) -> SampleOutput:
    r"""Deterministic DDIM with classifier-free guidance of scale ``w >= 0`` (two passes a step).

    ``w = 1`` is the conditional model, ``w = 0`` the unconditional one; ``x0_range`` clips the
    guided prediction's :math:`\hat x_0` as in :func:`sample_one_pass`.

    Returns:
      ``SampleOutput(x [b, ...], nfe = 2 num_steps)``.
    """
    check_key("key", key)
    labels = jnp.asarray(labels)
    _check(net, labels, num_steps, x0_range)
    check_positive("w", w, allow_zero=True)
    w = jnp.asarray(w, jnp.result_type(float))
    return _cfg(net, params, labels, w, key, num_steps, schedule, x0_range)
