r"""The layer GNN: message passing over a graph whose nodes are an LM's layers.

Node features are the layers' mean-pooled hidden states projected by one shared linear map plus
a learned embedding of the node (the GNN must know which layer is which; a Cayley graph is
vertex-transitive). Virtual nodes (group elements beyond the ``L`` layers) start from a learned
vector or from zero. Each of ``R`` rounds is a residual update

.. math:: h_v \leftarrow h_v + \mathrm{gelu}\big(W_u h_v + W_m \,\mathrm{agg}_{u \to v} h_u\big),

with ``agg`` the sum or the mean over in-neighbours; the read-out is a linear map of the mean of
the layer nodes' final states.
"""

from __future__ import annotations

import math
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jaxtyping import Array, Bool, Float, Int

from jaxpapers.cayley._graph import LayerGraph
from jaxpapers.core.checks import check_dtype, check_ndim, check_shape


def message_passing(
    h: Float[Array, "nodes width"],
    senders: Int[Array, " edges"],
    receivers: Int[Array, " edges"],
    *,
    aggregation: Literal["sum", "mean"] = "mean",
    edge_mask: Bool[Array, " edges"] | None = None,
) -> Float[Array, "nodes width"]:
    """Aggregate ``h[senders]`` at ``receivers``: sum, or mean over each node's in-degree.

    Permutation-equivariant: relabelling nodes (and the edges with them) permutes the output.
    ``edge_mask`` (``[E]`` bool, may be traced) leaves out the edges where it is False: the same
    numbers as the graph without them (a left-out edge adds an exact zero), so graphs whose
    edges are a subset of one edge list can share a compiled program.

    Examples:
        >>> import jax.numpy as jnp
        >>> h = jnp.array([[1.0], [2.0], [4.0]])
        >>> message_passing(h, jnp.array([0, 1, 2, 2]), jnp.array([2, 2, 0, 1]), aggregation="sum")
        Array([[4.],
               [4.],
               [3.]], dtype=float32)
    """
    check_ndim("h", h, 2)
    check_ndim("senders", senders, 1)
    check_dtype("senders", senders, "integer")
    check_shape("receivers", receivers, senders.shape)
    check_dtype("receivers", receivers, "integer")
    if edge_mask is not None:
        check_shape("edge_mask", edge_mask, senders.shape)
    n = h.shape[0]
    messages, ones = h[senders], jnp.ones_like(receivers, h.dtype)
    if edge_mask is not None:
        ones = edge_mask.astype(h.dtype)
        messages = messages * ones[:, None]
    total = jax.ops.segment_sum(messages, receivers, num_segments=n)
    if aggregation == "sum":
        return total
    if aggregation != "mean":
        raise ValueError(f"aggregation={aggregation!r}; expected 'sum' or 'mean'")
    degree = jax.ops.segment_sum(ones, receivers, num_segments=n)
    return total / jnp.maximum(degree, 1.0)[:, None]


class _Linear(nnx.Module):
    """``W x + b`` on one vector ``x [in]``, with ``W [out, in]`` and ``b`` drawn from
    ``U(-1/sqrt(in), 1/sqrt(in))``: PyTorch's layout and initialisation (and equinox's draws
    for the same key, with which the committed P03 results were computed).

    The heads apply it to one node or layer at a time under ``jax.vmap``; ``nnx.Linear``'s
    ``x @ kernel`` gives the same numbers up to rounding in the last bits (a head's training
    loss ~1e-7 apart after 150 steps), this order gives the committed ones exactly.
    """

    def __init__(self, in_features: int, out_features: int, *, key: jax.Array, use_bias=True):
        k_weight, k_bias = jax.random.split(key)
        lim = 1.0 / math.sqrt(in_features)
        shape = (out_features, in_features)
        self.weight = nnx.Param(jax.random.uniform(k_weight, shape, minval=-lim, maxval=lim))
        self.bias = (
            nnx.Param(jax.random.uniform(k_bias, (out_features,), minval=-lim, maxval=lim))
            if use_bias
            else None
        )
        self.in_features = in_features
        self.out_features = out_features

    def __call__(self, x: Float[Array, " features"]) -> Float[Array, " out"]:
        y = self.weight[...] @ x
        return y if self.bias is None else y + self.bias[...]


class LayerGNN(nnx.Module):
    """GNN head over an LM's per-layer representations: ``[L, D]`` -> class logits ``[C]``.

    Args:
      graph: a :class:`LayerGraph` (``layer_graph(L)`` for the Cayley-Encoder,
        ``layer_graph(L, topology="complete")`` for the fully connected baseline).
      in_features: ``D``, width of each layer's representation.
      num_classes: ``C``.
      key: PRNG key for the initial weights.
      hidden: node width.
      rounds: message-passing rounds.
      aggregation: ``"mean"`` or ``"sum"`` over in-neighbours.
      virtual_features: ``"learned"`` or ``"zero"`` starting state of virtual nodes.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.cayley import LayerGNN, layer_graph
        >>> head = LayerGNN(layer_graph(7), 16, 3, key=jax.random.key(0), hidden=8)
        >>> head(jnp.ones((7, 16))).shape
        (3,)
    """

    def __init__(
        self,
        graph: LayerGraph,
        in_features: int,
        num_classes: int,
        *,
        key: jax.Array,
        hidden: int = 32,
        rounds: int = 2,
        aggregation: Literal["sum", "mean"] = "mean",
        virtual_features: Literal["learned", "zero"] = "learned",
    ):
        if aggregation not in ("sum", "mean"):
            raise ValueError(f"aggregation={aggregation!r}; expected 'sum' or 'mean'")
        if virtual_features not in ("learned", "zero"):
            raise ValueError(f"virtual_features={virtual_features!r}; expected 'learned' or 'zero'")
        if not (isinstance(rounds, int) and rounds >= 1):
            raise ValueError(f"rounds={rounds!r}; expected at least 1")
        k_proj, k_emb, k_out, k_rounds = jax.random.split(key, 4)
        keys = jax.random.split(k_rounds, 2 * rounds)
        self.proj = _Linear(in_features, hidden, key=k_proj)
        self.node_embedding = nnx.Param(0.1 * jax.random.normal(k_emb, (graph.num_nodes, hidden)))
        self.update = nnx.List([_Linear(hidden, hidden, key=keys[2 * r]) for r in range(rounds)])
        self.message = nnx.List(
            [_Linear(hidden, hidden, key=keys[2 * r + 1], use_bias=False) for r in range(rounds)]
        )
        self.readout = _Linear(hidden, num_classes, key=k_out)
        self.senders = tuple(int(s) for s in np.asarray(graph.senders))
        self.receivers = tuple(int(r) for r in np.asarray(graph.receivers))
        self.num_layers = int(graph.num_layers)
        self.aggregation = aggregation
        self.virtual_features = virtual_features

    def embedding(self) -> Float[Array, "nodes hidden"]:
        """The learned node embedding added to the starting states (a subclass may switch it)."""
        return self.node_embedding[...]

    def node_states(
        self, x: Float[Array, "layers features"], *, edge_mask: Bool[Array, " edges"] | None = None
    ) -> Float[Array, "nodes hidden"]:
        """Final node states after every round (before the read-out); ``edge_mask``: edges left
        out where False (see :func:`message_passing`)."""
        check_shape("x", x, (self.num_layers, self.proj.in_features))
        embedding = self.embedding()
        layers = jax.vmap(self.proj)(x) + embedding[: self.num_layers]
        virtual = embedding[self.num_layers :]
        if self.virtual_features == "zero":
            virtual = jnp.zeros_like(virtual)
        h = jnp.concatenate([layers, virtual], axis=0)
        # int32 even when a graph has no edges (a one-node head): () would be a float array
        senders = jnp.asarray(self.senders, jnp.int32)
        receivers = jnp.asarray(self.receivers, jnp.int32)
        for upd, msg in zip(self.update, self.message, strict=True):
            agg = message_passing(
                h, senders, receivers, aggregation=self.aggregation, edge_mask=edge_mask
            )
            h = h + jax.nn.gelu(jax.vmap(upd)(h) + jax.vmap(msg)(agg))
        return h

    def __call__(
        self, x: Float[Array, "layers features"], *, edge_mask: Bool[Array, " edges"] | None = None
    ) -> Float[Array, " classes"]:
        """Class logits of one example's per-layer representations ``x [L, D]``."""
        states = self.node_states(x, edge_mask=edge_mask)
        return self.readout(jnp.mean(states[: self.num_layers], axis=0))
