"""LQZO: low-rank quantized zeroth-order fine-tuning (P02, NeurIPS 2026).

Derivation (from the paper's abstract and its predecessors MeZO, LOZO and QZO; the paper text was
not available):

1. *Quantized ZO* (QZO, Shang et al. 2025). A weight is stored as codes ``q`` and per-group scales
   ``s``: ``W = s (q - z)`` (:func:`quantize`). Codes are discrete, so ZO fine-tuning perturbs only
   the continuous scales. With a direction ``Z`` of the scales' shape, the two-point (SPSA)
   estimate is ``g = (L(s + eps Z) - L(s - eps Z)) / (2 eps)`` and ``grad L ~ g Z``
   (``E[Z Z^T] = I`` makes it unbiased to first order). QZO draws ``Z ~ N(0, I)`` and clips
   ``g`` to ``[-C, C]`` (directional-derivative clipping) because quantized losses are jumpy.
2. *Low-rank perturbations* (LOZO, Chen et al. 2024). Fine-tuning gradients of a matrix
   parameter are close to low rank, so a rank-``r`` direction ``Z = U V^T / sqrt(r)`` puts the
   exploration where the gradient lives: ``E[<G, Z> Z] = G`` still holds for i.i.d. unit-variance
   factor entries, while only ``(m + n) r`` numbers are drawn. ``U`` is redrawn every step and
   ``V`` every ``nu`` steps, so consecutive steps explore one column space (a subspace method).
3. *Binary-Aggregated Gaussian* (BAG) entries. The estimator's second moment
   ``E||<G, Z> Z||^2`` involves fourth moments of ``Z``'s entries; for a product ``u v`` of two
   Gaussians it is 9, of two Rademachers 1. Using ``u = k^{-1/2} sum_{i<=k} sigma_i`` with
   Rademacher ``sigma_i`` keeps mean 0 and variance 1 (unbiasedness unchanged), bounds
   ``|u| <= sqrt(k)`` and lowers the fourth moment to ``3 - 2/k``, which tightens the variance
   bound; ``k`` signs come from one 32-bit counter hash by a popcount, at no extra cost
   (:mod:`jaxpapers_kernels.counter_hash`). ``k = 1`` is plain Rademacher.
4. *Isotropy-Enhanced Estimation*. A layer's scales are a flat ``[K/g, N]`` matrix (e.g. 6 x 384);
   a low-rank factorisation of such a matrix caps the rank at ``K/g`` and ties every direction to
   a handful of row patterns. LQZO factorises the near-square view (48 x 48) of the same entries
   instead (:func:`near_square_shape`), so ``U`` and ``V`` have equally many rows and the
   perturbations cover the scale entries more evenly ("more isotropic").

Memory: the two forward passes use ``s +- eps Z`` built from ``(m + n) r`` factor entries (or
inside the Pallas kernel, from the hash, without forming anything); weights are dequantized per
layer on the fly; no weight-sized perturbation exists.

Experiments (``jaxpapers reproduce P02``): :mod:`jaxpapers.lqzo.experiments`.
"""

from jaxpapers.lqzo._finetune import (
    FinetuneResult,
    merge_scaled,
    split_scales,
    zeros_like_tree,
    zo_finetune,
)
from jaxpapers.lqzo._isotropy import matrix_view_shape, near_square_shape
from jaxpapers.lqzo._perturbation import (
    LowRankDirection,
    ZOConfig,
    direction_tree,
    low_rank_direction,
    make_config,
    perturbation_tree,
)
from jaxpapers.lqzo._qlinear import QuantCodes, QuantizedLinear, QuantScale, quantize_linears
from jaxpapers.lqzo._quantize import QuantizedTensor, dequantize, quantize
from jaxpapers.lqzo._zo import (
    ZOEstimate,
    ZOState,
    estimate_to_gradient,
    lqzo,
    mezo,
    qzo,
    step_seeds,
    zo_estimate,
    zo_gradient,
    zo_state,
)

__all__ = [
    "FinetuneResult",
    "LowRankDirection",
    "QuantCodes",
    "QuantScale",
    "QuantizedLinear",
    "QuantizedTensor",
    "ZOConfig",
    "ZOEstimate",
    "ZOState",
    "dequantize",
    "direction_tree",
    "estimate_to_gradient",
    "low_rank_direction",
    "lqzo",
    "make_config",
    "matrix_view_shape",
    "merge_scaled",
    "mezo",
    "near_square_shape",
    "perturbation_tree",
    "quantize",
    "quantize_linears",
    "qzo",
    "split_scales",
    "step_seeds",
    "zeros_like_tree",
    "zo_estimate",
    "zo_finetune",
    "zo_gradient",
    "zo_state",
]
