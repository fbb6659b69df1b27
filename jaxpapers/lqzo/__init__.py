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

Memory and the kernel path: LQZO's two forward passes receive lazy :class:`PerturbedScales` (the
scales, the per-leaf seeds, ``+-eps`` and the low-rank spec) instead of ``s +- eps Z``. A
:class:`QuantizedLinear` with ``use_kernel="auto"`` hands them to the Pallas kernel
:func:`jaxpapers_kernels.perturbed_quant_matmul` on GPU/TPU, which dequantizes the packed codes
tile by tile, regenerates ``U V^T`` from the counter hash inside the tile and multiplies: neither
the perturbation nor a float weight exists in memory. On CPU the same description goes through
the jnp reference (the layer's perturbed scales and float weight formed per layer and freed);
both paths give the same losses for the same seeds. Only the update ``g Z`` forms a scale-sized
tensor. The MeZO baseline follows MeZO's Algorithm 1: ``z`` regenerated tensor by tensor from the
step seed in each pass and in the update, never one vector for the whole model. Its Gaussian
entries come from the counter hash (``sqrt(2) erfinv`` of 24 hash bits of the position and the
leaf seed), not from ``jax.random``: elementwise, so XLA fuses them into their consumers, whereas
threefry lowers on XLA:CPU to a loop over whole-tensor counter arrays. On float MiniLM (batch
8 x 32) that took the step's compiled peak from 360 MiB to 256 MiB, against 348 MiB for MeZO's
Algorithm 1 written plainly with ``jax.random`` (``benchmarks/lqzo.py``), and made the step 1.9x
faster than that plain version. ``share_direction=True`` (:func:`mezo`, :func:`qzo`,
:func:`make_config`) trades that memory for speed: each leaf's ``z`` (same distribution, same
values) is formed once per step behind ``jax.lax.optimization_barrier`` and read by both passes
and the update, so it is generated once instead of three times and XLA does not fuse a copy of
the generator into every consumer (the P02 experiments' small models use it).

Experiments (``jaxpapers reproduce P02``): :mod:`jaxpapers.lqzo.experiments`.

Examples:
    >>> import jax, jax.numpy as jnp, optax
    >>> from jaxpapers.lqzo import lqzo
    >>> target = jnp.ones((8, 8))
    >>> loss = lambda p: jnp.sum((p["s"] - target) ** 2)
    >>> opt = lqzo(5e-3, key=jax.random.key(0), rank=2, eps=1e-3)
    >>> @jax.jit
    ... def step(params, state):
    ...     updates, state = opt.update(None, state, params, value_fn=loss)
    ...     return optax.apply_updates(params, updates), state
    >>> params = {"s": jnp.zeros((8, 8))}
    >>> state = opt.init(params)
    >>> for _ in range(300):
    ...     params, state = step(params, state)
    >>> bool(loss(params) < 0.5 * 64.0)
    True

References:
    Malladi et al. 2023, Fine-Tuning Language Models with Just Forward Passes (MeZO),
    https://arxiv.org/abs/2305.17333.
    Chen et al. 2024, Enhancing Zeroth-order Fine-tuning for Language Models with Low-rank
    Structures (LOZO), https://arxiv.org/abs/2410.07698.
    Shang et al. 2025, Fine-tuning Quantized Neural Networks with Zeroth-order Optimization
    (QZO), https://arxiv.org/abs/2505.13430.
"""

from jaxpapers.lqzo._finetune import FinetuneResult, merge_scaled, split_scales, zo_finetune
from jaxpapers.lqzo._isotropy import matrix_view_shape, near_square_shape
from jaxpapers.lqzo._perturbation import (
    LowRankDirection,
    ZOConfig,
    direction_tree,
    low_rank_direction,
    make_config,
    perturbation_tree,
    shared_directions,
)
from jaxpapers.lqzo._perturbed_scales import PerturbedScales, materialize
from jaxpapers.lqzo._qlinear import QuantCodes, QuantizedLinear, QuantScale, quantize_linears
from jaxpapers.lqzo._quantize import QuantizedTensor, dequantize, quantize
from jaxpapers.lqzo._zo import (
    ZOEstimate,
    ZOState,
    estimate_to_gradient,
    lqzo,
    mezo,
    qzo,
    zo_estimate,
    zo_gradient,
    zo_state,
)

__all__ = [
    "FinetuneResult",
    "LowRankDirection",
    "PerturbedScales",
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
    "materialize",
    "matrix_view_shape",
    "merge_scaled",
    "mezo",
    "near_square_shape",
    "perturbation_tree",
    "quantize",
    "quantize_linears",
    "qzo",
    "shared_directions",
    "split_scales",
    "zo_estimate",
    "zo_finetune",
    "zo_gradient",
    "zo_state",
]
