r"""Cayley-Encoder: a GNN over a frozen language model's layers on a Cayley graph of SL(2, Z_n).

Derivation (from the abstract and its predecessors). A frozen encoder with ``L`` layers gives, for
a text, per-layer token states; mean pooling over tokens gives :math:`x_l \in \mathbb{R}^D`,
:math:`l = 0 .. L-1` (for all-MiniLM-L6-v2, ``L = 7``: the embeddings and six layers). The usual
predictor reads only :math:`x_{L-1}`. The paper instead treats the layers as the nodes of a graph
and runs a light GNN on it (:class:`LayerGNN`):

.. math::
    h_v^{(0)} = P x_v + e_v, \qquad
    h_v^{(r+1)} = h_v^{(r)} + \mathrm{gelu}\Big(W_u^{(r)} h_v^{(r)} +
        W_m^{(r)} \operatorname{agg}_{u \in N(v)} h_u^{(r)}\Big), \qquad
    \hat y = W_o \tfrac{1}{L} \textstyle\sum_{l < L} h_l^{(R)},

with one projection ``P`` shared by all layers (so the added parameters are ``O(D h + h^2)``, far
below 0.1% of the LM) and a learned node embedding ``e_v``. On the fully connected layer graph
this is the paper's first finding; the Cayley-Encoder replaces the graph with the Cayley graph of
:math:`SL(2, \mathbb{Z}_n)` for generators :math:`[[1,1],[0,1]]`, :math:`[[1,0],[1,1]]` and their
inverses (:func:`sl2_cayley_graph`): 4-regular, sparse, an expander family with logarithmic
diameter (Expander / Cayley Graph Propagation). The smallest ``n`` with
:math:`|SL(2, \mathbb{Z}_n)| = n^3 \prod_{p | n}(1 - p^{-2}) \ge L` is used; layers sit on the
first ``L`` nodes in BFS order and the rest are virtual nodes with learned or zero features, or
the graph is truncated to the subgraph induced by the first ``L`` nodes (:func:`layer_graph`).

Baselines (:mod:`._probes`): last-layer probe, best single layer chosen on validation, mean over
layers, attention-weighted inter-layer aggregation, and the same GNN on the fully connected graph.
The probes are linear while the GNN heads are not, so a GNN beating the best single layer could
be nonlinearity, not aggregation. The experiments therefore also train the GNN on a *one-node*
graph fed a single layer: no edges, so each round is :math:`h \leftarrow h + \mathrm{gelu}(W_u h)`
from :math:`h = P x_l + e`, the same width, rounds, read-out, initialiser and training as the
Cayley head, on one layer (a residual MLP); one per layer, the layer chosen per cell on validation
accuracy like the linear best single layer. The Cayley-Encoder against it isolates what the
aggregation over layers adds.

Which layers contribute (:func:`layer_shapley`): exact Shapley values of the layers for the
trained head's held-out accuracy, a coalition's value being the accuracy with the other layers
at their mean (derivation in :mod:`._fit`). They add up to the head's gain over the all-mean
input, and credit layers that hold the same information jointly, which occluding one layer at a
time (:func:`layer_attribution`) or leaving one out and retraining cannot: both measure only
what no other layer can make up for, so among redundant layers every one of them looks useless.

What is measured here (``jaxpapers reproduce P03``): the real all-MiniLM-L6-v2 (frozen) on word
and phrase valence tasks from the VADER and AFINN lexicons (no sentence-level labelled corpus
ships in a package), in a few-shot regime (16 / 64 / 256 labelled examples); accuracy of every
head, the added-parameter fraction, the layers' Shapley values (with a synthetic sanity check
whose answer is known: one layer carrying the signal must rank first, two copies of it must
both get a share), a synthetic check whose Bayes accuracy is known in closed form, and LoRA
fine-tuning of MiniLM on the same training texts (``vs_lora``: rank-8 adapters on the attention
query and value projections of the top layers, plus a linear head on the mean-pooled last layer;
B = 0 at the start; :mod:`jaxpapers.cayley.experiments`). Measured numbers are in
``results/P03`` (``result.json`` and ``NOTES.md``).

With only 7 layers the complete graph has 42 directed edges against the Cayley graph's 96 over 24
nodes, so neither sparsity nor overfitting is expected to separate them on MiniLM; the paper's
gain is expected for deep LMs (24-80 layers), where a complete graph's edges grow quadratically.
None ships offline beyond MiniLM, so ``deep_topology`` uses a synthetic bed of 24 layers, where
:math:`SL(2, \mathbb{Z}_3)` has exactly 24 elements, whose label needs two layers half the stack
apart to interact (``1[c_a c_b > 0]`` for the latents of layers ``a`` and ``a + 12``, the other
layers noise): the Cayley graph (96 edges, diameter 4, no virtual nodes), the complete graph (552),
a ring of the same degree (96 edges; the pair at its diameter, 6 hops, beyond two rounds' reach)
and no edges, as one head with a traced adjacency (same nodes, parameters, initial weights and
steps), learning rates tuned on validation; the derivation of why the bed can show the topology
either way is in ``experiments._run.deep_topology``.

LoRA (``vs_lora``) is tuned, and so is the Cayley head it is compared with: LoRA's learning rate
and number of adapted top layers, the head's learning rate (same rates), each chosen by mean
validation accuracy over the cells of the tuning seeds, both trained for the heads' step budget
(quick: VADER task only, 16 examples, rates 1e-3 / 3e-3 / 1e-2, top 1 or 2 layers, the grid on
the first seed's cells; ``--full``: both tasks, 16/64/256 examples, top 1, 3 or 6 layers, the
grid on every seed). Each layer adapted costs a transformer layer's forward and backward per
step that no cache can spare (only the frozen layers below the lowest adapter are computed
once), which is why quick adapts at most two. The abstract's verb is "outperforms", so
``vs_lora`` is a strict paired test, judged once ``lora_baseline`` holds (LoRA above the frozen
last-layer probe it starts from). The Cayley head leaves MiniLM untouched and could share one
encoder pass across tasks.

Examples:
    >>> import jax, jax.numpy as jnp
    >>> from jaxpapers.cayley import LayerGNN, apply_head, fit_head, layer_graph
    >>> from jaxpapers.core.metrics import accuracy
    >>> x = jax.random.normal(jax.random.key(0), (32, 7, 8))
    >>> y = (x[:, 3, 0] > 0).astype(jnp.int32)
    >>> head = LayerGNN(layer_graph(7), 8, 2, key=jax.random.key(1), hidden=8)
    >>> fit = fit_head(head, x, y, steps=200, learning_rate=1e-2)
    >>> bool(accuracy(apply_head(fit.head, x), y) > 0.9)
    True

References:
    Cayley-Encoder (NeurIPS 2026), the paper this package implements.
    Deac, Lackenby & Veličković 2022, "Expander Graph Propagation", arXiv:2210.02997.
    Wilson, Bechler-Speicher & Veličković 2024, "Cayley Graph Propagation", arXiv:2410.03424.
    Reimers & Gurevych 2019, "Sentence-BERT", arXiv:1908.10084 (all-MiniLM-L6-v2's pooling).
"""

from jaxpapers.cayley._encoder import LayerGNN, message_passing
from jaxpapers.cayley._features import encode_layers
from jaxpapers.cayley._fit import (
    FitResult,
    LayerShapley,
    apply_head,
    coalition_accuracy,
    fit_head,
    layer_attribution,
    layer_shapley,
    shapley_values,
)
from jaxpapers.cayley._graph import (
    CayleyGraph,
    LayerGraph,
    cayley_modulus,
    layer_graph,
    sl2_cayley_graph,
    sl2_order,
)
from jaxpapers.cayley._probes import (
    AttentionPooling,
    LayerProbe,
    ridge_probe,
)

__all__ = [
    "AttentionPooling",
    "CayleyGraph",
    "FitResult",
    "LayerGNN",
    "LayerGraph",
    "LayerProbe",
    "LayerShapley",
    "apply_head",
    "cayley_modulus",
    "coalition_accuracy",
    "encode_layers",
    "fit_head",
    "layer_attribution",
    "layer_graph",
    "layer_shapley",
    "message_passing",
    "ridge_probe",
    "shapley_values",
    "sl2_cayley_graph",
    "sl2_order",
]
