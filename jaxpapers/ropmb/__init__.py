r"""P12: RO-PMB, a relationally optimised prototype memory bank for weakly supervised segmentation.

Weakly supervised semantic segmentation (WSSS) trains a segmenter from image-level labels: a
classifier's class activation maps (CAMs) are turned into pixel pseudo-masks. CAMs are incomplete
(they light up the most discriminative part of an object) and blurry at boundaries. Only the
abstract of RO-PMB is available; what follows derives the method from it and from its
predecessors (CAM; SIPE's image-specific self-prototypes; prototype memory banks).

**CAMs and seeds.** For a classifier with global average pooling and a linear head,
:math:`y_c = \frac{1}{hw}\sum_{ij} A_{ij}^\top W_{:c} + b_c`, the CAM of a labelled class is
:math:`\mathrm{CAM}_c = \mathrm{relu}(A W_{:c}) / \max_{ij}(\cdot)`. Confident pixels
(:math:`\mathrm{CAM}_c \ge \theta_{fg}` and ``c`` the top labelled class) seed class ``c``; pixels
where every labelled CAM is below :math:`\theta_{bg}` seed the background
(:func:`seed_masks`).

**Self-prototypes (SIPE).** Masked average pooling of the image's features under its seeds gives
one prototype per labelled class and one for the background, :math:`l_c = \sum_{ij} s_{ijc}
A_{ij} / \sum_{ij} s_{ijc}`; the image-specific CAM is :math:`\cos(A_{ij}, l_c)`. Because the
prototype averages the whole seed, pixels of the same object outside the discriminative peak
that share its features light up too: CAMs become more complete.

**Global memory bank.** Self-prototypes see one image; a bank of ``K`` prototypes per class
(background included) pooled over the training set covers intra-class variation (objects of
other colours, other parts). It is updated by ``p <- m p + (1 - m) p_new`` with ``p_new`` the
masked average of the seed pixels assigned to ``p`` (:class:`MemoryBank`; the state is a
NamedTuple pytree, the error to a stationary target decays as :math:`m^t`).

**PRDC.** The abstract's "prototype relationship diagram": a learned graph over all
:math:`(C + 1) K` prototypes, edge weights from an attention over learned projections of the
prototypes, and residual GNN message passing that enriches each global prototype with related
ones (classes that co-occur, background near an object). The graph is trained, with the CNN
frozen, by the seed cross-entropy of :func:`prdc_loss` over all classes, so enriched prototypes
of absent classes must not explain an image's seeds (:class:`PRDC`).

**Context-aware refinement.** Each local prototype attends over its class's ``K`` enriched
global prototypes and is mixed with the attended one,
:math:`r_c = \mathrm{normalise}((1 - \alpha)\hat l_c + \alpha \hat g_c)`; refined CAMs are
:math:`\cos(A_{ij}, r_c)`; the pseudo-mask is the arg-max over the background score and the
labelled classes (:func:`pseudo_masks`). The plain-CAM baseline uses a constant background score.

**What is measured** (``jaxpapers reproduce P12``) on 32x32 scenes with two to four shape classes
per image drawn from overlapping co-occurrence groups (``jaxpapers.ropmb._multilabel``):
``pseudo_mask_miou`` (CAM, SIPE, bank without GNN, RO-PMB; seeds vmapped), ``boundary_f1`` and the
sanity check ``one_hot_features`` (features one-hot per region and a PRDC trained on the
resulting exact seeds: every prototype method recovers the mask exactly). Both comparisons
require ``seeds_informative`` (per-label accuracy above 0.9, foreground seed precision above
0.5): prototypes pooled under wrong seeds cannot show anything about the refinement.

**Reading the results.** Every prototype method pools features under the classifier's CAM seeds,
so the comparisons say something about the refinement only when the seeds mostly mark the right
class: ``seeds_informative`` is their precondition. With a weak classifier (the quick size's one
residual stage) the CAM of a labelled class can cover much of a textured background (the
classifier reads context), the background seeds and the class's prototypes are swapped, and the
bank and the GNN average such errors instead of correcting them; the example masks of
``pseudo_mask_miou.png`` show it. ``--full`` trains a two-stage CNN at full feature resolution 20x
longer on 16x more images. What held at each size is in ``results/P12`` (``NOTES.md`` keeps the
history of the quick numbers).

Examples:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers.ropmb import RefineConfig, pseudo_masks, refined_scores
    >>> feats = jax.nn.one_hot(jnp.array([[[0, 1], [2, 0]]]), 3)  # [1, 2, 2, 3]: bg, class 0, 1
    >>> w = jnp.eye(3)[:, 1:]  # feature 1 -> class 0, feature 2 -> class 1
    >>> labels = jnp.ones((1, 2))
    >>> s = refined_scores("sipe", feats, w, labels, config=RefineConfig())
    >>> pseudo_masks(s, labels, 2)[0]
    Array([[0, 1],
           [2, 0]], dtype=int32)

References:
    Zhou et al., "Learning Deep Features for Discriminative Localization" (CAM), CVPR 2016,
    https://arxiv.org/abs/1512.04150.
    Chen et al., "Self-supervised Image-specific Prototype Exploration for Weakly Supervised
    Semantic Segmentation" (SIPE), CVPR 2022, https://arxiv.org/abs/2203.02909.
    Zhou et al., "Regional Semantic Contrast and Aggregation for Weakly Supervised Semantic
    Segmentation" (memory bank of class prototypes), CVPR 2022, https://arxiv.org/abs/2203.09653.
    Kipf and Welling, "Semi-Supervised Classification with Graph Convolutional Networks",
    ICLR 2017, https://arxiv.org/abs/1609.02907.
"""

from jaxpapers.ropmb._bank import BankState, MemoryBank
from jaxpapers.ropmb._prdc import (
    METHODS,
    PRDC,
    Method,
    prdc_loss,
    prototype_scores,
    pseudo_masks,
    refine_prototypes,
    refined_scores,
)
from jaxpapers.ropmb._seeds import (
    Prototypes,
    RefineConfig,
    class_activation_maps,
    labels_from_sets,
    masked_average_pool,
    seed_masks,
)

__all__ = [
    "METHODS",
    "PRDC",
    "BankState",
    "MemoryBank",
    "Method",
    "Prototypes",
    "RefineConfig",
    "class_activation_maps",
    "labels_from_sets",
    "masked_average_pool",
    "prdc_loss",
    "prototype_scores",
    "pseudo_masks",
    "refine_prototypes",
    "refined_scores",
    "seed_masks",
]
