"""iBOT-style masked self-distillation of a ViT with an EMA teacher, and CODI's target mixing.

One step on a batch of images:

1. two augmented views ``u, v`` (flip, shift or random resized crop, colour jitter, optionally
   greyscale and a channel permutation: :func:`augment`) and a random patch mask per view
   (masking ratio uniform in ``[mask_min, mask_max]``);
2. the teacher sees the unmasked views, the student the masked ones; a shared projection head
   maps [CLS] and patch tokens to ``K`` prototype logits (with ``head_bn`` its hidden layer is
   batch-normalised, statistics per view and per call: :class:`ProjectionHead`);
3. targets ``t = softmax((z_t - c) / tau_t)`` with separate centres for [CLS] and patches; CODI
   mixes ``t_patch <- (1 - lambda) t_patch + lambda t_cls`` (same view);
4. loss = [CLS] distillation across views ``(H(t_cls^u, s_cls^v) + H(t_cls^v, s_cls^u)) / 2`` plus
   the masked-patch loss ``sum_{masked} H(t_patch, s_patch) / #masked`` averaged over views;
5. AdamW step on the student, centre update (momentum 0.9), EMA teacher with a cosine momentum
   schedule, teacher temperature warm-up.

:func:`pretrain` runs these steps through :func:`jaxpapers.core.fit.fit` (the student's
parameters are fit's parameters; teacher, centres and step counter are its carried state).

Examples:
    >>> import jax
    >>> from jaxpapers.codi import SSLConfig, init_state, pretrain, teacher_tokens
    >>> from jaxpapers.core.nn.vit import ViTConfig
    >>> config = SSLConfig(vit=ViTConfig(image_size=8, channels=3, patch=4, dim=16, depth=1,
    ...                    heads=2, mlp=16), out_dim=8, hidden=16, bottleneck=8, total_steps=2)
    >>> state = init_state(config=config, key=jax.random.key(0))
    >>> images = jax.random.uniform(jax.random.key(1), (8, 8, 8, 3))
    >>> res = pretrain(state, images, key=jax.random.key(2), config=config, steps=2, batch=4,
    ...                lam=0.1)
    >>> res.losses.shape, bool(res.finite), teacher_tokens(res.state, images).patches.shape
    ((2,), True, (8, 4, 16))
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jaxtyping import Array, Float

from jaxpapers.codi._distill import (
    check_lambda,
    codi_targets,
    distillation_loss,
    teacher_momentum,
    teacher_targets,
    teacher_temperature,
    update_center,
)
from jaxpapers.core.checks import check_key, check_ndim, check_range, check_shape
from jaxpapers.core.fit import fit
from jaxpapers.core.nn.vit import ViT, ViTConfig, ViTTokens
from jaxpapers.core.pytrees import ema_update


class SSLConfig(eqx.Module):
    """Sizes and schedules of the self-distillation.

    Attributes:
      vit: the backbone (``mask_token`` is switched on).
      out_dim: number of prototypes ``K``.
      hidden: width of the projection head's hidden layer.
      bottleneck: width before the (weight-normalised) prototype layer.
      head_bn: batch-normalise the head's hidden layer (DINO's and iBOT's ``use_bn`` head
        option): without it the prototype logits of a small untrained network barely vary
        between images, so centring flattens every target (see :class:`ProjectionHead`).
      student_temp: ``tau_s``.
      teacher_temp_start, teacher_temp_end, temp_warmup: teacher temperature warm-up.
      center_momentum: centring momentum.
      momentum_base: EMA momentum at step 0 (cosine to 1 at ``total_steps``).
      total_steps: length of the schedule.
      mask_min, mask_max: range of the per-image masking ratio.
      lr, weight_decay: AdamW settings (``lr`` is the peak learning rate).
      lr_warmup: steps of the linear learning-rate warm-up from 0 (DINO: 10 epochs); 0 = none.
      lr_final: the learning rate as a fraction of ``lr`` at ``total_steps`` after a cosine
        decay (DINO: about 0.002); 1 = constant after the warm-up.
      crop_min: smallest area fraction of the random resized crop of each view (DINO's global
        crops: 0.4 of the area up to all of it); 1 = no crop, a circular shift instead.
      channel_shuffle: probability of a random permutation of a view's colour channels (a
        strong hue change; DINO's colour jitter changes the hue by up to 0.1).
      grey: probability of turning a view into grey (DINO: 0.2).
    """

    vit: ViTConfig = eqx.field(
        static=True, default=ViTConfig(image_size=32, channels=3, patch=8, dim=64, depth=2)
    )
    out_dim: int = eqx.field(static=True, default=64)
    hidden: int = eqx.field(static=True, default=128)
    bottleneck: int = eqx.field(static=True, default=32)
    head_bn: bool = eqx.field(static=True, default=False)
    student_temp: float = eqx.field(static=True, default=0.1)
    teacher_temp_start: float = eqx.field(static=True, default=0.04)
    teacher_temp_end: float = eqx.field(static=True, default=0.07)
    temp_warmup: int = eqx.field(static=True, default=100)
    center_momentum: float = eqx.field(static=True, default=0.9)
    momentum_base: float = eqx.field(static=True, default=0.99)
    total_steps: int = eqx.field(static=True, default=300)
    mask_min: float = eqx.field(static=True, default=0.1)
    mask_max: float = eqx.field(static=True, default=0.5)
    lr: float = eqx.field(static=True, default=1e-3)
    weight_decay: float = eqx.field(static=True, default=0.04)
    lr_warmup: int = eqx.field(static=True, default=0)
    lr_final: float = eqx.field(static=True, default=1.0)
    crop_min: float = eqx.field(static=True, default=1.0)
    channel_shuffle: float = eqx.field(static=True, default=0.0)
    grey: float = eqx.field(static=True, default=0.0)

    def __check_init__(self) -> None:
        v = self.vit
        if v.image_size % v.patch:
            raise ValueError(
                f"vit.image_size={v.image_size} is not divisible by vit.patch={v.patch}"
            )
        if not 0.0 <= self.mask_min <= self.mask_max < 1.0:
            raise ValueError(
                f"mask_min={self.mask_min}, mask_max={self.mask_max}; expected "
                "0 <= mask_min <= mask_max < 1"
            )
        for name in ("student_temp", "teacher_temp_start", "teacher_temp_end", "lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)!r}; expected > 0")
        if not 0.0 <= self.center_momentum < 1.0 or not 0.0 <= self.momentum_base <= 1.0:
            raise ValueError(
                f"center_momentum={self.center_momentum}, momentum_base={self.momentum_base}; "
                "expected values in [0, 1)"
            )
        if not 0.0 < self.crop_min <= 1.0 or not 0.0 < self.lr_final <= 1.0:
            raise ValueError(
                f"crop_min={self.crop_min}, lr_final={self.lr_final}; expected values in (0, 1]"
            )
        for name in ("channel_shuffle", "grey"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name}={getattr(self, name)!r}; expected a probability")
        if not (isinstance(self.lr_warmup, int) and 0 <= self.lr_warmup):
            raise ValueError(f"lr_warmup={self.lr_warmup!r}; expected an integer >= 0")

    @property
    def num_patches(self) -> int:
        return (self.vit.image_size // self.vit.patch) ** 2


class ProjectionHead(nnx.Module):
    """DINO head: MLP -> L2-normalised bottleneck -> weight-normalised prototypes.

    With ``bn`` the hidden layer is batch-normalised before its GELU (DINO's and iBOT's ``use_bn``
    option): standardised over every leading axis of the call (the images of a batch, or all
    their patch tokens) with batch statistics, as both networks use them in training, then a
    learned per-unit scale and shift. No running statistics are kept: the head only makes
    targets, and every call normalises over the batch it is given.

    Why it matters at small sizes (measured on P01's quick bed, ``results/P01/NOTES.md``): an
    untrained small ViT's [CLS] prototype logits vary between images by less than the teacher
    temperature, so once the centre has caught up with their mean the targets are nearly
    uniform, and the student matches them by making its output still less image-dependent (the
    features collapse towards a constant). Batch-normalising the hidden layer removes the part
    shared by every image, and the targets stay image-dependent. DINO and iBOT train ViTs
    without it (their ``use_bn`` option is off); iBOT's option normalises both global crops'
    [CLS] and patch tokens together, while here each call (one view's [CLS] tokens, or its patch
    tokens) has its own statistics.
    """

    def __init__(
        self,
        dim: int,
        hidden: int,
        bottleneck: int,
        out_dim: int,
        *,
        rngs: nnx.Rngs,
        bn: bool = False,
    ):
        self.fc1 = nnx.Linear(dim, hidden, rngs=rngs)
        self.fc2 = nnx.Linear(hidden, bottleneck, rngs=rngs)
        self.prototypes = nnx.Param(
            jax.random.normal(rngs.params(), (bottleneck, out_dim)) / jnp.sqrt(bottleneck)
        )
        self.bn = bn
        if bn:
            self.bn_scale = nnx.Param(jnp.ones((hidden,)))
            self.bn_bias = nnx.Param(jnp.zeros((hidden,)))

    def __call__(self, x: jax.Array) -> jax.Array:
        h = self.fc1(x)
        if self.bn:
            if math.prod(x.shape[:-1]) < 2:
                raise ValueError(
                    f"x has shape {x.shape}; a batch-normalised head needs at least two tokens "
                    "over its leading axes (batch statistics)"
                )
            axes = tuple(range(h.ndim - 1))
            mean = jnp.mean(h, axis=axes, keepdims=True)
            var = jnp.mean(jnp.square(h - mean), axis=axes, keepdims=True)
            shape = (1,) * (h.ndim - 1) + (-1,)
            scale, bias = self.bn_scale[...].reshape(shape), self.bn_bias[...].reshape(shape)
            h = (h - mean) * jax.lax.rsqrt(var + 1e-5) * scale + bias
        z = self.fc2(jax.nn.gelu(h))
        z = z / (jnp.linalg.norm(z, axis=-1, keepdims=True) + 1e-6)
        w = self.prototypes[...]
        return z @ (w / jnp.linalg.norm(w, axis=0, keepdims=True))


class SSLNet(nnx.Module):
    """Backbone ViT (with mask token) and projection head."""

    def __init__(self, *, config: SSLConfig, rngs: nnx.Rngs):
        self.vit = ViT(config.vit._replace(mask_token=True), rngs=rngs)
        self.head = ProjectionHead(
            config.vit.dim,
            config.hidden,
            config.bottleneck,
            config.out_dim,
            rngs=rngs,
            bn=config.head_bn,
        )

    def __call__(
        self, x: jax.Array, mask: jax.Array | None = None
    ) -> tuple[jax.Array, jax.Array, ViTTokens]:
        """``(cls_logits [B, K], patch_logits [B, N, K], tokens)``."""
        t = self.vit.tokens(x, mask)
        return self.head(t.cls), self.head(t.patches), t


class SSLState(NamedTuple):
    """Everything a self-distillation run carries besides the optimiser state.

    A pytree: ``graphdef`` holds no arrays (it is static under ``jit`` and ``vmap``), so states of
    several seeds stack leaf by leaf and a stacked state is ``vmap``-ed like one.

    Attributes:
      graphdef: the structure of :class:`SSLNet`; :meth:`model` merges it with parameters.
      student: the student's parameters (``nnx.State``), the ones the optimiser moves.
      teacher: the EMA teacher's parameters.
      center_cls, center_patch: ``[K]`` running centres of the teacher's logits.
      step: number of applied steps (drives the temperature and momentum schedules).
    """

    graphdef: nnx.GraphDef
    student: Any
    teacher: Any
    center_cls: Float[Array, " k"]
    center_patch: Float[Array, " k"]
    step: jax.Array

    def model(self, params: Any) -> SSLNet:
        """The :class:`SSLNet` with ``params`` (e.g. ``state.model(state.teacher)``)."""
        return nnx.merge(self.graphdef, params)


class StepStats(NamedTuple):
    """Per-step scalars: total loss and its [CLS] and patch parts."""

    loss: jax.Array
    cls_loss: jax.Array
    patch_loss: jax.Array


def ssl_optimizer(*, config: SSLConfig) -> optax.GradientTransformation:
    """The student's optimiser: global-norm clipping at 3, then AdamW (``config.weight_decay``)
    at ``config.lr``, with DINO's linear warm-up over ``config.lr_warmup`` steps and cosine decay
    to ``config.lr_final * config.lr`` at ``config.total_steps`` when those are set."""
    lr: float | optax.Schedule = config.lr
    if config.lr_warmup or config.lr_final < 1.0:
        lr = optax.warmup_cosine_decay_schedule(
            init_value=0.0 if config.lr_warmup else config.lr,
            peak_value=config.lr,
            warmup_steps=config.lr_warmup,
            decay_steps=max(config.total_steps, config.lr_warmup + 1),
            end_value=config.lr * config.lr_final,
        )
    return optax.chain(
        optax.clip_by_global_norm(3.0), optax.adamw(lr, weight_decay=config.weight_decay)
    )


def init_state(*, config: SSLConfig, key: jax.Array) -> SSLState:
    """The initial state: student and teacher equal, zero centres, step 0."""
    check_key("key", key)
    graphdef, params = nnx.split(SSLNet(config=config, rngs=nnx.Rngs(key)))
    zeros = jnp.zeros((config.out_dim,))
    return SSLState(graphdef, params, params, zeros, zeros, jnp.zeros((), jnp.int32))


def augment(
    images: Float[Array, "b h w c"],
    *,
    key: jax.Array,
    crop_min: float = 1.0,
    channel_shuffle: float = 0.0,
    grey: float = 0.0,
) -> Float[Array, "b h w c"]:
    """Random horizontal flip, brightness/contrast and per-channel gain jitter, image by image;
    with ``crop_min = 1`` a circular shift by up to 1/8 of the side, else a random square crop of
    ``crop_min`` to all of the area resized to the full side (bilinear); with probability
    ``channel_shuffle`` a random permutation of the channels, with probability ``grey`` the
    channel mean in every channel."""
    check_key("key", key)
    check_range("crop_min", crop_min, 0.0, 1.0, low_open=True)

    def one(x: jax.Array, k: jax.Array) -> jax.Array:
        kf, ks, kb, kc, kg, kp, kq, kz = jax.random.split(k, 8)
        x = jnp.where(jax.random.bernoulli(kf), x[:, ::-1], x)
        side = x.shape[0]
        if crop_min < 1.0:
            ka, ko = jax.random.split(ks)
            crop = side * jnp.sqrt(jax.random.uniform(ka, minval=crop_min, maxval=1.0))
            offset = jax.random.uniform(ko, (2,)) * (side - crop)
            scale = side / crop
            x = jax.image.scale_and_translate(
                x, x.shape, (0, 1), jnp.stack([scale, scale]), -offset * scale, "linear"
            )
        else:
            s = side // 8
            dy, dx = jax.random.randint(ks, (2,), -s, s + 1)
            x = jnp.roll(x, (dy, dx), axis=(0, 1))
        mean = jnp.mean(x)
        contrast = jax.random.uniform(kc, minval=0.7, maxval=1.3)
        gain = jax.random.uniform(kg, (x.shape[-1],), minval=0.8, maxval=1.2)
        x = (x - mean) * contrast + mean + jax.random.uniform(kb, minval=-0.15, maxval=0.15)
        x = x * gain[None, None, :]
        if channel_shuffle > 0.0:
            perm = jax.random.permutation(kp, x.shape[-1])
            x = jnp.where(jax.random.bernoulli(kq, channel_shuffle), x[..., perm], x)
        if grey > 0.0:
            g = jnp.broadcast_to(jnp.mean(x, -1, keepdims=True), x.shape)
            x = jnp.where(jax.random.bernoulli(kz, grey), g, x)
        return x

    return jax.vmap(one)(images, jax.random.split(key, images.shape[0]))


def random_masks(batch: int, *, config: SSLConfig, key: jax.Array) -> jax.Array:
    """``[batch, N]`` bool masks, each image with a ratio uniform in ``[mask_min, mask_max]``."""
    check_key("key", key)
    kr, ku = jax.random.split(key)
    ratio = jax.random.uniform(kr, (batch, 1), minval=config.mask_min, maxval=config.mask_max)
    return jax.random.uniform(ku, (batch, config.num_patches)) < ratio


def _views(images: jax.Array, key: jax.Array, config: SSLConfig) -> jax.Array:
    """The two augmented views ``[2, B, H, W, C]`` of a step with key ``key``."""
    kv, _ = jax.random.split(key)
    opts = {"crop_min": config.crop_min, "channel_shuffle": config.channel_shuffle}
    return jnp.stack(
        [augment(images, key=k, grey=config.grey, **opts) for k in jax.random.split(kv)]
    )


def _masks(batch: int, key: jax.Array, config: SSLConfig) -> jax.Array:
    """The two views' patch masks ``[2, B, N]`` of a step with key ``key``."""
    _, km = jax.random.split(key)
    return jnp.stack([random_masks(batch, config=config, key=k) for k in jax.random.split(km)])


def _teacher_logits(state: SSLState, views: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The teacher's [CLS] and patch logits ``[2, B, K]``, ``[2, B, N, K]`` on both views."""
    net_t = state.model(state.teacher)
    t_cls, t_patch, _ = jax.vmap(lambda x: net_t(x))(views)
    return jax.lax.stop_gradient((t_cls, t_patch))


def ssl_loss(
    student: Any,
    state: SSLState,
    views: jax.Array,
    masks: jax.Array,
    *,
    config: SSLConfig,
    lam: jax.Array | None,
) -> tuple[jax.Array, tuple[StepStats, jax.Array, jax.Array]]:
    """The iBOT (``lam=None``) or CODI loss of the ``student`` parameters on two views
    ``[2, B, H, W, C]`` with masks ``[2, B, N]``; teacher, centres and step come from ``state``.

    Returns ``(loss, (stats, teacher_cls_logits, teacher_patch_logits))``.
    """
    check_shape("views", views, (2, None, None, None, None))
    check_shape("masks", masks, (2, views.shape[1], None))
    if lam is not None:
        check_lambda(lam)
    tau_t = teacher_temperature(
        state.step, config.temp_warmup, config.teacher_temp_start, config.teacher_temp_end
    )
    t_cls, t_patch = _teacher_logits(state, views)
    net_s = state.model(student)
    s_cls, s_patch, _ = jax.vmap(lambda x, m: net_s(x, m))(views, masks)
    tc = teacher_targets(t_cls, state.center_cls, tau_t)  # [2, B, K]
    tp = teacher_targets(t_patch, state.center_patch, tau_t)  # [2, B, N, K]
    if lam is not None:
        tp = jax.vmap(codi_targets, in_axes=(0, 0, None))(tp, tc, lam)
    tau_s = config.student_temp
    cls_loss = 0.5 * (
        distillation_loss(s_cls[1], tc[0], tau_s) + distillation_loss(s_cls[0], tc[1], tau_s)
    )
    w = masks.astype(jnp.float32)
    patch_loss = 0.5 * (
        distillation_loss(s_patch[0], tp[0], tau_s, w[0])
        + distillation_loss(s_patch[1], tp[1], tau_s, w[1])
    )
    loss = cls_loss + patch_loss
    return loss, (StepStats(loss, cls_loss, patch_loss), t_cls, t_patch)


def _advance(
    state: SSLState, student: Any, t_cls: jax.Array, t_patch: jax.Array, config: SSLConfig
) -> SSLState:
    """The state after an optimiser step that gave ``student``: EMA teacher (cosine momentum
    schedule), centres moved towards the step's teacher logits, step + 1."""
    m = teacher_momentum(state.step, config.total_steps, config.momentum_base)
    return SSLState(
        state.graphdef,
        student,
        ema_update(state.teacher, student, m),
        update_center(state.center_cls, t_cls, config.center_momentum),
        update_center(state.center_patch, t_patch, config.center_momentum),
        state.step + 1,
    )


def train_step(
    state: SSLState,
    opt_state: optax.OptState,
    images: Float[Array, "b h w c"],
    *,
    key: jax.Array,
    config: SSLConfig,
    lam: float | jax.Array | None,
) -> tuple[SSLState, optax.OptState, StepStats]:
    """One self-distillation step (pure; jit/vmap it). ``lam=None`` is iBOT, a value is CODI.

    ``opt_state`` is the state of :func:`ssl_optimizer` (``ssl_optimizer(config=config).init(
    state.student)`` to start); returns the new state, optimiser state and the step's losses.
    """
    check_key("key", key)
    views, masks = _views(images, key, config), _masks(images.shape[0], key, config)
    grads, (stats, t_cls, t_patch) = jax.grad(ssl_loss, has_aux=True)(
        state.student, state, views, masks, config=config, lam=lam
    )
    updates, opt_state = ssl_optimizer(config=config).update(grads, opt_state, state.student)
    student = optax.apply_updates(state.student, updates)
    return _advance(state, student, t_cls, t_patch, config), opt_state, stats


class PretrainResult(NamedTuple):
    """Output of :func:`pretrain` (the names of :class:`jaxpapers.core.fit.FitResult`).

    Attributes:
      state: the final :class:`SSLState` (student, teacher, centres, step); the student's
        parameters are what ``FitResult.params`` would hold.
      opt_state: the optimiser's state after the last applied step.
      losses: ``[steps]`` total loss of every step.
      finite: whether every step was applied (no non-finite loss, gradient or update).
      stats: ``[steps]`` :class:`StepStats` of every step (the loss and its two parts).
    """

    state: SSLState
    opt_state: Any
    losses: jax.Array
    finite: jax.Array
    stats: StepStats


@functools.partial(jax.jit, static_argnames=("config", "steps", "batch", "codi"))
def pretrain(
    state: SSLState,
    images: Float[Array, "n h w c"],
    *,
    key: jax.Array,
    config: SSLConfig,
    steps: int,
    batch: int,
    lam: float | jax.Array = 0.0,
    codi: bool = True,
) -> PretrainResult:
    """``steps`` self-distillation steps on random minibatches of ``images`` (jitted; vmappable
    over ``state``, ``key`` and ``lam``), through :func:`jaxpapers.core.fit.fit`.

    The optimiser (:func:`ssl_optimizer`) starts afresh. Step ``t`` uses the ``t``-th key of
    ``jax.random.split(key, steps)``, split again into the minibatch's key and the step's key
    (views and masks). Once a loss, gradient or update is non-finite the remaining steps leave the
    state unchanged (``finite`` is then False). ``codi=False`` runs the iBOT targets (``lam``
    ignored); ``codi=True`` with ``lam = 0`` gives the same numbers bit for bit.
    """
    check_key("key", key)
    check_lambda(lam)
    check_ndim("images", images, 4)
    n = images.shape[0]
    mix = lam if codi else None

    def batch_fn(t: jax.Array, k: jax.Array) -> jax.Array:
        kb, _ = jax.random.split(k)
        return images[jax.random.randint(kb, (batch,), 0, n)]

    def loss_fn(student, x, k, st):
        _, ks = jax.random.split(k)
        views, masks = _views(x, ks, config), _masks(batch, ks, config)
        loss, (stats, t_cls, t_patch) = ssl_loss(student, st, views, masks, config=config, lam=mix)
        # What the centre update needs of this step's teacher logits: their means ([1, K] each).
        means = tuple(
            jnp.mean(z.reshape(-1, z.shape[-1]), axis=0, keepdims=True) for z in (t_cls, t_patch)
        )
        return loss, (stats, means)

    def after_step(st, student, t, k, aux):
        # The centres move towards the mean of the teacher logits the loss computed (fit hands
        # the step's aux to after_step, so the teacher does not run twice per step).
        _, (m_cls, m_patch) = aux
        return _advance(st, student, m_cls, m_patch, config)

    res = fit(
        loss_fn,
        state.student,
        ssl_optimizer(config=config),
        steps=steps,
        key=key,
        batch_fn=batch_fn,
        has_aux=True,
        state=state,
        after_step=after_step,
        after_step_aux=True,
    )
    return PretrainResult(res.state, res.opt_state, res.losses, res.finite, res.aux[0])


def teacher_tokens(state: SSLState, images: Float[Array, "b h w c"]) -> ViTTokens:
    """Backbone tokens and last attention of ``state``'s teacher on ``images``."""
    check_ndim("images", images, 4)
    return state.model(state.teacher).vit.tokens(images)


__all__ = [
    "PretrainResult",
    "ProjectionHead",
    "SSLConfig",
    "SSLNet",
    "SSLState",
    "StepStats",
    "augment",
    "init_state",
    "pretrain",
    "random_masks",
    "ssl_loss",
    "ssl_optimizer",
    "teacher_tokens",
    "train_step",
]
