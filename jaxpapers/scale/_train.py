r"""One jitted training loop for every method (conditional + CFG, GFT, MG, SCALE), vmappable
over seeds; :func:`fit_many` trains several baselines (conditional, GFT, MG) at one key in one
loop, one network pass vmapped over the methods instead of one loop each.

Where SCALE's self-generated samples come from (its whole extra training cost): every
``refresh`` optimiser steps, the current parameters (under ``stop_gradient``) draw ``self_batch``
samples with deterministic DDIM of ``self_steps`` steps from the model's own *likelihood model*,
the prediction its real-data loss fits, :math:`(\epsilon_\theta(x, c) + (w-1)\,
\epsilon_\psi(x, c)) / w` (guided and self network, two passes a step), for labels drawn
from the data's label distribution, and clipped to ``[-clip, clip]``; they fill a buffer that the
next ``refresh`` steps use for the self-network term. No gradient flows through the sampler.
The amortised extra cost per step is ``2 * self_steps * self_batch / (refresh * batch)`` forward
passes of a real batch, plus the self network's forward/backward pass on the self samples and
its stop-gradient pass on real data.

Why the likelihood model and not the guided branch: if the guided branch generated its own
contrast samples, its fixed point would be reached through :math:`g_{n+1} = w\,d - (w-1)\,g_n`,
which oscillates for ``w >= 2``; the likelihood model fits the data independently of the
guidance, so the loop has no such feedback.

The self network's data: a replay buffer (``Method.replay``). :math:`\psi` estimates the
denoiser of the model's own distribution :math:`p^{\rm self}_\tau` at the current step
:math:`\tau`. Fitted on one refresh of ``self_batch`` samples for ``refresh`` steps (``replay =
1``, the original scheme), it sees :math:`n` = ``self_batch`` points at a time and at small noise
levels learns the score of those points (the empirical distribution smoothed by the noise), not of
:math:`p^{\rm self}`: a per-refresh estimation error whose variance falls like :math:`1/n`, and
which the guided network receives multiplied by ``w - 1`` (``_oracle``: for a fixed :math:`\psi`
the real-data term is minimised by :math:`\epsilon_\theta = \epsilon_d + (w-1)(\epsilon_d -
\epsilon_\psi)`). A ring buffer of the last ``R = replay`` refreshes (``R * self_batch``
samples; each step draws its ``self_batch`` self samples from the filled part, with replacement)
gives :math:`\psi` a sample of the mixture :math:`\tfrac1R\sum_{k<R} p^{\rm self}_{\tau - k\,
\mathrm{refresh}}`: ``R`` times as many distinct points, so the variance falls like
:math:`1/(R n)`, at the cost of a lag: the mixture is centred ``(R - 1) refresh / 2`` steps in the
past, a bias of first order in the generator's drift per step, which is small late in training
when the model changes slowly (and large early, while ``w`` ramps up and the model is poor). The
sampler cost is unchanged (one refresh of ``self_batch`` samples every ``refresh`` steps); only
the buffer's memory grows. ``replay = 1`` is the original scheme (every step uses the whole
buffer, no draw).

Every loop here is :func:`jaxpapers.core.fit.fit` (one jitted ``lax.scan`` of Adam steps that
freezes on a non-finite loss, gradient or update and clears ``finite``); the EMA and SCALE's buffer
are its carried ``state``, updated after each step. Per-step keys: ``key`` is split into one key
per block of ``refresh`` steps (one step for the other methods), and each block key into the key of
the block's buffer and the keys of its steps.
"""

from __future__ import annotations

import functools
from typing import NamedTuple, Protocol

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, ArrayLike, Bool, Float, Int, PyTree

from jaxpapers.core.checks import check_key, check_positive, check_range, is_concrete
from jaxpapers.core.diffusion import VPSchedule
from jaxpapers.core.fit import fit as core_fit
from jaxpapers.core.pytrees import ema_update
from jaxpapers.scale._losses import (
    _keys,
    conditional_loss,
    drop_labels,
    gft_beta,
    gft_loss,
    mg_loss,
    mg_shift,
    mixture_mse,
    noise_batch,
    scale_loss,
)
from jaxpapers.scale._network import DEFAULT_SCHEDULE, GUIDED, Denoiser
from jaxpapers.scale._sampling import _likelihood_model, check_x0_range

KINDS = ("conditional", "gft", "mg", "scale")


class DataSource(Protocol):
    """Anything with ``draw(n, *, key) -> (x0 [n, ...], labels [n])`` (a pytree, passed
    traced)."""

    def draw(self, n: int, *, key: Array) -> tuple[Array, Array]: ...


class ArrayData(eqx.Module):
    """A labelled data set held in arrays; ``draw`` samples a minibatch with replacement.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> d = ArrayData(jnp.zeros((10, 2)), jnp.arange(10) % 3)
        >>> [a.shape for a in d.draw(4, key=jax.random.key(0))]
        [(4, 2), (4,)]
    """

    x: Float[Array, "n ..."]
    labels: Int[Array, " n"]

    def draw(self, n: int, *, key: Array) -> tuple[Array, Array]:
        idx = jax.random.randint(key, (n,), 0, self.labels.shape[0])
        return self.x[idx], self.labels[idx]


class Method(eqx.Module):
    r"""A training method and its knobs (all static: one compile per method).

    Attributes:
      kind: ``"conditional"`` (label dropout, for CFG), ``"gft"``, ``"mg"`` or ``"scale"``.
      w: guidance scale trained into MG and SCALE (``>= 1``; 1 = none).
      p_uncond: label-dropout probability (conditional, GFT, MG).
      beta_min: GFT's lower end of :math:`\beta \sim U[\beta_{\min}, 1]`.
      self_weight: SCALE's weight on the self-branch term.
      refresh: SCALE: optimiser steps between refreshes of the self-generated buffer.
      self_steps: SCALE: DDIM steps used to generate the self samples.
      self_batch: SCALE: number of self samples per refresh.
      warmup: MG and SCALE: steps over which the trained guidance scale ramps from 1 to ``w``.
      replay: SCALE: the self network's replay buffer holds the last ``replay`` refreshes
        (``replay * self_batch`` samples, a ring); each step the self term draws ``self_batch``
        of them with replacement from the filled part. ``1``: the buffer is the last refresh
        alone and every step uses all of it (the original scheme). See the module docstring.
      clip: SCALE: self samples are clipped to ``[-clip, clip]`` (the data range; ``0`` = off).
        Early in training the model's own samples contain far outliers whose large inputs
        would otherwise dominate the shared gradient.
      x0_range: SCALE: the self samples' sampler clips its predicted :math:`\hat x_0` to
        ``[-x0_range, x0_range]`` at every step (as the evaluation sampler's ``x0_range``, for
        bounded data such as images); ``None``: no clipping.
      ema: decay of the EMA weights (MG's teacher; also returned for every method).
    """

    kind: str = eqx.field(static=True)
    w: float = eqx.field(static=True, default=1.0)
    p_uncond: float = eqx.field(static=True, default=0.1)
    beta_min: float = eqx.field(static=True, default=0.2)
    self_weight: float = eqx.field(static=True, default=1.0)
    refresh: int = eqx.field(static=True, default=10)
    self_steps: int = eqx.field(static=True, default=8)
    self_batch: int = eqx.field(static=True, default=256)
    replay: int = eqx.field(static=True, default=1)
    warmup: int = eqx.field(static=True, default=0)
    clip: float = eqx.field(static=True, default=0.0)
    x0_range: float | None = eqx.field(static=True, default=None)
    ema: float = eqx.field(static=True, default=0.99)

    def __check_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r}; expected one of {KINDS}")
        if self.w < 1.0:
            raise ValueError(f"w={self.w}; expected a trained guidance scale >= 1")
        if not 0.0 <= self.p_uncond < 1.0:
            raise ValueError(f"p_uncond={self.p_uncond}; expected a value in [0, 1)")
        if not 0.0 < self.beta_min <= 1.0:
            raise ValueError(f"beta_min={self.beta_min}; expected a value in (0, 1]")
        for name in ("refresh", "self_steps", "self_batch", "replay"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; expected an integer >= 1")
        check_x0_range(self.x0_range)
        if not 0.0 <= self.ema < 1.0:
            raise ValueError(f"ema={self.ema}; expected a value in [0, 1)")


class FitResult(NamedTuple):
    """Output of :func:`fit` and :func:`fit_many` (:class:`jaxpapers.core.fit.FitResult`'s fields
    and the EMA).

    Attributes:
      params: final parameters (the last finite ones if the run froze).
      opt_state: the Adam state after the last applied step.
      losses: ``[steps]`` training loss of every step.
      finite: False when a non-finite loss, gradient or update froze the run.
      ema_params: EMA of the parameters (decay ``Method.ema``).
      buffer: SCALE: the self-sample buffer at the end of training (:class:`SelfBuffer`);
        ``None`` for the other methods.
    """

    params: PyTree
    opt_state: PyTree
    losses: Float[Array, " steps"]
    finite: Bool[Array, ""]
    ema_params: PyTree
    buffer: PyTree = None


class SelfBuffer(NamedTuple):
    """SCALE's self-sample buffer: the last ``replay`` refreshes of ``self_batch`` samples each,
    in a ring (``Method.replay``).

    Attributes:
      x: ``[replay * self_batch, ...]`` samples; slot ``k`` of the ring is the rows from
        ``k * self_batch`` on.
      labels: ``[replay * self_batch]`` the labels they were drawn for.
      count: the number of refreshes written so far (the next one overwrites slot
        ``count % replay``, the oldest once the ring is full).
    """

    x: Array
    labels: Array
    count: Int[Array, ""]


def push_self_buffer(
    buffer: SelfBuffer | None, x: Array, labels: Array, *, replay: int
) -> SelfBuffer:
    """``buffer`` with the refresh ``(x [n, ...], labels [n])`` written over its oldest slot
    (``buffer=None``: a new ring of ``replay`` slots of ``n`` rows, this refresh in slot 0).

    Examples:
        >>> import jax.numpy as jnp
        >>> b = push_self_buffer(None, jnp.zeros((2, 1)), jnp.zeros(2, int), replay=3)
        >>> b = push_self_buffer(b, jnp.ones((2, 1)), jnp.ones(2, int), replay=3)
        >>> b.x[:, 0].tolist(), int(b.count)
        ([0.0, 0.0, 1.0, 1.0, 0.0, 0.0], 2)
    """
    if not isinstance(replay, int) or replay < 1:
        raise ValueError(f"replay={replay!r}; expected an integer >= 1")
    count = jnp.zeros((), jnp.int32) if buffer is None else buffer.count
    if replay == 1:  # the ring is the last refresh alone
        return SelfBuffer(x, labels, count + 1)
    n = x.shape[0]
    if buffer is None:
        buffer = SelfBuffer(
            jnp.zeros((replay * n, *x.shape[1:]), x.dtype),
            jnp.zeros((replay * n,), labels.dtype),
            count,
        )
    start = (count % replay) * n
    return SelfBuffer(
        jax.lax.dynamic_update_slice_in_dim(buffer.x, x.astype(buffer.x.dtype), start, 0),
        jax.lax.dynamic_update_slice_in_dim(buffer.labels, labels, start, 0),
        count + 1,
    )


def draw_self_buffer(buffer: SelfBuffer, n: int, *, replay: int, key: Array) -> tuple[Array, Array]:
    """The self samples of one step: ``n`` rows drawn with replacement from the filled slots of
    ``buffer`` (``replay = 1``: the whole buffer, no draw)."""
    if replay == 1:
        return buffer.x, buffer.labels
    filled = jnp.minimum(buffer.count, replay) * (buffer.labels.shape[0] // replay)
    idx = jax.random.randint(key, (n,), 0, filled)
    return buffer.x[idx], buffer.labels[idx]


def _ramped_w(method: Method, step: Array, w: Array | None = None) -> Array:
    """The trained scale at ``step``: from 1 to ``w`` (default ``method.w``) over the warmup."""
    w = method.w if w is None else w
    return 1.0 + (w - 1.0) * jnp.minimum(1.0, (step + 1.0) / max(method.warmup, 1))


def _loss(net, method, params, ema, data, buf, key, step, schedule, batch, w_final=None):
    kd, kl = jax.random.split(key)
    x0, labels = data.draw(batch, key=kd)
    w = _ramped_w(method, step, w_final)
    if method.kind == "conditional":
        return conditional_loss(
            net, params, x0, labels, key=kl, schedule=schedule, p_uncond=method.p_uncond
        )
    if method.kind == "gft":
        return gft_loss(
            net,
            params,
            x0,
            labels,
            key=kl,
            schedule=schedule,
            p_uncond=method.p_uncond,
            beta_min=method.beta_min,
        )
    if method.kind == "mg":
        return mg_loss(
            net, params, ema, x0, labels, key=kl, schedule=schedule, w=w, p_uncond=method.p_uncond
        )
    self_x, self_labels = draw_self_buffer(
        buf, method.self_batch, replay=method.replay, key=jax.random.fold_in(key, 1)
    )
    return scale_loss(
        net,
        params,
        x0,
        labels,
        self_x,
        self_labels,
        key=kl,
        schedule=schedule,
        w=w,
        self_weight=method.self_weight,
    )


def self_samples(
    net: Denoiser,
    method: Method,
    params: PyTree,
    data: DataSource,
    *,
    key: Array,
    w: ArrayLike,
    schedule: VPSchedule = DEFAULT_SCHEDULE,
) -> tuple[Array, Array]:
    """One refresh of SCALE's self-generated buffer: ``self_batch`` DDIM samples of
    ``self_steps`` steps from the likelihood model of ``stop_gradient(params)`` at scale ``w``,
    labels from the data."""
    check_key("key", key)
    kl, ks = jax.random.split(key)
    labels = data.draw(method.self_batch, key=kl)[1]
    params = jax.lax.stop_gradient(params)
    out = _likelihood_model(
        net, params, labels, w, ks, method.self_steps, schedule, method.x0_range
    )
    x = jnp.clip(out.x, -method.clip, method.clip) if method.clip > 0 else out.x
    return x, labels


def _block_keys(key: Array, block: int) -> tuple[Array, Array]:
    """The buffer key and the ``[block]`` step keys of one block of refresh steps."""
    kbuf, ksteps = jax.random.split(key)
    return kbuf, jax.random.split(ksteps, block)


def _key_schedule(key: Array, steps: int, block: int) -> tuple[Array, Array]:
    """``(buffer_keys [steps // block], step_keys [steps])``: ``key`` is split into one key per
    block of ``block`` steps, and each block key into its buffer key and its steps' keys."""
    buffer_keys, step_keys = jax.vmap(lambda k: _block_keys(k, block))(
        jax.random.split(key, steps // block)
    )
    return buffer_keys, step_keys.reshape(steps)


class _Carried(NamedTuple):
    """What the training loop carries besides the parameters: the EMA of the parameters (or
    ``None``) and SCALE's self-generated buffer (or ``None``)."""

    ema: PyTree
    buffer: PyTree


def refreshing_fit(
    loss_fn,
    params,
    optimizer,
    *,
    key,
    steps,
    block,
    ema_decay=None,
    make_buffer=None,
    push_buffer=None,
    has_aux=False,
):
    """:func:`jaxpapers.core.fit.fit` with an EMA of the parameters and a buffer refreshed every
    ``block`` steps.

    Step ``t`` minimises ``loss_fn(params, ema, buffer, key_t, t)``. For every ``t`` that is a
    multiple of ``block``, ``fresh = make_buffer(params, buffer_key, t)`` is drawn from the
    parameters before step ``t`` (``make_buffer=None``: no buffer) and becomes the buffer, or,
    with ``push_buffer``, the buffer becomes ``push_buffer(old, fresh)`` (``old = None`` at
    ``t = 0``; e.g. a replay ring). The keys follow :func:`_key_schedule`.
    The refresh is a ``lax.cond`` on the step count, which is not batched, so it stays a
    conditional (not a ``select`` computing both branches) when the loop is ``vmap``-ped over
    seeds.
    """
    buffer_keys, step_keys = _key_schedule(key, steps, block)
    push = (lambda old, fresh: fresh) if push_buffer is None else push_buffer
    carried = _Carried(
        ema=None if ema_decay is None else params,
        buffer=None
        if make_buffer is None
        else push(None, make_buffer(params, buffer_keys[0], jnp.int32(0))),
    )

    def loss(p, t, k, c):
        return loss_fn(p, c.ema, c.buffer, k, t)

    def after_step(c, p, t, k):
        ema = None if ema_decay is None else ema_update(c.ema, p, ema_decay)
        buffer = c.buffer
        if make_buffer is not None and block < steps:
            nxt = t + 1
            buffer = jax.lax.cond(
                (nxt % block == 0) & (nxt < steps),
                lambda: push(
                    c.buffer,
                    make_buffer(p, buffer_keys[jnp.minimum(nxt // block, steps // block - 1)], nxt),
                ),
                lambda: c.buffer,
            )
        return _Carried(ema, buffer)

    return core_fit(
        loss,
        params,
        optimizer,
        steps=steps,
        key=step_keys,
        batches=jnp.arange(steps),
        has_aux=has_aux,
        state=carried,
        after_step=after_step,
    )


@functools.partial(jax.jit, static_argnames=("net", "method", "steps", "batch", "schedule"))
def _fit(net, method, params, data, key, lr, steps, batch, schedule, w=None):
    make_buffer = push = None
    if method.kind == "scale":
        params = (params, params)  # guided and self network start from the same weights

        def make_buffer(p, k, first):
            w_now = _ramped_w(method, first, w)
            return self_samples(net, method, p, data, key=k, w=w_now, schedule=schedule)

        def push(old, fresh):
            return push_self_buffer(old, *fresh, replay=method.replay)

    def loss_fn(p, ema, buf, k, step):
        return _loss(net, method, p, ema, data, buf, k, step, schedule, batch, w)

    res = refreshing_fit(
        loss_fn,
        params,
        optax.adam(lr),
        key=key,
        steps=steps,
        block=method.refresh if method.kind == "scale" else 1,
        ema_decay=method.ema,
        make_buffer=make_buffer,
        push_buffer=push,
    )
    return FitResult(
        res.params, res.opt_state, res.losses, res.finite, res.state.ema, res.state.buffer
    )


def fit(
    net: Denoiser,
    method: Method,
    params: PyTree,
    data: DataSource,
    *,
    key: Array,
    steps: int,
    batch: int,
    lr: float = 2e-3,
    schedule: VPSchedule = DEFAULT_SCHEDULE,
    w: ArrayLike | None = None,
) -> FitResult:
    """Train ``params`` with ``method`` for ``steps`` Adam steps on minibatches from ``data``.

    Jitted inside (one compile per network, method, steps and batch); ``jax.vmap`` it over
    ``params`` and ``key`` for several seeds, and over ``w`` for several trained scales in one
    program.

    Args:
      net: the denoiser.
      method: :class:`Method`.
      params: initial parameters.
      data: a :class:`DataSource` (e.g. :class:`ArrayData` or a ``ClassMixture``).
      key: PRNG key.
      steps: optimiser steps (a multiple of ``method.refresh`` for SCALE).
      batch: real-data batch size.
      lr: Adam learning rate.
      schedule: VP schedule.
      w: MG and SCALE: the trained guidance scale (``>= 1``), a traced value in place of the
        static ``method.w`` (``None``: ``method.w``).

    Returns:
      :class:`FitResult`; for SCALE its ``params`` are the pair ``(guided, self)``, both
      initialised from ``params``, and only ``params[0]`` is used for sampling.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.scale import Method, checkerboard_mixture, fit, mlp_denoiser
        >>> mix = checkerboard_mixture(2)
        >>> net, ps = mlp_denoiser(2, 4, seeds=jnp.arange(1), hidden=16, depth=1, emb=8)
        >>> p0 = jax.tree.map(lambda a: a[0], ps)
        >>> res = fit(net, Method("scale", w=1.5, refresh=5, self_steps=4, self_batch=16), p0,
        ...           mix, key=jax.random.key(0), steps=10, batch=16)
        >>> res.losses.shape, bool(res.finite), len(res.params)
        ((10,), True, 2)
    """
    check_key("key", key)
    _check_fit_args(steps, batch, lr)
    if method.kind == "scale" and steps % method.refresh:
        raise ValueError(f"steps={steps} must be a multiple of refresh={method.refresh}")
    if w is not None:
        w = jnp.asarray(w, jnp.result_type(float))
        if w.ndim or method.kind not in ("mg", "scale"):
            raise ValueError(
                f"w of shape {w.shape} for kind={method.kind!r}; expected a scalar scale for "
                "'mg' or 'scale'"
            )
        if is_concrete(w):
            check_range("w", w, 1.0)
    return _fit(net, method, params, data, key, lr, steps, batch, schedule, w)


def _check_fit_args(steps, batch, lr) -> None:
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps={steps!r}; expected an integer >= 1")
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch={batch!r}; expected an integer >= 1")
    check_positive("lr", lr)


BASELINE_KINDS = ("conditional", "gft", "mg")


def _fit_many_loss(net, methods, data, schedule, batch):
    """The loss of one step of every method in ``methods`` on the same batch, noise and
    label-dropout draw (:func:`fit_many`): ``loss(params, ema, buffer, key, t) -> (sum,
    [methods])`` with parameters and EMA stacked on a leading method axis (no buffer). The
    sum's gradient is each method's own gradient (a method's loss depends only on its slice)."""
    null = net.num_classes

    def loss(params, ema, _buffer, key, step):
        kd, kl = jax.random.split(key)
        x0, labels = data.draw(batch, key=kd)
        kn, kdrop, kbeta = _keys(kl)
        n = noise_batch(x0, key=kn, schedule=schedule)
        one = jnp.full(n.t.shape, GUIDED, x0.dtype)
        nulls = jnp.full_like(labels, null)
        labs = [drop_labels(labels, m.p_uncond, null, key=kdrop) for m in methods]
        scalars = [
            gft_beta(kbeta, lab, null, m.beta_min, x0.dtype) if m.kind == "gft" else one
            for m, lab in zip(methods, labs, strict=True)
        ]
        # The stop-gradient passes, one vmapped network call: GFT's null prediction (its own
        # parameters), MG's teacher predictions (EMA parameters, label and null).
        jobs = []
        for i, m in enumerate(methods):
            if m.kind == "gft":
                jobs.append((0, i, nulls))
            elif m.kind == "mg":
                jobs += [(1, i, labs[i]), (1, i, nulls)]
        zeros = jnp.zeros_like(x0)
        mixed, shift = [zeros] * len(methods), [zeros] * len(methods)
        if jobs:
            frozen = jax.lax.stop_gradient(params)
            job_params = jax.tree.map(
                lambda p, e: jnp.stack([(p, e)[src][i] for src, i, _ in jobs]),
                frozen,
                ema,
            )
            job_labels = jnp.stack([lab for _, _, lab in jobs])
            out = jax.vmap(lambda p, lab: net(p, n.x_t, n.t, lab, one))(job_params, job_labels)
            j = 0
            for i, m in enumerate(methods):
                if m.kind == "gft":
                    mixed[i], j = out[j], j + 1
                elif m.kind == "mg":
                    shift[i] = mg_shift(out[j], out[j + 1], labs[i], null, _ramped_w(m, step))
                    j += 2

        def one_method(q, lab, scalar, aux, sh):
            # GFT's mixture and MG's shifted target; beta = 1 with aux = 0 and a zero shift
            # (the conditional model, MG's prediction) leave the plain squared error exactly.
            target = n.eps + jax.lax.stop_gradient(sh)
            return mixture_mse(net(q, n.x_t, n.t, lab, scalar), aux, scalar, target)

        stack = lambda xs: jnp.stack(xs)
        losses = jax.vmap(one_method)(
            params, stack(labs), stack(scalars), stack(mixed), stack(shift)
        )
        return jnp.sum(losses), losses

    return loss


@functools.partial(jax.jit, static_argnames=("net", "methods", "steps", "batch", "schedule"))
def _fit_many(net, methods, params, data, key, lr, steps, batch, schedule):
    stacked = jax.tree.map(lambda a: jnp.broadcast_to(a, (len(methods), *a.shape)), params)
    res = refreshing_fit(
        _fit_many_loss(net, methods, data, schedule, batch),
        stacked,
        optax.adam(lr),
        key=key,
        steps=steps,
        block=1,
        ema_decay=methods[0].ema,
        has_aux=True,
    )
    return FitResult(res.params, res.opt_state, res.aux.T, res.finite, res.state.ema)


def fit_many(
    net: Denoiser,
    methods: tuple[Method, ...],
    params: PyTree,
    data: DataSource,
    *,
    key: Array,
    steps: int,
    batch: int,
    lr: float = 2e-3,
    schedule: VPSchedule = DEFAULT_SCHEDULE,
) -> FitResult:
    """Train one copy of ``params`` with each of several baseline methods (conditional, GFT,
    MG) in one program: :func:`fit` of every method at the same ``key``, stacked.

    At a shared key the methods draw the same batches, noise and label dropout, so one step
    draws them once; the stop-gradient passes (GFT's null prediction, MG's two EMA-teacher
    predictions) run as one network call vmapped over those passes, and every method's
    gradient pass as one call vmapped over the methods. The network appears twice in the
    compiled loop instead of six times in three loops (one compile instead of three), for the
    same arithmetic. Its numbers equal :func:`fit`'s up to float32 round-off (XLA may order a
    batched contraction differently).

    Args:
      net: the denoiser.
      methods: a non-empty tuple of :class:`Method` of kind ``"conditional"``, ``"gft"`` or
        ``"mg"``, sharing one ``ema`` decay.
      params: initial parameters (shared by every method).
      data, key, steps, batch, lr, schedule: as for :func:`fit`.

    Returns:
      :class:`FitResult` whose parameters carry a leading method axis, with ``losses
      [methods, steps]``; ``finite`` is one flag for the loop: a non-finite step of any method
      freezes all of them.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.scale import Method, checkerboard_mixture, fit_many, mlp_denoiser
        >>> net, ps = mlp_denoiser(2, 4, seeds=jnp.arange(1), hidden=16, depth=1, emb=8)
        >>> p0 = jax.tree.map(lambda a: a[0], ps)
        >>> res = fit_many(net, (Method("conditional"), Method("gft"), Method("mg", w=2.0)), p0,
        ...                checkerboard_mixture(2), key=jax.random.key(0), steps=10, batch=16)
        >>> res.losses.shape, bool(res.finite)
        ((3, 10), True)
    """
    check_key("key", key)
    methods = tuple(methods)
    if not methods or any(not isinstance(m, Method) for m in methods):
        raise ValueError(f"methods={methods!r}; expected a non-empty tuple of Method")
    kinds = [m.kind for m in methods]
    if any(k not in BASELINE_KINDS for k in kinds):
        raise ValueError(f"method kinds {kinds}; expected each in {BASELINE_KINDS} (SCALE: fit)")
    if len({m.ema for m in methods}) > 1:
        raise ValueError(f"ema decays {[m.ema for m in methods]}; expected one shared value")
    _check_fit_args(steps, batch, lr)
    return _fit_many(net, methods, params, data, key, lr, steps, batch, schedule)
