"""P08 STEAM: continual video instance segmentation with spatial-temporal MoE adapters.

Derivation (from the abstract and its predecessors)
---------------------------------------------------
Continual video instance segmentation (CVIS) adapts a video instance segmentation (VIS) model,
pretrained on a first task, to a sequence of tasks that add classes or shift the appearance,
without forgetting the earlier tasks. Prompt-based continual learners (L2P) freeze the
pretrained model and *retrieve* one learned prompt per input by matching the input's feature
(the query) against learned keys; the abstract names two failures of this: (i) frame-level
spatial knowledge (classification of each frame's masks) and video-level temporal knowledge
(trajectories, identities) degrade differently, and (ii) a hard retrieval is brittle when tasks
are ambiguous or the distribution shifts. STEAM answers with three parts and a balanced objective,
which we implement as follows at miniature size:

* **DASH** (distribution-aware spatial-temporal scaling and shifting). SSF (Lian et al. 2022)
  adapts a frozen network with per-channel ``y = gamma * x + beta`` after a layer. DASH has two
  levels. *Video level* (static, one map per task): the map of task ``t`` is initialised from
  feature statistics so that the task's features are moved onto the pretrained distribution,
  ``gamma_t = sigma_1 / sigma_t``, ``beta_t = mu_1 - gamma_t mu_t`` (the "domain gap" of the
  abstract is a moment mismatch here), then trained; it is affine per channel, so it folds into
  the preceding linear layer: ``W' = W diag(gamma)``, ``b' = gamma b + beta``
  (:func:`fold_scale_shift`). *Frame level* (dynamic): a single map suits the task's average
  frame only, so the scale and shift become functions of each frame's pooled feature ``g_f``,
  expanded to first order about the task's key ``k_t`` (its mean summary):
  ``gamma_t(g_f) = gamma_t + (g_f - k_t) G_t``, ``beta_t(g_f) = beta_t + (g_f - k_t) H_t`` with
  learned ``G_t, H_t`` initialised at 0 (:func:`dynamic_scale_shift`; a frame at its task's mean
  gets the static map). Both levels are routed per video with the video-level weights, so an old
  video keeps its own task's maps.
* **TASTE** (task-adaptive spatial-temporal experts). One low-rank bottleneck expert per task at
  two levels: *frame-level* experts add ``sum_e w_e B_e A_e x`` to every pixel feature of a frame
  (spatial knowledge), *video-level* experts read each object query's mean over the video and add
  their output to that query in every frame (temporal knowledge: a shared per-track correction,
  which keeps classes and embeddings consistent across frames and so helps association). The
  weights ``w = softmax_e(cos(g - c, k_e - c) / tau)`` come from the pooled frozen features ``g``
  of the frame or video, one key ``k_e`` per expert (the mean of its task's features) and the
  keys' mean ``c``: L2P's cosine query-key match (centred, because uncentred pooled features of
  different tasks are nearly parallel), made soft, so an ambiguous input mixes experts instead of
  committing to one prompt. At ``tau = 0.05`` a clearly matched input gets one-hot weights to
  float round-off.
* **Balanced** spatial-temporal objective. The abstract's point is that frame-level spatial
  knowledge (classification, masks) and video-level temporal knowledge (trajectories) degrade
  differently, and the mixture is "spatial-temporal balanced". We read this as giving the two
  levels equal standing in what each task's experts learn: the per-frame set-prediction loss
  (spatial) plus, with equal weight (``balance = 1``), a temporal association loss on the same
  matched queries (:func:`temporal_loss`: the instance's query in frame ``t + 1`` must win the
  cosine softmax against its query in frame ``t``, the choice :func:`associate` makes at
  inference). Left out: any adaptive re-weighting of the two terms (the abstract does not say how
  the balance is set; a fixed equal weight is the plain reading) and a balance between old and new
  tasks beyond SCOA's constraint.
* **SCOA** (subspace-constrained orthogonal adaptation). As in InfLoRA / O-LoRA, the update for a
  new task lives in the orthogonal complement of the earlier tasks' input subspace: expert ``t``
  reads its input through ``P_t = I - U U^T`` where ``U`` spans (99% of the energy of) the inputs
  that the adapter saw on tasks ``< t``. For ``x`` in ``span(U)``, ``B_t A_t P_t x = 0`` exactly,
  so earlier inputs give unchanged adapter outputs whatever the new expert learns; with soft
  routing this also makes a routing mistake on an old input harmless.

Together: an old video routed to its own task (its key wins the router) runs through its own
static and dynamic DASH, its own experts (later experts get zero weight to round-off and read it
through SCOA), its own class prior and the classifier columns frozen since its task, so its
outputs after later tasks equal its outputs right after its task up to float round-off (checked
in ``scoa_exactness``).

The base VIS model (:mod:`jaxpapers.steam._vis`) is query-based in the Mask2Former / MinVIS
style: a small CNN (``core.nn.cnn``) and a linear neck give pixel features; ``Q`` object queries
cross-attend to them and predict a class (or "no object") and a mask each per frame; training
matches queries to instances by the best assignment; at inference queries are linked across
frames by matching their embeddings (no tracking head).

Metrics: per-task mIoU (background + the task's classes, from the confusion matrix of
:mod:`jaxpapers.core.segmentation_metrics`), identity switches per consecutive-frame pair of a
ground-truth instance, average final mIoU, and average forgetting
``mean_j max_{i<T} acc[i, j] - acc[T, j]``.

References:
  * STEAM: Spatial-Temporal Balanced Mixture-of-Experts Adapters for Continual Video Instance
    Segmentation (P08 in the paper list; 2026).
  * D. Lian et al., "Scaling & Shifting Your Features: A New Baseline for Efficient Model
    Tuning" (SSF), NeurIPS 2022. https://arxiv.org/abs/2210.08823
  * Y.-S. Liang and W.-J. Li, "InfLoRA: Interference-Free Low-Rank Adaptation for Continual
    Learning", CVPR 2024. https://arxiv.org/abs/2404.00228
  * X. Wang et al., "Orthogonal Subspace Learning for Language Model Continual Learning" (O-LoRA),
    EMNLP 2023 Findings. https://arxiv.org/abs/2310.14152
  * Z. Wang et al., "Learning to Prompt for Continual Learning" (L2P), CVPR 2022.
    https://arxiv.org/abs/2112.08654
  * D.-A. Huang et al., "MinVIS: A Minimal Video Instance Segmentation Framework without
    Video-based Training", NeurIPS 2022. https://arxiv.org/abs/2208.02245
  * B. Cheng et al., "Masked-attention Mask Transformer for Universal Image Segmentation"
    (Mask2Former), CVPR 2022. https://arxiv.org/abs/2112.01527

Examples:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers.steam import ScaleShift, fold_scale_shift, scale_shift
    >>> w, b = jnp.ones((3, 2)), jnp.zeros(2)
    >>> ss = ScaleShift(jnp.array([2.0, 0.5]), jnp.array([1.0, -1.0]))
    >>> k, c = fold_scale_shift(w, b, ss)
    >>> h = jnp.arange(3.0)
    >>> bool(jnp.allclose(h @ k + c, scale_shift(h @ w + b, ss)))
    True
"""

from jaxpapers.steam._dash import (
    DashSlope,
    ScaleShift,
    dash_init,
    dynamic_scale_shift,
    feature_moments,
    fold_scale_shift,
    identity_scale_shift,
    scale_shift,
)
from jaxpapers.steam._metrics import SwitchCounts, forgetting, identity_switches
from jaxpapers.steam._scoa import input_subspace, orthogonal_projector, project_out
from jaxpapers.steam._taste import Experts, init_experts, mixture_adapter, route
from jaxpapers.steam._videos import make_videos
from jaxpapers.steam._vis import (
    Adapters,
    Projectors,
    Segmentation,
    VISConfig,
    VISOutput,
    adapter_inputs,
    assignments,
    associate,
    check_video,
    decode,
    encode,
    frame_targets,
    identity_projectors,
    init_adapters,
    init_vis,
    masked_logits,
    match,
    matching_loss,
    routing_weights,
    segment,
    temporal_loss,
)

__all__ = [
    "Adapters",
    "DashSlope",
    "Experts",
    "Projectors",
    "ScaleShift",
    "Segmentation",
    "SwitchCounts",
    "VISConfig",
    "VISOutput",
    "adapter_inputs",
    "assignments",
    "associate",
    "check_video",
    "dash_init",
    "decode",
    "dynamic_scale_shift",
    "encode",
    "feature_moments",
    "fold_scale_shift",
    "forgetting",
    "frame_targets",
    "identity_projectors",
    "identity_scale_shift",
    "identity_switches",
    "init_adapters",
    "init_experts",
    "init_vis",
    "input_subspace",
    "make_videos",
    "masked_logits",
    "match",
    "matching_loss",
    "mixture_adapter",
    "orthogonal_projector",
    "project_out",
    "route",
    "routing_weights",
    "scale_shift",
    "segment",
    "temporal_loss",
]
