"""A miniature query-based video instance segmentation model with STEAM's adapters.

Per frame: the GAP CNN's feature map (``core.nn.cnn``, stride 2) -> a linear neck (the layer the
static DASH folds into) -> DASH scale/shift (the routed task's static map plus its frame-level
dynamic part, :func:`~jaxpapers.steam._dash.dynamic_scale_shift`) -> frame-level (spatial) expert
adapters on every pixel feature ->
one cross-attention layer from ``Q`` object queries (plus an optional retrieved prompt) to the
pixel features and an MLP -> video-level (temporal) expert adapters read the queries' mean over
the video and add their output to every frame's queries -> class logits ``[Q, C + 1]`` (last =
no object) and mask logits ``[Q, H, W]`` (dot products of a mask embedding with the pixel
features, upsampled). Training matches queries to ground-truth instances per frame by the minimum
over all injective assignments (exact Hungarian matching at this size); STEAM adds a temporal
(association) term on the matched queries (:func:`temporal_loss`); inference keeps confident
queries, paints each pixel with the best query, and links queries across frames by maximising the
summed cosine similarity of their embeddings over all permutations (MinVIS-style association).
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import (
    check_finite,
    check_int,
    check_key,
    check_range,
    check_shape,
    is_concrete,
)
from jaxpapers.core.nn.cnn import CNNConfig, ConvNet
from jaxpapers.steam._dash import DashSlope, ScaleShift
from jaxpapers.steam._taste import Experts, init_experts, mixture_adapter, route


class VISConfig(eqx.Module):
    """Sizes of the video instance segmentation model and its adapters.

    Attributes:
      size: frame side in pixels (even).
      channels: image channels.
      width: backbone channels (one stride-2 stage, so features are ``size / 2`` square).
      dim: neck / query width ``D``.
      queries: object queries ``Q``.
      classes: object classes ``C`` (logits ``C + 1`` with "no object").
      experts: experts per adapter level (one per task), ``>= 1``.
      rank: bottleneck rank of each expert.
      temperature: routing softmax temperature.
      max_objects: ground-truth instance slots per frame ``K <= Q``.
    """

    size: int = eqx.field(static=True, default=16)
    channels: int = eqx.field(static=True, default=3)
    width: int = eqx.field(static=True, default=16)
    dim: int = eqx.field(static=True, default=16)
    queries: int = eqx.field(static=True, default=4)
    classes: int = eqx.field(static=True, default=4)
    experts: int = eqx.field(static=True, default=3)
    rank: int = eqx.field(static=True, default=4)
    temperature: float = eqx.field(static=True, default=0.05)
    max_objects: int = eqx.field(static=True, default=2)

    def __check_init__(self) -> None:
        for name in ("size", "channels", "width", "dim", "queries", "classes", "rank"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise ValueError(f"{name}={v!r}; expected a positive integer")
        if not (isinstance(self.experts, int) and self.experts >= 1):
            raise ValueError(f"experts={self.experts!r}; expected an expert count >= 1")
        if self.size % 2:
            raise ValueError(f"size={self.size}; expected an even frame side")
        if not 1 <= self.max_objects <= self.queries:
            raise ValueError(
                f"max_objects={self.max_objects}; expected 1 <= max_objects <= queries "
                f"({self.queries})"
            )
        if not self.temperature > 0:
            raise ValueError(f"temperature={self.temperature}; expected > 0")

    @property
    def grid(self) -> int:
        """Feature-map side."""
        return self.size // 2


class Adapters(NamedTuple):
    """STEAM's per-task parameters (leading axis: expert / task ``E``) and the baselines' prompts.

    Attributes:
      dash: :class:`ScaleShift` with ``[E, D]`` fields (identity for the pretrained task).
      slope: frame-level DASH :class:`DashSlope` with ``[E, D, D]`` fields (zero: static DASH).
      frame: spatial :class:`Experts` on pixel features.
      video: temporal :class:`Experts` on the video mean of each query.
      keys: ``[E, D]`` routing / prompt keys.
      prompts: ``[E, Q, D]`` L2P prompts added to the object queries.
    """

    dash: ScaleShift
    slope: DashSlope
    frame: Experts
    video: Experts
    keys: Float[Array, "e d"]
    prompts: Float[Array, "e q d"]


class Projectors(NamedTuple):
    """SCOA input projectors ``[E, D, D]`` of the frame and video experts (identity: no SCOA)."""

    frame: Float[Array, "e d d"]
    video: Float[Array, "e d d"]


class VISOutput(NamedTuple):
    """Per-frame outputs for one video (leading axis: frame ``T``).

    Attributes:
      class_logits: ``[T, Q, C + 1]``.
      mask_logits: ``[T, Q, H, W]``.
      queries: ``[T, Q, D]`` query embeddings (used for association).
      video_weights: ``[E]`` video-level routing weights.
      frame_weights: ``[T, E]`` frame-level routing weights.
    """

    class_logits: Float[Array, "t q c1"]
    mask_logits: Float[Array, "t q h w"]
    queries: Float[Array, "t q d"]
    video_weights: Float[Array, " e"]
    frame_weights: Float[Array, "t e"]


def _dense(key: jax.Array, n_in: int, n_out: int) -> dict[str, jax.Array]:
    return {
        "kernel": jax.random.normal(key, (n_in, n_out)) / np.sqrt(n_in),
        "bias": jnp.zeros((n_out,)),
    }


def _check_config(config: Any) -> None:
    if not isinstance(config, VISConfig):
        raise ValueError(f"config must be a VISConfig; got {type(config).__name__}")


def init_vis(*, config: VISConfig, key: jax.Array) -> tuple[nnx.GraphDef, dict[str, Any]]:
    """Backbone graph definition and the base model's parameters (a dict pytree)."""
    _check_config(config)
    check_key("key", key)
    kb, kn, kp, kq, ka, km, kc, kk = jax.random.split(key, 8)
    net = ConvNet(
        CNNConfig(channels=config.channels, widths=(config.width,), classes=1, stem_stride=2),
        rngs=nnx.Rngs(kb),
    )
    graphdef, backbone = nnx.split(net)
    d = config.dim
    ka1, ka2, ka3 = jax.random.split(ka, 3)
    km1, km2 = jax.random.split(km)
    params = {
        "backbone": backbone,
        "neck": _dense(kn, config.width, d),
        "pos": 0.1 * jax.random.normal(kp, (config.grid * config.grid, d)),
        "queries": jax.random.normal(kq, (config.queries, d)),
        "wq": _dense(ka1, d, d)["kernel"],
        "wk": _dense(ka2, d, d)["kernel"],
        "wv": _dense(ka3, d, d)["kernel"],
        "mlp1": _dense(km1, d, 2 * d),
        "mlp2": _dense(km2, 2 * d, d),
        "cls": _dense(kc, d, config.classes + 1),
        "mask": _dense(kk, d, d),
    }
    return graphdef, params


def init_adapters(*, config: VISConfig, key: jax.Array) -> Adapters:
    """Identity (static, zero-slope) DASH, zero-output experts, zero prompts and zero keys for
    ``config.experts`` tasks."""
    _check_config(config)
    check_key("key", key)
    e, d = config.experts, config.dim
    kf, kv = jax.random.split(key)
    return Adapters(
        dash=ScaleShift(jnp.ones((e, d)), jnp.zeros((e, d))),
        slope=DashSlope(jnp.zeros((e, d, d)), jnp.zeros((e, d, d))),
        frame=init_experts(e, d, config.rank, key=kf),
        video=init_experts(e, d, config.rank, key=kv),
        keys=jnp.zeros((e, d)),
        prompts=jnp.zeros((e, config.queries, d)),
    )


def identity_projectors(*, config: VISConfig) -> Projectors:
    """No SCOA constraint: every projector is the identity."""
    _check_config(config)
    eye = jnp.broadcast_to(jnp.eye(config.dim), (config.experts, config.dim, config.dim))
    return Projectors(eye, eye)


def check_video(name: str, video: Any, *, config: VISConfig) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``video`` is ``[..., T, size, size, C]``."""
    shape = tuple(np.shape(video))
    want = (config.size, config.size, config.channels)
    if len(shape) < 4 or shape[-3:] != want:
        raise ValueError(
            f"{name} has shape {shape}; expected [..., T, {', '.join(map(str, want))}]"
        )


def encode(
    graphdef: nnx.GraphDef, params: dict[str, Any], frames: Float[Array, "t h w c"]
) -> Float[Array, "t g g d"]:
    """Pretrained pixel features: backbone, then the linear neck (before DASH)."""
    if jnp.ndim(frames) != 4:
        raise ValueError(f"frames has shape {jnp.shape(frames)}; expected [T, H, W, C]")
    check_finite("frames", frames)
    feats = nnx.merge(graphdef, params["backbone"]).features(frames)
    return feats @ params["neck"]["kernel"] + params["neck"]["bias"][None, None, None]


def _check_feats(config: VISConfig, feats: Any, active: Any, hard: Any) -> None:
    if jnp.ndim(feats) != 4 or jnp.shape(feats)[-1] != config.dim:
        raise ValueError(f"feats has shape {jnp.shape(feats)}; expected [T, g, g, {config.dim}]")
    check_finite("feats", feats)
    check_shape("active", active, (config.experts,))
    check_range("hard", hard, 0.0, 1.0)


def routing_weights(
    adapters: Adapters,
    feats: Float[Array, "t g g d"],
    *,
    config: VISConfig,
    active: Float[Array, " e"],
    hard: Float[Array, ""] | float = 0.0,
    task_id: Int[Array, ""] | int | None = None,
) -> tuple[Float[Array, " e"], Float[Array, "t e"]]:
    """Video- and frame-level routing weights from pooled pre-DASH features.

    ``hard = 1`` turns the soft weights into a one-hot retrieval of the best-matching key (L2P).
    ``task_id`` (oracle routing, a diagnostic): a task index ``>= 0`` replaces both levels'
    weights by that task's one-hot vector (the video's true task given instead of inferred); a
    negative value keeps the router's weights, so a traced per-run ``task_id`` switches the
    oracle on and off inside one compiled program.
    """
    _check_feats(config, feats, active, hard)
    if task_id is not None:
        task_id = check_int("task_id", task_id)
        if is_concrete(task_id) and int(task_id) >= config.experts:
            raise ValueError(f"task_id={task_id}; expected < experts={config.experts}")
    frame_summary = feats.mean(axis=(1, 2))
    video_summary = frame_summary.mean(0)
    wv = route(video_summary, adapters.keys, temperature=config.temperature, active=active)
    wf = route(frame_summary, adapters.keys, temperature=config.temperature, active=active)

    def harden(w: jax.Array) -> jax.Array:
        one = jax.nn.one_hot(jnp.argmax(w, -1), w.shape[-1])
        return hard * one + (1 - hard) * w

    wv, wf = harden(wv), harden(wf)
    if task_id is None:
        return wv, wf
    given = jax.nn.one_hot(task_id, config.experts, dtype=wv.dtype)  # zeros when negative
    oracle = jnp.asarray(task_id) >= 0
    return jnp.where(oracle, given, wv), jnp.where(oracle, given[None], wf)


def decode(
    params: dict[str, Any],
    adapters: Adapters,
    projectors: Projectors,
    feats: Float[Array, "t g g d"],
    *,
    config: VISConfig,
    active: Float[Array, " e"],
    hard: Float[Array, ""] | float = 0.0,
    task_classes: Float[Array, "e c"] | None = None,
    task_id: Int[Array, ""] | int | None = None,
) -> VISOutput:
    """Segment one video from its pre-DASH pixel features (see the module docstring).

    Args:
      params: base parameters from :func:`init_vis`.
      adapters: :class:`Adapters` (identity / zero ones give the base model exactly).
      projectors: SCOA projectors.
      feats: ``[T, g, g, D]`` from :func:`encode`.
      config: model sizes.
      active: ``[E]`` 0/1 mask of the experts that exist (tasks seen so far).
      hard: 1 for hard key retrieval (L2P), 0 for soft routing.
      task_classes: optional ``[E, C]`` 0/1 classes of each expert's task; the object-class
        logits then get ``log(sum_e w_e [c in task e])``, the routed prior over classes (a hard
        retrieval restricts the prediction to the retrieved task's classes).
      task_id: optional oracle routing (:func:`routing_weights`): the video's true task, whose
        DASH, experts, prompt and class prior then take all the weight (negative: route).
    """
    t, g, _, _d = feats.shape
    wv, wf = routing_weights(
        adapters, feats, config=config, active=active, hard=hard, task_id=task_id
    )
    _x_in, x = _pixel_stage(adapters, projectors, feats, wv, wf)
    q = _query_stage(params, adapters, wv, x)
    q = q + mixture_adapter(q.mean(0), wv, adapters.video, projectors.video)[None]
    class_logits = q @ params["cls"]["kernel"] + params["cls"]["bias"][None, None]
    if task_classes is not None:
        prior = jnp.log(wv @ task_classes + 1e-4)
        class_logits = class_logits + jnp.concatenate([prior, jnp.zeros((1,))])[None, None]
    embed = q @ params["mask"]["kernel"] + params["mask"]["bias"][None, None]
    low = jnp.einsum("tqd,tnd->tqn", embed, x).reshape(t, config.queries, g, g)
    masks = jax.image.resize(low, (t, config.queries, config.size, config.size), "linear")
    return VISOutput(class_logits, masks, q, wv, wf)


def _pixel_stage(
    adapters: Adapters, projectors: Projectors, feats: jax.Array, wv: jax.Array, wf: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """DASH (routed per video: ``sum_e w_e`` of task ``e``'s static map plus its frame-level
    dynamic part at the frame's summary), then the frame-level experts: (their input, the pixel
    tokens)."""
    t, g, _, d = feats.shape
    dev = feats.mean(axis=(1, 2))[:, None, :] - adapters.keys[None]  # [T, E, D]: g_f - k_e
    gamma = (wv @ adapters.dash.gamma)[None] + jnp.einsum(
        "e,ted,edf->tf", wv, dev, adapters.slope.gamma
    )
    beta = (wv @ adapters.dash.beta)[None] + jnp.einsum(
        "e,ted,edf->tf", wv, dev, adapters.slope.beta
    )
    x = (feats * gamma[:, None, None] + beta[:, None, None]).reshape(t, g * g, d)
    return x, x + mixture_adapter(x, wf, adapters.frame, projectors.frame)


def _query_stage(
    params: dict[str, Any], adapters: Adapters, wv: jax.Array, x: jax.Array
) -> jax.Array:
    """Prompted object queries attend to the pixel tokens, then an MLP: ``[T, Q, D]``."""
    d = x.shape[-1]
    tokens = x + params["pos"][None]
    q0 = params["queries"] + jnp.einsum("e,eqd->qd", wv, adapters.prompts)
    logits = jnp.einsum("qd,tnd->tqn", q0 @ params["wq"], tokens @ params["wk"]) / np.sqrt(d)
    q = q0[None] + jax.nn.softmax(logits, -1) @ (tokens @ params["wv"])
    hidden = jax.nn.gelu(q @ params["mlp1"]["kernel"] + params["mlp1"]["bias"][None, None])
    return q + hidden @ params["mlp2"]["kernel"] + params["mlp2"]["bias"][None, None]


def adapter_inputs(
    params: dict[str, Any],
    adapters: Adapters,
    projectors: Projectors,
    feats: Float[Array, "t g g d"],
    *,
    config: VISConfig,
    active: Float[Array, " e"],
    hard: Float[Array, ""] | float = 0.0,
) -> tuple[Float[Array, "n d"], Float[Array, "q d"]]:
    """What the frame experts (``[T * g * g, D]`` pixel rows) and the video experts (``[Q, D]``
    query means) read for one video: the inputs whose span SCOA protects."""
    wv, wf = routing_weights(adapters, feats, config=config, active=active, hard=hard)
    x_in, x = _pixel_stage(adapters, projectors, feats, wv, wf)
    q = _query_stage(params, adapters, wv, x)
    return x_in.reshape(-1, x_in.shape[-1]), q.mean(0)


def masked_logits(
    class_logits: Float[Array, "*b c1"], allowed: Float[Array, " c"]
) -> Float[Array, "*b c1"]:
    """Class logits with the disallowed object classes at ``-1e9`` (no-object always allowed)."""
    if jnp.ndim(allowed) != 1 or jnp.shape(class_logits)[-1:] != (jnp.shape(allowed)[0] + 1,):
        raise ValueError(
            f"allowed has shape {jnp.shape(allowed)}; expected [C] with class_logits "
            f"{jnp.shape(class_logits)} ending in C + 1 (the no-object class)"
        )
    keep = jnp.concatenate([allowed, jnp.ones((1,), allowed.dtype)])
    return jnp.where(jnp.broadcast_to(keep > 0, class_logits.shape), class_logits, -1e9)


def assignments(queries: int, slots: int) -> np.ndarray:
    """All injective maps of ``slots`` ground-truth slots to ``queries`` queries, ``[M, slots]``."""
    check_int("queries", queries, minimum=1)
    check_int("slots", slots, minimum=0)
    if slots > queries:
        raise ValueError(f"slots={slots}; expected at most queries={queries}")
    return np.asarray(list(itertools.permutations(range(queries), slots)), np.int32)


def frame_targets(
    instances: Int[Array, "h w"], classes: Int[Array, "h w"], slots: int
) -> tuple[Float[Array, "k h w"], Int[Array, " k"], Float[Array, " k"]]:
    """Per-slot ground truth of one frame: masks ``[K, H, W]``, classes ``[K]``, visible ``[K]``."""
    if jnp.ndim(instances) != 2:
        raise ValueError(f"instances has shape {jnp.shape(instances)}; expected [H, W]")
    check_shape("classes", classes, jnp.shape(instances))
    check_int("slots", slots, minimum=1)
    masks = (instances[None] == jnp.arange(1, slots + 1)[:, None, None]).astype(jnp.float32)
    cls = jnp.max(masks * classes[None], axis=(1, 2)).astype(jnp.int32) - 1
    visible = (masks.sum((1, 2)) > 0).astype(jnp.float32)
    return masks, jnp.maximum(cls, 0), visible


def _assignment_costs(
    class_logits: jax.Array,
    mask_logits: jax.Array,
    instances: jax.Array,
    classes: jax.Array,
    allowed: jax.Array,
    assign: jax.Array,
    no_object_weight: float,
) -> tuple[jax.Array, jax.Array]:
    """Total cost of every assignment ``[M]`` and the slots' visibility ``[K]``."""
    if jnp.ndim(class_logits) != 2:
        raise ValueError(f"class_logits has shape {jnp.shape(class_logits)}; expected [Q, C + 1]")
    q = jnp.shape(class_logits)[0]
    if jnp.ndim(mask_logits) != 3 or jnp.shape(mask_logits)[0] != q:
        raise ValueError(f"mask_logits has shape {jnp.shape(mask_logits)}; expected [{q}, H, W]")
    check_shape("instances", instances, jnp.shape(mask_logits)[1:])
    if jnp.ndim(assign) != 2:
        raise ValueError(f"assign has shape {jnp.shape(assign)}; expected [M, K] (assignments)")
    check_range("no_object_weight", no_object_weight, 0.0)
    k = assign.shape[1]
    gt, cls, visible = frame_targets(instances, classes, k)
    logp = jax.nn.log_softmax(masked_logits(class_logits, allowed), -1)
    m = mask_logits.reshape(mask_logits.shape[0], -1)
    y = gt.reshape(k, -1)
    bce = jnp.mean(
        jnp.maximum(m, 0)[:, None]
        - m[:, None] * y[None]
        + jnp.log1p(jnp.exp(-jnp.abs(m)))[:, None],
        -1,
    )
    p = jax.nn.sigmoid(m)
    dice = 1 - (2 * p @ y.T + 1) / (p.sum(-1)[:, None] + y.sum(-1)[None] + 1)
    cost = -logp[:, cls] + bce + dice  # [Q, K]
    matched_cost = jnp.sum(cost[assign, jnp.arange(k)[None]] * visible[None], -1)  # [M]
    matched = jnp.any(
        (assign[:, :, None] == jnp.arange(class_logits.shape[0])[None, None])
        & (visible[None, :, None] > 0),
        1,
    )  # [M, Q]
    none_cost = -no_object_weight * jnp.sum(jnp.where(matched, 0.0, logp[None, :, -1]), -1)
    return matched_cost + none_cost, visible


def matching_loss(
    class_logits: Float[Array, "q c1"],
    mask_logits: Float[Array, "q h w"],
    instances: Int[Array, "h w"],
    classes: Int[Array, "h w"],
    allowed: Float[Array, " c"],
    assign: Int[Array, "m k"],
    *,
    no_object_weight: float = 0.5,
) -> Float[Array, ""]:
    """Set-prediction loss of one frame under the best assignment of queries to instances.

    ``cost(q, k) = -log p_q(class_k) + BCE(mask_q, mask_k) + dice(mask_q, mask_k)`` for visible
    instances; unmatched queries pay ``-no_object_weight * log p_q(no object)``.
    """
    total, _visible = _assignment_costs(
        class_logits, mask_logits, instances, classes, allowed, assign, no_object_weight
    )
    return jnp.min(total)


def match(
    class_logits: Float[Array, "q c1"],
    mask_logits: Float[Array, "q h w"],
    instances: Int[Array, "h w"],
    classes: Int[Array, "h w"],
    allowed: Float[Array, " c"],
    assign: Int[Array, "m k"],
    *,
    no_object_weight: float = 0.5,
) -> tuple[Float[Array, ""], Int[Array, " k"], Float[Array, " k"]]:
    """:func:`matching_loss` with the best assignment: ``(loss, query of each slot [K], visible
    [K])`` (the assignment is a constant for the gradient)."""
    total, visible = _assignment_costs(
        class_logits, mask_logits, instances, classes, allowed, assign, no_object_weight
    )
    best = jnp.argmin(jax.lax.stop_gradient(total))
    return total[best], assign[best], visible


def temporal_loss(
    queries: Float[Array, "t q d"],
    matched: Int[Array, "t k"],
    visible: Float[Array, "t k"],
    *,
    temperature: float = 0.1,
) -> Float[Array, ""]:
    """Video-level (temporal) objective: each instance's query in frame ``t + 1`` must be the one
    the association step links to its query in frame ``t``.

    For a ground-truth instance visible in frames ``t`` and ``t + 1``, with matched queries
    ``a = matched[t, k]`` and ``b = matched[t + 1, k]``: ``-log softmax_j(cos(q_t[a], q_{t+1}[j])
    / temperature)[b]``, averaged over such pairs (0 when there are none). :func:`associate`
    links by the same cosine, so this is the cross-entropy of its (softened) choice.
    """
    if jnp.ndim(queries) != 3:
        raise ValueError(f"queries has shape {jnp.shape(queries)}; expected [T, Q, D]")
    t = queries.shape[0]
    if jnp.ndim(matched) != 2 or jnp.shape(matched)[0] != t:
        raise ValueError(f"matched has shape {jnp.shape(matched)}; expected [{t}, K]")
    check_shape("visible", visible, jnp.shape(matched))
    check_range("temperature", temperature, 0.0, low_open=True)
    unit = queries / (jnp.linalg.norm(queries, axis=-1, keepdims=True) + 1e-6)
    sim = jnp.einsum("tad,tbd->tab", unit[:-1], unit[1:]) / temperature  # [T - 1, Q, Q]
    rows = jnp.take_along_axis(sim, matched[:-1, :, None], axis=1)  # [T - 1, K, Q]
    logp = jax.nn.log_softmax(rows, -1)
    picked = jnp.take_along_axis(logp, matched[1:, :, None], axis=-1)[..., 0]  # [T - 1, K]
    valid = visible[:-1] * visible[1:]
    return -jnp.sum(picked * valid) / jnp.maximum(jnp.sum(valid), 1.0)


class Segmentation(NamedTuple):
    """Inference result for one video.

    Attributes:
      semantic: ``[T, H, W]`` class map (0 background, ``c + 1`` class ``c``).
      tracks: ``[T, H, W]`` track id per pixel (-1 background).
      order: ``[T, Q]`` query of each track in each frame (after association).
    """

    semantic: Int[Array, "t h w"]
    tracks: Int[Array, "t h w"]
    order: Int[Array, "t q"]


def associate(queries: Float[Array, "t q d"]) -> Int[Array, "t q"]:
    """Link queries across frames: frame ``t``'s permutation maximises the summed cosine
    similarity to frame ``t - 1``'s linked queries (all ``Q!`` permutations are scored)."""
    if jnp.ndim(queries) != 3:
        raise ValueError(f"queries has shape {jnp.shape(queries)}; expected [T, Q, D]")
    check_finite("queries", queries)
    perms = jnp.asarray(assignments(queries.shape[1], queries.shape[1]))
    unit = queries / (jnp.linalg.norm(queries, axis=-1, keepdims=True) + 1e-6)

    def step(prev: jax.Array, cur: jax.Array) -> tuple[jax.Array, jax.Array]:
        sim = prev @ cur.T  # [Q tracks, Q queries]
        score = jnp.sum(sim[jnp.arange(sim.shape[0])[None], perms], -1)
        best = perms[jnp.argmax(score)]
        return cur[best], best

    first = jnp.arange(queries.shape[1])
    _, rest = jax.lax.scan(step, unit[0], unit[1:])
    return jnp.concatenate([first[None], rest])


def segment(out: VISOutput, allowed: Float[Array, " c"], *, threshold: float = 0.5) -> Segmentation:
    """Semantic and tracked instance maps from :func:`decode`'s output."""
    check_range("threshold", threshold, 0.0, 1.0)
    prob = jax.nn.softmax(masked_logits(out.class_logits, allowed), -1)  # [T, Q, C+1]
    cls = jnp.argmax(prob[..., :-1], -1)
    conf = jnp.max(prob[..., :-1], -1)
    keep = prob[..., -1] < threshold
    sig = jax.nn.sigmoid(out.mask_logits)
    score = jnp.where(keep[..., None, None], conf[..., None, None] * sig, 0.0)  # [T, Q, H, W]
    best = jnp.argmax(score, 1)  # [T, H, W]
    fg = jnp.take_along_axis(sig, best[:, None], 1)[:, 0] > threshold
    fg = fg & (jnp.max(score, 1) > 0)
    best_cls = jnp.take_along_axis(cls[:, :, None, None], best[:, None], 1)[:, 0]
    semantic = jnp.where(fg, best_cls + 1, 0)
    order = associate(out.queries)  # order[t, track] = query
    track_of_query = jnp.argsort(order, -1)  # [T, Q]
    tracks = jnp.where(fg, _gather_tracks(track_of_query, best), -1)
    return Segmentation(semantic.astype(jnp.int32), tracks.astype(jnp.int32), order)


def _gather_tracks(track_of_query: Int[Array, "t q"], best: Int[Array, "t h w"]) -> jax.Array:
    return jax.vmap(lambda tq, b: tq[b])(track_of_query, best)
