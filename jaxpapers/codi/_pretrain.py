"""iBOT-style masked self-distillation of a ViT with an EMA teacher, and CODI's target mixing.

One step on a batch of images:

1. two augmented views ``u, v`` (flip, shift, colour jitter) and a random patch mask per view
   (masking ratio uniform in ``[mask_min, mask_max]``);
2. the teacher sees the unmasked views, the student the masked ones; a shared projection head
   maps [CLS] and patch tokens to ``K`` prototype logits;
3. targets ``t = softmax((z_t - c) / tau_t)`` with separate centres for [CLS] and patches; CODI
   mixes ``t_patch <- (1 - lambda) t_patch + lambda t_cls`` (same view);
4. loss = [CLS] distillation across views ``(H(t_cls^u, s_cls^v) + H(t_cls^v, s_cls^u)) / 2`` plus
   the masked-patch loss ``sum_{masked} H(t_patch, s_patch) / #masked`` averaged over views;
5. Adam step on the student, centre update (momentum 0.9), EMA teacher with a cosine momentum
   schedule, teacher temperature warm-up.
"""

from __future__ import annotations

import functools
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
    ema_update,
    teacher_momentum,
    teacher_targets,
    teacher_temperature,
    update_center,
)
from jaxpapers.core.checks import check_key, check_ndim, check_shape
from jaxpapers.core.nn.vit import ViT, ViTConfig, ViTTokens


class SSLConfig(eqx.Module):
    """Sizes and schedules of the self-distillation.

    Attributes:
      vit: the backbone (``mask_token`` is switched on).
      out_dim: number of prototypes ``K``.
      hidden: width of the projection head's hidden layer.
      bottleneck: width before the (weight-normalised) prototype layer.
      student_temp: ``tau_s``.
      teacher_temp_start, teacher_temp_end, temp_warmup: teacher temperature warm-up.
      center_momentum: centring momentum.
      momentum_base: EMA momentum at step 0 (cosine to 1 at ``total_steps``).
      total_steps: length of the schedule.
      mask_min, mask_max: range of the per-image masking ratio.
      lr, weight_decay: AdamW settings.
    """

    vit: ViTConfig = eqx.field(
        static=True, default=ViTConfig(image_size=32, channels=3, patch=8, dim=64, depth=2)
    )
    out_dim: int = eqx.field(static=True, default=64)
    hidden: int = eqx.field(static=True, default=128)
    bottleneck: int = eqx.field(static=True, default=32)
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

    @property
    def num_patches(self) -> int:
        return (self.vit.image_size // self.vit.patch) ** 2


class ProjectionHead(nnx.Module):
    """DINO head: MLP -> L2-normalised bottleneck -> weight-normalised prototypes."""

    def __init__(self, dim: int, hidden: int, bottleneck: int, out_dim: int, *, rngs: nnx.Rngs):
        self.fc1 = nnx.Linear(dim, hidden, rngs=rngs)
        self.fc2 = nnx.Linear(hidden, bottleneck, rngs=rngs)
        self.prototypes = nnx.Param(
            jax.random.normal(rngs.params(), (bottleneck, out_dim)) / jnp.sqrt(bottleneck)
        )

    def __call__(self, x: jax.Array) -> jax.Array:
        z = self.fc2(jax.nn.gelu(self.fc1(x)))
        z = z / (jnp.linalg.norm(z, axis=-1, keepdims=True) + 1e-6)
        w = self.prototypes[...]
        return z @ (w / jnp.linalg.norm(w, axis=0, keepdims=True))


class SSLNet(nnx.Module):
    """Backbone ViT (with mask token) and projection head."""

    def __init__(self, cfg: SSLConfig, *, rngs: nnx.Rngs):
        self.vit = ViT(cfg.vit._replace(mask_token=True), rngs=rngs)
        self.head = ProjectionHead(cfg.vit.dim, cfg.hidden, cfg.bottleneck, cfg.out_dim, rngs=rngs)

    def __call__(
        self, x: jax.Array, mask: jax.Array | None = None
    ) -> tuple[jax.Array, jax.Array, ViTTokens]:
        """``(cls_logits [B, K], patch_logits [B, N, K], tokens)``."""
        t = self.vit.tokens(x, mask)
        return self.head(t.cls), self.head(t.patches), t


class SSLState(NamedTuple):
    """Student and teacher parameters, centres, optimiser state and step counter."""

    student: Any
    teacher: Any
    center_cls: Float[Array, " k"]
    center_patch: Float[Array, " k"]
    opt_state: Any
    step: jax.Array


class StepStats(NamedTuple):
    """Per-step scalars: total loss and its [CLS] and patch parts."""

    loss: jax.Array
    cls_loss: jax.Array
    patch_loss: jax.Array


def _optimizer(cfg: SSLConfig) -> optax.GradientTransformation:
    return optax.chain(
        optax.clip_by_global_norm(3.0), optax.adamw(cfg.lr, weight_decay=cfg.weight_decay)
    )


def init_state(cfg: SSLConfig, *, key: jax.Array) -> tuple[nnx.GraphDef, SSLState]:
    """Graph definition and initial state (teacher = student, zero centres)."""
    check_key("key", key)
    graphdef, params = nnx.split(SSLNet(cfg, rngs=nnx.Rngs(key)))
    zeros = jnp.zeros((cfg.out_dim,))
    return graphdef, SSLState(
        params, params, zeros, zeros, _optimizer(cfg).init(params), jnp.zeros((), jnp.int32)
    )


def augment(images: Float[Array, "b h w c"], *, key: jax.Array) -> Float[Array, "b h w c"]:
    """Random horizontal flip, circular shift by up to 1/8 of the side, brightness/contrast and
    per-channel gain jitter, image by image."""
    check_key("key", key)

    def one(x: jax.Array, k: jax.Array) -> jax.Array:
        kf, ks, kb, kc, kg = jax.random.split(k, 5)
        x = jnp.where(jax.random.bernoulli(kf), x[:, ::-1], x)
        s = x.shape[0] // 8
        dy, dx = jax.random.randint(ks, (2,), -s, s + 1)
        x = jnp.roll(x, (dy, dx), axis=(0, 1))
        mean = jnp.mean(x)
        contrast = jax.random.uniform(kc, minval=0.7, maxval=1.3)
        gain = jax.random.uniform(kg, (x.shape[-1],), minval=0.8, maxval=1.2)
        x = (x - mean) * contrast + mean + jax.random.uniform(kb, minval=-0.15, maxval=0.15)
        return x * gain[None, None, :]

    return jax.vmap(one)(images, jax.random.split(key, images.shape[0]))


def random_masks(cfg: SSLConfig, batch: int, *, key: jax.Array) -> jax.Array:
    """``[batch, N]`` bool masks, each image with a ratio uniform in ``[mask_min, mask_max]``."""
    check_key("key", key)
    kr, ku = jax.random.split(key)
    ratio = jax.random.uniform(kr, (batch, 1), minval=cfg.mask_min, maxval=cfg.mask_max)
    return jax.random.uniform(ku, (batch, cfg.num_patches)) < ratio


def ssl_loss(
    student: Any,
    teacher: Any,
    graphdef: nnx.GraphDef,
    state: SSLState,
    views: jax.Array,
    masks: jax.Array,
    *,
    cfg: SSLConfig,
    lam: jax.Array | None,
) -> tuple[jax.Array, tuple[StepStats, jax.Array, jax.Array]]:
    """The iBOT (``lam=None``) or CODI loss of the student on two views ``[2, B, H, W, C]``.

    Returns ``(loss, (stats, teacher_cls_logits, teacher_patch_logits))``.
    """
    check_shape("views", views, (2, None, None, None, None))
    check_shape("masks", masks, (2, views.shape[1], None))
    if lam is not None:
        check_lambda(lam)
    net_s, net_t = nnx.merge(graphdef, student), nnx.merge(graphdef, teacher)
    tau_t = teacher_temperature(
        state.step, cfg.temp_warmup, cfg.teacher_temp_start, cfg.teacher_temp_end
    )
    t_cls, t_patch, _ = jax.vmap(lambda x: net_t(x))(views)
    t_cls, t_patch = jax.lax.stop_gradient((t_cls, t_patch))
    s_cls, s_patch, _ = jax.vmap(lambda x, m: net_s(x, m))(views, masks)
    tc = teacher_targets(t_cls, state.center_cls, tau_t)  # [2, B, K]
    tp = teacher_targets(t_patch, state.center_patch, tau_t)  # [2, B, N, K]
    if lam is not None:
        tp = jax.vmap(codi_targets, in_axes=(0, 0, None))(tp, tc, lam)
    tau_s = cfg.student_temp
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


def train_step(
    graphdef: nnx.GraphDef,
    state: SSLState,
    images: Float[Array, "b h w c"],
    *,
    key: jax.Array,
    cfg: SSLConfig,
    lam: float | jax.Array | None,
) -> tuple[SSLState, StepStats]:
    """One self-distillation step (pure; jit/vmap it). ``lam=None`` is iBOT, a value is CODI."""
    check_key("key", key)
    kv, km = jax.random.split(key)
    b = images.shape[0]
    views = jnp.stack([augment(images, key=k) for k in jax.random.split(kv)])
    masks = jnp.stack([random_masks(cfg, b, key=k) for k in jax.random.split(km)])
    grads, (stats, t_cls, t_patch) = jax.grad(ssl_loss, has_aux=True)(
        state.student, state.teacher, graphdef, state, views, masks, cfg=cfg, lam=lam
    )
    opt = _optimizer(cfg)
    updates, opt_state = opt.update(grads, state.opt_state, state.student)
    student = optax.apply_updates(state.student, updates)
    m = teacher_momentum(state.step, cfg.total_steps, cfg.momentum_base)
    new = SSLState(
        student,
        ema_update(state.teacher, student, m),
        update_center(state.center_cls, t_cls, cfg.center_momentum),
        update_center(state.center_patch, t_patch, cfg.center_momentum),
        opt_state,
        state.step + 1,
    )
    return new, stats


class PretrainResult(NamedTuple):
    """Final state, per-step stats ``[steps]`` and whether every loss stayed finite."""

    state: SSLState
    stats: StepStats
    finite: jax.Array


@functools.partial(jax.jit, static_argnames=("graphdef", "cfg", "steps", "batch", "codi"))
def pretrain(
    graphdef: nnx.GraphDef,
    state: SSLState,
    images: Float[Array, "n h w c"],
    *,
    key: jax.Array,
    cfg: SSLConfig,
    steps: int,
    batch: int,
    lam: float | jax.Array = 0.0,
    codi: bool = True,
) -> PretrainResult:
    """``steps`` self-distillation steps on random minibatches of ``images`` (jitted; vmappable
    over ``state``, ``key`` and ``lam``).

    Once a loss is non-finite the remaining steps leave the state unchanged (``finite`` is then
    False). ``codi=False`` runs the iBOT targets (``lam`` ignored); ``codi=True`` with ``lam = 0``
    gives the same numbers bit for bit.
    """
    check_key("key", key)
    check_lambda(lam)
    n = images.shape[0]

    def body(carry, k):
        st, ok = carry
        kb, ks = jax.random.split(k)
        idx = jax.random.randint(kb, (batch,), 0, n)
        new, stats = train_step(
            graphdef, st, images[idx], key=ks, cfg=cfg, lam=lam if codi else None
        )
        ok = ok & jnp.isfinite(stats.loss)
        st = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, st)
        return (st, ok), stats

    (state, ok), stats = jax.lax.scan(body, (state, jnp.array(True)), jax.random.split(key, steps))
    return PretrainResult(state, stats, ok)


def teacher_tokens(
    graphdef: nnx.GraphDef, params: Any, images: Float[Array, "b h w c"]
) -> ViTTokens:
    """Backbone tokens and last attention of the network with ``params`` (e.g. the teacher)."""
    check_ndim("images", images, 4)
    return nnx.merge(graphdef, params).vit.tokens(images)


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
    "teacher_tokens",
    "train_step",
]
