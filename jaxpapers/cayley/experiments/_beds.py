r"""Synthetic beds with known answers: the sanity check of the layer-contribution measure, and deep
layer stacks where the Cayley graph is much sparser than the complete one.

* Contribution beds (``contributions_sanity``): seven layers of ``F`` features, pure standard
  normal noise except the *carriers*, which hold one and the same noisy copy
  :math:`z = (2y - 1) s u + e` of the class signal. With one carrier the measure must rank it
  first; with two carriers holding the same copy, both must get a share of the head's gain (each
  alone is redundant given the other, so occluding one of them, or leaving it out and
  retraining, costs nothing: the copy is nearly noise-free, so that this holds on the bed, not
  only in the limit).
* Deep bed (``deep_topology``): the known-answer construction of ``bayes_limit`` with ``L = 24``
  layers, :math:`x_l = (2y - 1) s u + e_l`, Bayes accuracy :math:`\Phi(s)` from one layer and
  :math:`\Phi(s \sqrt{L})` from all. For ``L = 24`` the Cayley graph of :math:`SL(2, \mathbb{Z}_3)`
  has exactly 24 nodes (no virtual ones) and 96 directed edges, the complete graph 552. The heads
  compared are one layer GNN on the complete graph with a traced edge mask: all edges (fully
  connected), the Cayley graph's, or none (no messages): same nodes, parameters, initial weights
  and steps, so only the graph differs.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.cayley import coalition_accuracy, fit_head, layer_graph
from jaxpapers.cayley.experiments._train import (
    _Switched,
    normal_cdf,
    subgraph_mask,
    synthetic_layers,
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


#: Deep bed: layers, signal per layer, and the heads compared (rows).
DEEP_LAYERS = 24
DEEP_SIGNAL = 0.25
DEEP_BAYES_ONE = normal_cdf(DEEP_SIGNAL)
DEEP_BAYES_ALL = normal_cdf(DEEP_SIGNAL * DEEP_LAYERS**0.5)
DEEP_HEADS = ("Cayley-Encoder", "fully connected GNN", "no-edge GNN")


def deep_graphs() -> dict[str, np.ndarray]:
    """Each deep-bed head's edges as a mask over the complete graph of :data:`DEEP_LAYERS`
    nodes (all, the Cayley graph's, none)."""
    complete = layer_graph(DEEP_LAYERS, topology="complete")
    cayley = layer_graph(DEEP_LAYERS)
    if cayley.num_nodes != DEEP_LAYERS:
        raise ValueError(f"the Cayley graph has {cayley.num_nodes} nodes; expected {DEEP_LAYERS}")
    mask = subgraph_mask(complete, cayley)
    return {
        "Cayley-Encoder": mask,
        "fully connected GNN": np.ones_like(mask),
        "no-edge GNN": np.zeros_like(mask),
    }


@partial(jax.jit, static_argnames=("top", "test", "hp", "hidden"))
def deep_runs(seeds, sizes, masks, *, top: int, test: int, hp, hidden: int):
    """Test accuracy ``[cells]`` (and finiteness) of the deep-bed head of each cell: seed
    ``seeds[c]`` (its data and initial weights), the first ``sizes[c]`` of ``top`` training
    examples, edges ``masks[c]`` over the complete graph."""
    complete = layer_graph(DEEP_LAYERS, topology="complete")
    u = jnp.asarray(DIRECTION)

    def one(args):
        seed, n, mask = args
        k_data, k_test, k_head = jax.random.split(jax.random.key(seed), 3)
        x, y, _ = synthetic_layers(k_data, top, layers=DEEP_LAYERS, direction=u, signal=DEEP_SIGNAL)
        xt, yt, _ = synthetic_layers(
            k_test, test, layers=DEEP_LAYERS, direction=u, signal=DEEP_SIGNAL
        )
        head = _Switched(complete, FEATURES, 2, key=k_head, hidden=hidden, edge_mask=mask)
        w = (jnp.arange(top) < n).astype(x.dtype)
        fit = fit_head(head, x, y, weights=w, **dict(hp))
        return accuracy(jax.vmap(fit.head)(xt), yt), fit.finite

    return jax.lax.map(one, (seeds, sizes, masks))
