r"""P09: ContrastiveCAMs and Context-Regularized Cross-Entropy (CR-CE) for context shift.

A CNN that reads a label off its context (water behind a waterbird) fails when the context changes.
The paper trains the network to rely less on context regions, through a spatial attribution map
that has to be faithful to the prediction; it shows a limitation of class activation maps and
proposes ContrastiveCAMs, then CR-CE. Only the abstract is available; what follows is derived from
it and from the predecessors (CAM, Grad-CAM, "right for the right reasons" penalties).

**The limitation.** For a CNN whose head is global average pooling and a linear layer,
:math:`y_c = \frac{1}{hw}\sum_{ij} \sum_k W_{kc} A_{ijk} + b_c`, so

.. math::  \mathrm{CAM}_c = \sum_k W_{kc} A_k, \qquad
           \frac{\partial y_c}{\partial A_{ijk}} = \frac{W_{kc}}{hw}
           \;\Rightarrow\; \text{Grad-CAM}_c = \frac{\mathrm{CAM}_c}{hw}

(before Grad-CAM's ReLU): Grad-CAM is CAM up to a constant and both explain the *logit*. The
prediction, :math:`p = \mathrm{softmax}(y)`, is invariant to adding one function to every logit,
so the part of :math:`W_{:c}` common to all classes (e.g. the mean
:math:`\bar w = \frac{1}{C}\sum_c W_{:c}`) changes the map and not the prediction: CAM and Grad-CAM
carry evidence shared by all classes (for instance "there is an object" or "there is texture")
that does not favour class :math:`c`; a regulariser built on them spends its effort on it.

**ContrastiveCAM.** Explain the class *against the others*: the score
:math:`S_c = y_c - \sum_{c'\neq c} q_{c'} y_{c'}` with :math:`q` the softmax over the other classes
(held fixed), whose gradient is :math:`\partial \log p_c / (1 - p_c)`. Its Grad-CAM form is

.. math::  \mathrm{CCAM}_c = \sum_k \Big(W_{kc} - \sum_{c'\neq c} q_{c'} W_{kc'}\Big) A_k / hw,

which sums over cells to the logit margin :math:`S_c` (minus the bias margin), drops every
component shared by all classes, and is antisymmetric for two classes
(:math:`\mathrm{CCAM}_0 = -\mathrm{CCAM}_1`). For a non-linear head the same definition uses the
gradient (:func:`contrastive_cam` takes any ``head``).

**CR-CE.** "Cross-entropy plus a penalty on the ContrastiveCAM mass falling on context regions".
With :math:`r_{ij}\in[0,1]` the context fraction of cell :math:`(i, j)`, the mass on context is
measured in logit units, signed, and penalised quadratically:

.. math::  C = \sum_{ij} \mathrm{CCAM}_c[i, j]\, r_{ij}, \qquad
           L = \mathrm{CE}(y, c) + \beta\, C^2 .

Since the ContrastiveCAM sums over cells to the logit margin :math:`S_c` (minus the bias margin),
:math:`C` is the part of the margin that the map assigns to context: a model whose decision
does not move with the background has :math:`C \approx 0`; a shortcut has :math:`C` of the size
of the margin. :math:`r` is known from object masks, or estimated from the map itself (cells below
the mean magnitude, held fixed). The Grad-CAM-regularised baseline uses the same penalty with
Grad-CAM.

*Why this form.* The first implementation penalised the context *share*
:math:`\sum |\mathrm{CCAM}| r / \sum |\mathrm{CCAM}|`. It is scale-free, so it cannot be lowered
by a less confident context-free model; the only way below it is a vanishing map
(:math:`0 / (0 + \epsilon) = 0`), i.e. equal class weights and a constant predictor at CE
:math:`\ln 2`. A model that reads the object still puts part of its map on context cells
(receptive fields overlap the object; ~0.6-0.75 for the CE models without any shortcut), so with
:math:`\beta \cdot \mathrm{share} > \ln 2 - \mathrm{CE}` the constant predictor has the lowest
loss: measured, CR-CE collapsed on 6/6 seeds at :math:`\beta = 1`, even in the sanity set whose
background carries no information. Writing :math:`C = \lambda\,m` for a map of margin :math:`m`
of which the fraction :math:`\lambda` lies on context, the penalty :math:`\beta|C|` has slope
:math:`\beta\lambda` in :math:`m` at :math:`m = 0` against CE's :math:`-1/2`: it collapses as soon
as :math:`\beta\lambda > 1/2` (measured: collapse at :math:`\beta = 1, 3`). The square has slope 0
at the vanishing map, so for every :math:`\beta` reading the object lowers the loss
(a unit test checks this against the closed form, and that the share form prefers the constant
predictor), while a shortcut, whose :math:`C` is its whole margin, pays :math:`\beta m^2`.
Every method's :math:`\beta` is chosen in the run by worst-group accuracy on a balanced
validation set (:mod:`jaxpapers.crce.experiments`). In the earlier fixed-beta exploration (its
table is in ``results/P09/NOTES.md``) the absolute form did best at :math:`\beta = 0.3`, inside its
no-collapse window :math:`\beta\lambda < 1/2`, and collapsed above it; the square was kept because
it has no such window to find. The estimated context (cells below the mean magnitude) cannot find
a shortcut's context: the shortcut's evidence *is* the strong part of the map, so the weak cells
it penalises are mostly the object's.

**What is measured** (``jaxpapers reproduce P09``): ``faithfulness`` (deletion / insertion AUC
and mask agreement of ContrastiveCAM, Grad-CAM and CAM on three-class CE models, where
ContrastiveCAM's softmax-weighted subtraction of the other classes lets it order an image's cells
unlike CAM; Grad-CAM is CAM / hw for this head); on Waterbirds-like scenes from
:mod:`jaxpapers.core.data.scenes` (two shape classes; 95% of training images show class 0 on
stripes and class 1 on smooth noise; balanced and reversed backgrounds at test; groups = class x
background; class 1 is a ring): ``context_shift`` (worst-group accuracy of CE, Grad-CAM-regularised
CE, CR-CE with known and, at full size only, with estimated context),
``context_shift_baselines`` (CR-CE against GroupDRO on group-balanced minibatches, group-balanced
CE and background randomisation, the tuned ones on the same validation set and grid size, on a
tuning seed that is not judged), and the sanity check ``no_context_information`` (backgrounds
independent of the label: CR-CE must match CE). The measured numbers and verdicts are in
``results/P09`` (``result.json`` and ``NOTES.md``).

Examples:
    >>> import jax, jax.numpy as jnp
    >>> from flax import nnx
    >>> from jaxpapers.core.nn.cnn import CNNConfig, ConvNet
    >>> from jaxpapers.crce import contrastive_cam, grad_cam
    >>> net = ConvNet(CNNConfig(widths=(4, 8), classes=3), rngs=nnx.Rngs(0))
    >>> out = net.forward(jnp.ones((2, 16, 16, 3)))
    >>> cls = jnp.argmax(out.logits, -1)
    >>> contrastive_cam(net.classify, out.features, cls).shape
    (2, 8, 8)

References:
    Zhou et al., "Learning Deep Features for Discriminative Localization" (CAM), CVPR 2016,
    https://arxiv.org/abs/1512.04150.
    Selvaraju et al., "Grad-CAM", ICCV 2017, https://arxiv.org/abs/1610.02391.
    Petsiuk et al., "RISE" (deletion / insertion), BMVC 2018, https://arxiv.org/abs/1806.07421.
    Ross et al., "Right for the Right Reasons", IJCAI 2017, https://arxiv.org/abs/1703.03717.
    Sagawa et al., "Distributionally Robust Neural Networks" (Waterbirds, worst-group accuracy,
    GroupDRO), ICLR 2020, https://arxiv.org/abs/1911.08731.
    Xiao et al., "Noise or Signal: The Role of Image Backgrounds in Object Recognition"
    (ImageNet-9 backgrounds, mixed-rand), ICLR 2021, https://arxiv.org/abs/2006.09994.
"""

from jaxpapers.crce._cams import class_activation_map, contrastive_cam, contrastive_score, grad_cam
from jaxpapers.crce._crce import (
    CRCE,
    CRCELoss,
    context_evidence,
    context_share,
    cr_ce_loss,
    estimated_context,
)
from jaxpapers.crce._faithfulness import (
    FaithfulnessCurves,
    cell_fractions,
    deletion_insertion,
    mask_agreement,
    pointing_game,
)

__all__ = [
    "CRCE",
    "CRCELoss",
    "FaithfulnessCurves",
    "cell_fractions",
    "class_activation_map",
    "context_evidence",
    "context_share",
    "contrastive_cam",
    "contrastive_score",
    "cr_ce_loss",
    "deletion_insertion",
    "estimated_context",
    "grad_cam",
    "mask_agreement",
    "pointing_game",
]
