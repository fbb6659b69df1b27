r"""Synthetic beds with known answers: the sanity check of the layer-contribution measure, and deep
layer stacks where the Cayley graph is much sparser than the complete one.

* Contribution beds (``contributions_sanity``): seven layers of ``F`` features, pure standard
  normal noise except the *carriers*, which hold one and the same noisy copy
  :math:`z = (2y - 1) s u + e` of the class signal. With one carrier the measure must rank it
  first; with two carriers holding the same copy, both must get a share of the head's gain (each
  alone is redundant given the other, so occluding one of them, or leaving it out and
  retraining, costs nothing: the copy is nearly noise-free, so that this holds on the bed, not
  only in the limit).
* Deep bed (``deep_topology``): ``L = 24`` layers of one feature each (the signal direction
  ``u``), pure standard normal noise except two layers ``a`` and ``b = a + L/2`` (``a`` drawn
  from the seed), which hold :math:`c u + e` with their own latent :math:`c \sim N(0, \sigma^2)`;
  the label is :math:`1[c_a c_b > 0]`. Neither layer alone says anything about the label
  (:math:`E[y \mid x_a] = 1/2`), so a head needs a node whose state depends on both: within
  ``R = 2`` rounds that is a pair at most ``2R = 4`` hops apart. For ``L = 24`` the Cayley graph
  of :math:`SL(2, \mathbb{Z}_3)` has exactly 24 nodes (no virtual ones), 96 directed edges and
  diameter 4; the ring with the same degree (each node joined to the two nearest on each side, 96
  edges) has diameter 6, and the pair sits at it; the complete graph (552 edges) joins the pair
  directly. Bayes accuracy :func:`deep_bayes` in closed form. All heads are one module
  (:class:`DenseGNN`) with a traced adjacency: same nodes, parameters, initial weights and steps.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpapers.cayley import LayerGNN, LayerGraph, coalition_accuracy, fit_head, layer_graph
from jaxpapers.cayley.experiments._train import (
    subgraph_mask,
)
from jaxpapers.core.metrics import accuracy

#: Feature width of the synthetic beds, and the unit direction of the class signal.
FEATURES = 16
DIRECTION = np.ones(FEATURES, np.float32) / FEATURES**0.5

#: Contribution beds: seven layers; signal strength of the carried copy (Bayes accuracy Phi(s)).
#: The copy is noise-free in effect (s = 10 standard deviations), so either copy alone predicts as
#: well as both and occluding one of the two costs nothing: the bed separates Shapley values from
#: occlusion. Measured 2026-12-05 (the quick head, 3 seeds): occlusion gave each copy 0.27 of the
#: gain at s = 1, 0.21-0.26 at s = 3, 0.03-0.06 at s = 6 and 0.000 at s = 10.
CONTRIBUTION_LAYERS = 7
CONTRIBUTION_SIGNAL = 10.0
#: the carrier of the one-carrier bed, and the two carriers of the redundant bed
SIGNAL_LAYER = 3
COPY_LAYERS = (2, 5)
BEDS = {"one carrier": (SIGNAL_LAYER,), "two copies": COPY_LAYERS}


def contribution_bed(
    key: jax.Array, n: int, *, carriers: tuple[int, ...], layers: int = CONTRIBUTION_LAYERS
):
    """``x [n, L, F]``, ``y [n]``: the layers ``carriers`` hold one and the same noisy copy of the
    class signal, every other layer independent standard normal noise."""
    k_y, k_copy, k_noise = jax.random.split(key, 3)
    y = jax.random.bernoulli(k_y, 0.5, (n,)).astype(jnp.int32)
    u = jnp.asarray(DIRECTION)
    copy = (2 * y - 1)[:, None] * CONTRIBUTION_SIGNAL * u[None] + jax.random.normal(
        k_copy, (n, FEATURES)
    )
    noise = jax.random.normal(k_noise, (n, layers, FEATURES))
    carry = jnp.zeros(layers, bool).at[jnp.asarray(carriers)].set(True)
    return jnp.where(carry[None, :, None], copy[:, None, :], noise), y


@partial(jax.jit, static_argnames=("make", "train", "test", "hp"))
def contribution_runs(seeds, *, make, train: int, test: int, hp):
    """For each seed and bed of :data:`BEDS`: a head ``make(key)`` trained on ``train`` examples
    (settings ``hp``, pairs for :func:`~jaxpapers.cayley.fit_head`) and the accuracy of every
    coalition of layers on ``test`` held-out examples
    (:func:`~jaxpapers.cayley.coalition_accuracy`): ``([seeds, beds, 2^L], [seeds, beds])``."""

    def one(seed):
        values, finite = [], []
        for b, carriers in enumerate(BEDS.values()):
            key = jax.random.fold_in(jax.random.key(seed), b)
            k_train, k_test, k_head = jax.random.split(key, 3)
            x, y = contribution_bed(k_train, train, carriers=carriers)
            xt, yt = contribution_bed(k_test, test, carriers=carriers)
            fit = fit_head(make(k_head), x, y, **dict(hp))
            values.append(coalition_accuracy(fit.head, xt, yt))
            finite.append(fit.finite)
        return jnp.stack(values), jnp.stack(finite)

    # lax.map, not vmap, over seeds (as in the heads' grid: vmap compiles slower on XLA:CPU)
    return jax.lax.map(one, seeds)


#: Deep bed: layers, spread of the two interacting layers' latents (in noise standard deviations)
#: and the heads compared (rows). ``DEEP_BAYES`` is the bed's closed-form Bayes accuracy.
DEEP_LAYERS = 24
DEEP_FEATURES = 1
DEEP_SPREAD = 3.0
DEEP_HIDDEN = 8
#: the rounds of message passing of the heads (:class:`~jaxpapers.cayley.LayerGNN`'s default)
DEEP_ROUNDS = 2
DEEP_HEADS = ("Cayley-Encoder", "fully connected GNN", "ring GNN", "no-edge GNN")


def deep_bayes(spread: float = DEEP_SPREAD) -> float:
    r"""Bayes accuracy of the deep bed: :math:`p^2 + (1 - p)^2`, where
    :math:`p = 1/2 + \arctan(\sigma) / \pi` is the chance that the sign of
    :math:`u^\top x_a = c_a + e` (``c_a ~ N(0, sigma^2)``, ``e ~ N(0, 1)``) is the sign of
    ``c_a``; the Bayes rule predicts ``sign((u.x_a)(u.x_b))`` and is right when both signs are
    right or both wrong."""
    p = 0.5 + math.atan(spread) / math.pi
    return p * p + (1.0 - p) ** 2


DEEP_BAYES = deep_bayes()


def deep_pair(seed: int) -> tuple[int, int]:
    """The two interacting layers of a seed's bed: ``a`` drawn from the seed, ``b = a + L / 2``
    (mod ``L``), the pair at the ring's largest distance."""
    a = int(np.random.default_rng([seed, 24]).integers(DEEP_LAYERS))
    return a, (a + DEEP_LAYERS // 2) % DEEP_LAYERS


def deep_layers(key: jax.Array, n: int, *, pair):
    """``x [n, L, F]``, ``y [n]`` of the deep bed: layers ``pair = (a, b)`` (may be traced) hold
    ``c u + e`` with their own latent ``c ~ N(0, DEEP_SPREAD^2)``, the others pure noise
    ``e ~ N(0, I)``; ``y = 1[c_a c_b > 0]``."""
    k_c, k_noise = jax.random.split(key)
    c = DEEP_SPREAD * jax.random.normal(k_c, (n, 2))
    y = (c[:, 0] * c[:, 1] > 0).astype(jnp.int32)
    x = jax.random.normal(k_noise, (n, DEEP_LAYERS, DEEP_FEATURES))
    u = jnp.ones(DEEP_FEATURES) / DEEP_FEATURES**0.5
    layer = jnp.arange(DEEP_LAYERS)
    coef = jnp.where(layer[None] == pair[0], c[:, :1], 0.0) + jnp.where(
        layer[None] == pair[1], c[:, 1:], 0.0
    )
    return x + coef[:, :, None] * u[None, None], y


def ring_graph(layers: int, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """The ring over ``layers`` nodes with every node joined to the ``degree / 2`` nearest on
    each side (both directions): ``(senders, receivers)`` in sorted order."""
    offsets = [o for k in range(1, degree // 2 + 1) for o in (k, -k)]
    pairs = sorted({(i, (i + o) % layers) for i in range(layers) for o in offsets})
    arr = np.array(pairs, np.int32)
    return arr[:, 0], arr[:, 1]


def deep_graphs() -> dict[str, np.ndarray]:
    """Each deep-bed head's edges as a mask over the complete graph of :data:`DEEP_LAYERS`
    nodes: all, the Cayley graph's, the ring's of the Cayley graph's degree (as many edges),
    none."""
    complete = layer_graph(DEEP_LAYERS, topology="complete")
    cayley = layer_graph(DEEP_LAYERS)
    if cayley.num_nodes != DEEP_LAYERS:
        raise ValueError(f"the Cayley graph has {cayley.num_nodes} nodes; expected {DEEP_LAYERS}")
    degree = len(cayley.senders) // DEEP_LAYERS
    s, r = ring_graph(DEEP_LAYERS, degree)
    ring = LayerGraph(s, r, DEEP_LAYERS, DEEP_LAYERS)
    mask = subgraph_mask(complete, cayley)
    return {
        "Cayley-Encoder": mask,
        "fully connected GNN": np.ones_like(mask),
        "ring GNN": subgraph_mask(complete, ring),
        "no-edge GNN": np.zeros_like(mask),
    }


def graph_distance(mask: np.ndarray, a: int, b: int) -> float:
    """Hops from node ``a`` to ``b`` over the complete graph's edges kept by ``mask``
    (``inf`` when unreachable)."""
    complete = layer_graph(DEEP_LAYERS, topology="complete")
    s, r = complete.senders[mask], complete.receivers[mask]
    dist, frontier, d = {a: 0}, [a], 0
    while frontier:
        d += 1
        frontier = [int(v) for u in frontier for v in r[s == u] if int(v) not in dist]
        for v in frontier:
            dist[v] = d
    return float(dist.get(b, math.inf))


def adjacency(mask: np.ndarray) -> np.ndarray:
    """``[L, L]`` float: entry ``(r, s)`` is 1 where the complete graph's edge ``s -> r`` is kept
    by ``mask`` (the deep bed's heads aggregate with it, :class:`DenseGNN`)."""
    complete = layer_graph(DEEP_LAYERS, topology="complete")
    adj = np.zeros((DEEP_LAYERS, DEEP_LAYERS), np.float32)
    adj[complete.receivers[mask], complete.senders[mask]] = 1.0
    return adj


class DenseGNN(LayerGNN):
    """The layer GNN on the complete graph's nodes with its edges given as a (traced) 0/1
    adjacency matrix, mean aggregation as a matrix product: the numbers of
    :func:`~jaxpapers.cayley.message_passing` with the edges kept (up to the order of the
    sums), several times faster on XLA:CPU than its gather/scatter over 552 edges. Every deep-bed
    head is this module (same nodes, parameters and initial weights for a key); only the
    adjacency differs."""

    def __init__(self, adj, in_features, num_classes, *, key, hidden):
        graph = layer_graph(DEEP_LAYERS, topology="complete")
        super().__init__(graph, in_features, num_classes, key=key, hidden=hidden)
        self.adj = nnx.Variable(adj)

    def node_states(self, x, *, edge_mask=None):
        del edge_mask
        adj = self.adj[...]
        norm = adj / jnp.maximum(jnp.sum(adj, axis=1), 1.0)[:, None]
        h = jax.vmap(self.proj)(x) + self.embedding()
        for upd, msg in zip(self.update, self.message, strict=True):
            h = h + jax.nn.gelu(jax.vmap(upd)(h) + jax.vmap(msg)(norm @ h))
        return h


@partial(jax.jit, static_argnames=("train", "val", "test", "hp", "hidden"))
def deep_runs(seeds, pairs, adjs, lrs, *, train: int, val: int, test: int, hp, hidden: int):
    """Validation and test accuracy ``[cells]`` (and finiteness) of the deep-bed head of each
    cell: seed ``seeds[c]`` (its data and initial weights), interacting layers ``pairs[c]``,
    adjacency ``adjs[c]`` (:func:`adjacency`), learning rate ``lrs[c]``."""

    def one(args):
        seed, pair, adj, lr = args
        k_data, k_val, k_test, k_head = jax.random.split(jax.random.key(seed), 4)
        x, y = deep_layers(k_data, train, pair=pair)
        xv, yv = deep_layers(k_val, val, pair=pair)
        xt, yt = deep_layers(k_test, test, pair=pair)
        head = DenseGNN(adj, DEEP_FEATURES, 2, key=k_head, hidden=hidden)
        fit = fit_head(head, x, y, **dict(hp), learning_rate=lr)
        logits = jax.vmap(fit.head)(jnp.concatenate([xv, xt]))
        return accuracy(logits[:val], yv), accuracy(logits[val:], yt), fit.finite

    # lax.map, not vmap, over cells (as in the heads' grid: vmap compiles slower on XLA:CPU)
    return jax.lax.map(one, (seeds, pairs, adjs, lrs))
