r"""P12: RO-PMB, a relationally optimised prototype memory bank for weakly supervised segmentation.

Weakly supervised semantic segmentation (WSSS) trains a segmenter from image-level labels: a
classifier's class activation maps (CAMs) are turned into pixel pseudo-masks. CAMs are incomplete
(they light up the most discriminative part of an object) and blurry at boundaries. Only the
abstract of RO-PMB is available; what follows derives the method from it and from its
predecessors (CAM; SIPE's image-specific self-prototypes; prototype memory banks; the label and
affinity losses of SEC, PSA/IRN and regularised losses).

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
ones (classes that co-occur, background near an object) (:class:`PRDC`).

**Context-aware refinement.** Each local prototype attends over its class's ``K`` enriched
global prototypes and is mixed with the attended one,
:math:`r_c = \mathrm{normalise}((1 - \alpha)\hat l_c + \alpha \hat g_c)`; refined CAMs are
:math:`\cos(A_{ij}, r_c)`; the pseudo-mask is the arg-max over the background score and the
labelled classes (:func:`pseudo_masks`). The plain-CAM baseline uses a constant background score.

**What the graph is trained on (derived).** The abstract says the graph *learns* the relations
among all prototypes and that the point is CAMs that are more complete and have precise
boundaries; it does not give the loss (here the CNN stays frozen while the graph trains). A
loss on the seed pixels (cross-entropy of the refined maps against the CAM seeds) would teach
the graph to reproduce the seeds, errors included, so it could never make a mask better than
its seeds. The supervision WSSS has is the
image labels and the image itself, and its predecessors use exactly these two without seeds as
targets: SEC's expansion loss (labels through a ranked pooling of the class maps) and the
CRF/affinity terms of SEC, PSA/IRN and regularised losses (labels change where the image
changes). :func:`prdc_loss` is their sum on the refined maps :math:`P_{ijn} =
\mathrm{softmax}_n(\cos(A_{ij}, r_n)/\tau)` over all ``C + 1`` refined prototypes (absent classes
get the global part alone):

* *label consistency*: the evidence of class ``n`` is the mean of its largest ``hw/32`` pixel
  probabilities (:func:`label_evidence`), pushed by binary cross-entropy to the image label (the
  background always present). An absent class's enriched prototype that claims pixels, e.g.
  because background seeds contaminated its bank slots, is penalised in every image without
  that class, which is what lets learned relations correct wrong seeds; a labelled class must
  claim some pixels;
* *affinity consistency*: :math:`\sum w_{ij} |P_i - P_j|^2` over 4-neighbours, with colour
  affinities :math:`w_{ij} = \exp(-|I_i - I_j|^2 / 2\sigma^2)` of the image pooled to the
  feature grid (:func:`colour_affinity`): the maps change class where the colour changes.

The seeds enter only where every prototype method takes them: the local prototypes and the bank.

**The pipeline** (multi-stage WSSS, as in the benchmarks the abstract names): classifier -> CAM
seeds -> bank and PRDC (training split) -> refined pseudo-masks of the training images -> a
segmenter trained on them -> the segmenter's mIoU on held-out images, which sees the image alone.
CAM, SIPE and the bank without GNN go through the same segmenter training; every method's one
knob, an offset on its background score, is tuned on the same grid on a validation split.

**What is measured** (``jaxpapers reproduce P12``) on 32x32 scenes with two to four shape classes
per image drawn from overlapping co-occurrence groups (``jaxpapers.ropmb._multilabel``):
``segmenter_miou`` (headline), ``pseudo_mask_miou`` and ``boundary_f1`` (tolerance 0) of the
pseudo-masks against CAM; ``segmenter_miou_gnn`` and ``pseudo_mask_miou_gnn`` against the bank
without GNN (the graph's own contribution; PRDC's steps and smoothness weight and the bank's
mixing weight each chosen on equal-size validation grids; the graph at initialisation is a
further row); and the sanity check ``one_hot_features`` (one-hot features; the graph starts
from weights that mix the classes and must learn, with its own objective, to give the exact
mask; best of three initialisations by final objective). The comparisons require
``seeds_informative`` (per-label accuracy above 0.9, foreground seed precision above 0.5):
prototypes pooled under wrong seeds cannot show anything about the refinement. The vs-CAM
claims also require ``prototype_ceiling``: prototypes pooled under the true masks must beat
CAM on the validation split, or no prototype method could, whatever its graph learns.

**What quick size cannot show.** The quick classifier (a 3x3 stem at stride 2 and two 1x1
layers, 500 Adam steps on 512 images) has small receptive fields, so its CAMs are local and
precise, and colour identifies the class in these scenes: the CAMs leave the refinement little
to complete, and scenes where CAMs are incomplete (large textured objects, deep classifiers
with wide receptive fields) are out of reach at this budget. The segmenter (a 3x3 stem and a
1x1 layer, 200 steps) is small too (its mIoU when trained on the true masks is in
NOTES.md). ``--full`` trains wider networks 8-15x longer on 16x more images. What held at
each size is in ``results/P12`` (``NOTES.md`` keeps the history of the quick numbers).

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
    Kolesnikov and Lampert, "Seed, Expand and Constrain: Three Principles for Weakly-Supervised
    Image Segmentation" (SEC), ECCV 2016, https://arxiv.org/abs/1603.06098.
    Ahn and Kwak, "Learning Pixel-level Semantic Affinity with Image-level Supervision for
    Weakly Supervised Semantic Segmentation" (PSA), CVPR 2018, https://arxiv.org/abs/1803.10464.
    Tang et al., "On Regularized Losses for Weakly-supervised CNN Segmentation", ECCV 2018,
    https://arxiv.org/abs/1803.09569.
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
    colour_affinity,
    label_evidence,
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
    "colour_affinity",
    "label_evidence",
    "labels_from_sets",
    "masked_average_pool",
    "prdc_loss",
    "prototype_scores",
    "pseudo_masks",
    "refine_prototypes",
    "refined_scores",
    "seed_masks",
]
