r"""P01 CODI: cross distillation of the teacher [CLS] distribution into masked-patch targets.

Self-supervised ViTs trained by self-distillation (DINO, iBOT, DINOv2) learn good image-level
features, while their patch features are weaker for dense prediction. The paper observes that the
[CLS] token concentrates its attention on a few patches and that dense errors sit on patches of low
attention, explains it by a local gradient analysis, and proposes CODI. Only the abstract is
available; the method below is derived from it and from iBOT.

**iBOT baseline.** Student and EMA teacher ViTs with a shared projection head to :math:`K`
prototypes. Teacher targets :math:`t = \mathrm{softmax}((z_t - c)/\tau_t)` with a running centre
:math:`c \leftarrow 0.9 c + 0.1\,\bar z_t` and :math:`\tau_t` warmed up from 0.04 to 0.07; the
student uses :math:`\tau_s = 0.1`; loss :math:`H(t, s) = -\sum_k t_k \log
\mathrm{softmax}(z_s/\tau_s)_k` (gradient :math:`(\mathrm{softmax}(z_s/\tau_s) - t)/\tau_s`). The
[CLS] loss pairs the two augmented views crosswise; the masked-image-modelling loss sums
:math:`H(t^{patch}_j, s^{patch}_j)` over masked patches :math:`j` of the student's view (the teacher
sees it unmasked). Teacher parameters :math:`\theta_t \leftarrow m\theta_t + (1-m)\theta_s` with a
cosine schedule of :math:`m` to 1.

**Why low-attention patches learn little (the analysis, :func:`readout_gradients`).** Along the
[CLS] read-out of the last block, :math:`\mathrm{cls}' = \mathrm{cls} + W_o\sum_h\sum_j a_{hj}
v_{hj}`, so with the attention held fixed

.. math:: \partial L_{img}/\partial x_j = J_{LN}(x_j)^\top \textstyle\sum_h a_{hj} W_{v,h} u_h,

weighted by the [CLS]-to-patch attention mass :math:`a_{hj}`: image-level semantics reach patch
:math:`j` only in proportion to its attention.

**CODI.** Give every masked patch an attention-independent share of the global semantics by mixing
the teacher's [CLS] distribution of the same view into each patch target,

.. math:: \tilde t^{patch}_j = (1-\lambda)\, t^{patch}_j + \lambda\, t^{cls},

with a small :math:`\lambda` (architecture unchanged; :math:`\lambda = 0` is iBOT bit for
bit).
Because :math:`H` is linear in the target, :math:`L(\tilde t) = (1-\lambda)L(t^{patch}) + \lambda
L(t^{cls})`: CODI adds a [CLS]-to-patch distillation term of weight :math:`\lambda` on masked
patches.

**What is measured** (``jaxpapers reproduce P01``) on 32x32 texture scenes
(:func:`texture_scenes`: one or two squares or discs, each carrying one of four textures,
horizontal or vertical stripes, a diagonal checker or a grid, with random phase, period and
amplitude, added to a plain grey background; patch 8, so 16 patches labelled by their majority
class or background): frozen teacher features, a per-patch linear probe (dense accuracy, mIoU)
and [CLS] k-NN accuracy of the largest object's class, for iBOT and CODI over seeds and a
:math:`\lambda` sweep (one vmapped pretraining of the lambdas a size runs; the sweep's extra
lambda pretrains with them at ``--full`` and separately when named at quick size); the dense
error binned by one reference attention map, the trained iBOT teacher's [CLS]-to-patch attention
of the same seed, so that iBOT's and CODI's bins hold the same patches (foreground patches
only); and the sanity checks (:math:`\lambda=0` equals iBOT bit for bit; the read-out gradient
equals its closed form). Every table carries two references: the same probes on the untrained
network of each seed, and the majority-class prediction (the background is about half of the
patches and the classes are balanced).

**Why this bed (the derivation).** A frozen-feature probe reads features linearly. If the label
of a patch were a linear function of its pixels (a colour, a mean brightness), an untrained
ViT's random linear patch embedding would already expose it, and pretraining could not beat the
untrained network (on the shape scenes of :mod:`jaxpapers.core.data.scenes` used before, it did
not). Here every texture has mean 0 over its random phase, so neither an object's presence nor
its class changes the expected patch: the label lies in second-order statistics (the energy at
the texture's frequencies, which a linear probe on the patch's Fourier magnitudes decodes and one
on its pixels does not, ``tests/test_codi_textures.py``). The random network exposes them only
through its few random nonlinearities; self-distillation can learn them, because the two views
share the textures while the phase (shifts) and brightness change between them. The grey, plain
background removes the colour and background content that the two views would otherwise share
and that the distillation matched first (``results/P01/NOTES.md``).

**The quick recipe.** A three-block ViT of width 32 with a batch-normalised projection head
(``head_bn``), 300 steps of AdamW at
1e-3 (20-step linear warm-up, cosine decay to 0.1 of the peak), a fast EMA teacher (momentum
from 0.9 instead of DINO's 0.996: with a few hundred steps a slow teacher stays near its random
initialisation), a constant teacher temperature 0.04 and the mild augmentation (flip, circular
shift, brightness/contrast/gain jitter; every texture is flip-invariant, so a flip never changes
the class). The head's normalisation is a small-scale deviation from the ViT recipe: DINO and
iBOT have it as an option (``use_bn``) but train ViTs without it; here each view's batch is
normalised on its own, and [CLS] and patch tokens separately (iBOT's option normalises both
global crops' tokens together). Why it is needed: on this bed the untrained network's [CLS]
prototype logits vary between images by less than the teacher temperature, so once the centre
has caught up with their mean every image gets nearly the same, nearly uniform target, and the
student matches them by making its output still less image-dependent (the features collapse
towards a constant and the loss climbs to :math:`2 \log K`). Batch statistics remove the part
every image shares, so the targets differ between images from the first step and the loss falls.
Without it (the recipe before 2026-12-05) the targets ended near uniform on every variant tried
and no variant moved all three probes; the measurements are in ``results/P01/NOTES.md``. With a
batch-normalised head the targets are image-dependent even before training, so
``targets_informative`` then shows that CODI's mixed-in term is not zero, not that training made
the targets informative. The third block and eight seeds are what make the dense gain
measurable: iBOT's dense gain over the untrained network is small at this size (measured on
2026-12-05 over 16 exploration seeds: about +0.019 with two blocks and +0.026 with three,
seed-to-seed std about 0.03 and 0.026; training raises the texture patches' accuracy but lowers
the background's), so five seeds showed it about half of the time; quick mode runs eight and
pretrains lambda = 0 and 0.1 only (``lambda_sweep``, with lambda = 0.3 too, runs at ``--full``
or when named).
The loss is the sum of two cross-entropies (the [CLS] term and the masked-patch term), so each
term, not the sum, is the one to compare with :math:`\log K`; both terms and the collapse
diagnostics are in the extras. DINO's other recipe parts are options of :class:`SSLConfig`:
random resized crops (``crop_min``), greyscale views (``grey``) and a random permutation of the
colour channels (``channel_shuffle``); ``--full`` uses the crops and greyscale. The
``pretraining_learns`` experiment checks that iBOT's frozen features beat the untrained
network's, and ``targets_informative`` that iBOT's final teacher targets are neither uniform nor
collapsed: CODI's patch target :math:`(1-\lambda)\,t_{patch} + \lambda\,t_{cls}` differs from
iBOT's :math:`t_{patch}` by :math:`\lambda (t_{cls} - t_{patch})`, which vanishes when both
targets are uniform, so with uniform targets CODI is iBOT and no comparison can show it either
way. ``codi_vs_ibot``, ``lambda_sweep`` and ``low_attention_patches`` declare both as
preconditions (``low_attention_patches`` also ``attention_informative``: the reference map must
separate something, else its bins are arbitrary sets of patches), so while one does not hold
they read "inconclusive (precondition not met)" and say nothing about CODI. At ``--full`` (5000
steps of batch 256 on 8192 images, dim 192, depth 6, DINO's schedules and augmentation) the
head is batch-normalised too (the same deviation); that run has not been made on this 2-core
machine.

**API.** :func:`init_state` builds an :class:`SSLState` (the network structure, student and
teacher parameters, centres, step), :func:`pretrain` runs ``steps`` steps through
:func:`jaxpapers.core.fit.fit` and returns a :class:`PretrainResult`; ``state.model(params)`` is
the :class:`SSLNet` with those parameters and :func:`teacher_tokens` the teacher's frozen tokens.

Examples:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.codi import codi_targets, distillation_loss
    >>> tp = jnp.full((1, 4, 3), 1 / 3)
    >>> tc = jnp.array([[0.8, 0.1, 0.1]])
    >>> s = jnp.zeros((1, 4, 3))
    >>> mixed = distillation_loss(s, codi_targets(tp, tc, 0.1), 0.1)
    >>> bool(jnp.isclose(mixed, 0.9 * distillation_loss(s, tp, 0.1)
    ...      + 0.1 * distillation_loss(s, jnp.broadcast_to(tc[:, None], (1, 4, 3)), 0.1)))
    True

References:
    Caron et al., "Emerging Properties in Self-Supervised Vision Transformers" (DINO), ICCV 2021,
    https://arxiv.org/abs/2104.14294.
    Zhou et al., "iBOT: Image BERT Pre-Training with Online Tokenizer", ICLR 2022,
    https://arxiv.org/abs/2111.07832.
    Oquab et al., "DINOv2", TMLR 2024, https://arxiv.org/abs/2304.07193.
"""

from jaxpapers.codi._analysis import (
    ReadoutGradients,
    binned_error,
    cls_attention_mass,
    readout_gradients,
)
from jaxpapers.codi._distill import (
    codi_targets,
    distillation_loss,
    teacher_momentum,
    teacher_targets,
    teacher_temperature,
    update_center,
)
from jaxpapers.codi._pretrain import (
    PretrainResult,
    ProjectionHead,
    SSLConfig,
    SSLNet,
    SSLState,
    StepStats,
    augment,
    init_state,
    pretrain,
    random_masks,
    ssl_loss,
    ssl_optimizer,
    teacher_tokens,
    train_step,
)
from jaxpapers.codi._probe import ProbeResult, knn_classify, linear_probe
from jaxpapers.codi._textures import TEXTURES, TextureScenes, texture_scenes

__all__ = [
    "TEXTURES",
    "PretrainResult",
    "ProbeResult",
    "ProjectionHead",
    "ReadoutGradients",
    "SSLConfig",
    "SSLNet",
    "SSLState",
    "StepStats",
    "TextureScenes",
    "augment",
    "binned_error",
    "cls_attention_mass",
    "codi_targets",
    "distillation_loss",
    "init_state",
    "knn_classify",
    "linear_probe",
    "pretrain",
    "random_masks",
    "readout_gradients",
    "ssl_loss",
    "ssl_optimizer",
    "teacher_momentum",
    "teacher_targets",
    "teacher_temperature",
    "teacher_tokens",
    "texture_scenes",
    "train_step",
    "update_center",
]
