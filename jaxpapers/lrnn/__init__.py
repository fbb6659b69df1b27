"""P13: higher-order (H-LRU) and block-diagonal (BD-LRU) linear recurrent units.

Dubinin, Orvieto, Effenberger, "Improved state mixing in higher-order and block diagonal linear
recurrent networks" (NeurIPS 2026; arXiv 2602.12021). Only the abstract is available; the method
below is derived from it and from its predecessors: the LRU (Orvieto et al., ICML 2023) and
state-tracking with negative eigenvalues (Grazzi et al., ICLR 2025).

Derivation
----------
**Diagonal LRU (baseline).** ``h_t = lambda * h_{t-1} + gamma * (B x_t)``,
``y_t = Re(C h_t) + D x_t`` with a complex diagonal ``lambda = exp(-exp(nu) + i exp(theta))``
that does not depend on the input. Each channel evolves alone and the transition is the same at
every step, so the state is a fixed linear filter of the inputs: it cannot track the parity of a
bit stream at arbitrary length (that needs an input-dependent transition with eigenvalue -1),
let alone a non-abelian group such as S_5 (non-commuting transitions: mixing across channels).

**H-LRU of order K** mixes the last ``K`` states of each channel with input-dependent
(selective) coefficients,

.. math:: h_t = \\sum_{k=1}^{K} a_{t,k} h_{t-k} + \\alpha_{t,0} v_t,
          \\qquad (a_{t,1..K}, \\alpha_{t,0}) = \\mathcal{N}(W_g x_t + b_g), \\quad v_t = W_v x_t.

Stacking ``s_t = (h_t, ..., h_{t-K+1})`` gives the first-order form ``s_t = M_t s_{t-1} + e_1
alpha_{t,0} v_t`` with the ``K x K`` companion block ``M_t`` (first row ``a_t``, then a shift), one
block per channel: a block-diagonal linear recurrence that a scan evaluates.

**BD-LRU with block size b** splits the ``N`` state channels into ``N / b`` groups and lets each
group mix densely: ``h_{t,g} = A_{t,g} h_{t-1,g} + alpha_{t,g} * v_{t,g}`` with the ``b x b``
block ``A_{t,g}`` and the input gate read from ``x_t``.

**Selective gate normalisation** (the abstract: "per-channel (H-LRU) / per-row (BD-LRU)
L1-normalisation of selective gates"). Let ``N(g) = g / max(1, ||g||_1)`` act on each row: for
H-LRU the row is ``(a_{t,1..K}, alpha_{t,0})`` of one channel, for BD-LRU one row of ``A_{t,g}``
together with its input gate. Then for every input

.. math:: |h_{t,i}| \\le \\sum_j |A_{t,ij}| \\, \\|h_{t-1}\\|_\\infty + |\\alpha_{t,i}| |v_{t,i}|
          \\le \\max(\\|h_{t-1}\\|_\\infty, \\|v_t\\|_\\infty),

(for H-LRU with ``||.||_inf`` over the window of the last ``K`` states), so by induction
``||h_t||_inf <= max(||h_0||_inf, max_s ||v_s||_inf)``: the state is bounded for any input
sequence, any length, any order ``K`` and any block size ``b``. In particular every transition
has induced infinity-norm, hence spectral radius, at most 1 (the companion rows below the first
are shifts of norm 1). The bound does not require ``|lambda| < 1`` to be learned: unlike an
unnormalised selective gate, no input can make the state explode, which is what lets ``K`` and
``b`` grow (tests check it at ``T = 10^4`` with adversarial gates, and show unnormalised gates
overflowing). The transitions that remain allowed include the ones state tracking needs:
``a = (-1, 0, ...)`` (eigenvalue -1: parity), signed permutation matrices (``b >= 5``: Z_5 and
S_5); excluded are undamped rotations by angles other than multiples of 90 degrees (a 2-D
rotation ``R`` has row norm ``|cos| + |sin| > 1``), so Z_5 needs a 5-cycle permutation and
blocks ``b >= 5``. Rows whose norm is below 1 pass unchanged, so a unit can still forget.

**Parallel scans.** ``h_t = A_t h_{t-1} + b_t`` is the composition of affine maps; the operator
``(A_i, b_i) . (A_j, b_j) = (A_j A_i, A_j b_i + b_j)`` (``i`` earlier) is associative, so
``lax.associative_scan`` evaluates it in ``O(log T)`` depth. With time-varying ``A_t`` it is not
commutative: the later transition multiplies on the left. Block products cost ``O(b^3)`` per block
(``O(K^3)`` for the companion blocks), the sequential scan ``O(b^2)`` (``O(K)`` for H-LRU, which
carries the window), which is why the throughput stays within a small factor of the diagonal LRU
for moderate ``K`` and ``b`` (``benchmarks/lrnn.py``). ``mode="chunked"`` scans sequentially over
chunks and in parallel within a chunk, rematerialising the chunk in the backward pass.

Public API
----------
Scans (pure, jit/vmap/grad-able): :func:`diagonal_scan`, :func:`block_scan`,
:func:`companion_scan`, :func:`companion_matrices`. Recurrences from gates (pure):
:func:`l1_normalise`, :func:`lru_lambda`, :func:`lru_recurrence`, :func:`hlru_recurrence`,
:func:`bdlru_recurrence`. flax.nnx layers and models: :class:`LRU`, :class:`HLRU`,
:class:`BDLRU`, :class:`ResidualBlock`, :class:`SequenceModel`, :func:`make_mixer` (parameter
counts: :func:`jaxpapers.core.pytrees.count_params`). Training one model per seed in one
compiled step (parameters stacked on a leading seed axis): :class:`ModelConfig`,
:class:`SeedModels`, :func:`init_models`, :func:`seed_logits`, :func:`fit`, :func:`masked_xent`,
:func:`masked_accuracy`. Data: :func:`make_batch`, :func:`task_spec`, :data:`TASKS`,
:class:`TaskBatch`, :class:`TaskSpec`, :func:`evaluate_expression`, :func:`load_corpus`,
:class:`Corpus`, :data:`VOCAB`.
"""

from jaxpapers.lrnn._corpus import VOCAB, Corpus, load_corpus
from jaxpapers.lrnn._fit import (
    ModelConfig,
    SeedModels,
    fit,
    init_models,
    masked_accuracy,
    masked_xent,
    seed_logits,
)
from jaxpapers.lrnn._layers import BDLRU, HLRU, LRU
from jaxpapers.lrnn._models import ResidualBlock, SequenceModel, make_mixer
from jaxpapers.lrnn._recurrences import (
    bdlru_recurrence,
    hlru_recurrence,
    l1_normalise,
    lru_lambda,
    lru_recurrence,
)
from jaxpapers.lrnn._scan import block_scan, companion_matrices, companion_scan, diagonal_scan
from jaxpapers.lrnn._tasks import (
    TASKS,
    TaskBatch,
    TaskSpec,
    evaluate_expression,
    make_batch,
    task_spec,
)

__all__ = [
    "BDLRU",
    "HLRU",
    "LRU",
    "TASKS",
    "VOCAB",
    "Corpus",
    "ModelConfig",
    "ResidualBlock",
    "SeedModels",
    "SequenceModel",
    "TaskBatch",
    "TaskSpec",
    "bdlru_recurrence",
    "block_scan",
    "companion_matrices",
    "companion_scan",
    "diagonal_scan",
    "evaluate_expression",
    "fit",
    "hlru_recurrence",
    "init_models",
    "l1_normalise",
    "load_corpus",
    "lru_lambda",
    "lru_recurrence",
    "make_batch",
    "make_mixer",
    "masked_accuracy",
    "masked_xent",
    "seed_logits",
    "task_spec",
]
