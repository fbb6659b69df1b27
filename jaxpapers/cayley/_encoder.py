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

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
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


class LayerGNN(eqx.Module):
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

    proj: eqx.nn.Linear
    node_embedding: Float[Array, "nodes hidden"]
    update: tuple[eqx.nn.Linear, ...]
    message: tuple[eqx.nn.Linear, ...]
    readout: eqx.nn.Linear
    senders: tuple[int, ...] = eqx.field(static=True)
    receivers: tuple[int, ...] = eqx.field(static=True)
    num_layers: int = eqx.field(static=True)
    aggregation: str = eqx.field(static=True)
    virtual_features: str = eqx.field(static=True)

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
        k_proj, k_emb, k_out, k_rounds = jax.random.split(key, 4)
        keys = jax.random.split(k_rounds, 2 * max(rounds, 1))
        self.proj = eqx.nn.Linear(in_features, hidden, key=k_proj)
        self.node_embedding = 0.1 * jax.random.normal(k_emb, (graph.num_nodes, hidden))
        self.update = tuple(eqx.nn.Linear(hidden, hidden, key=keys[2 * r]) for r in range(rounds))
        self.message = tuple(
            eqx.nn.Linear(hidden, hidden, use_bias=False, key=keys[2 * r + 1])
            for r in range(rounds)
        )
        self.readout = eqx.nn.Linear(hidden, num_classes, key=k_out)
        self.senders = tuple(int(s) for s in np.asarray(graph.senders))
        self.receivers = tuple(int(r) for r in np.asarray(graph.receivers))
        self.num_layers = int(graph.num_layers)
        self.aggregation = aggregation
        self.virtual_features = virtual_features

    def __check_init__(self):
        if self.aggregation not in ("sum", "mean"):
            raise ValueError(f"aggregation={self.aggregation!r}; expected 'sum' or 'mean'")
        if self.virtual_features not in ("learned", "zero"):
            raise ValueError(
                f"virtual_features={self.virtual_features!r}; expected 'learned' or 'zero'"
            )
        if len(self.update) < 1:
            raise ValueError(f"rounds={len(self.update)}; expected at least 1")

    def node_states(
        self, x: Float[Array, "layers features"], *, edge_mask: Bool[Array, " edges"] | None = None
    ) -> Float[Array, "nodes hidden"]:
        """Final node states after every round (before the read-out); ``edge_mask``: edges left
        out where False (see :func:`message_passing`)."""
        check_shape("x", x, (self.num_layers, self.proj.in_features))
        layers = jax.vmap(self.proj)(x) + self.node_embedding[: self.num_layers]
        virtual = self.node_embedding[self.num_layers :]
        if self.virtual_features == "zero":
            virtual = jnp.zeros_like(virtual)
        h = jnp.concatenate([layers, virtual], axis=0)
        senders, receivers = jnp.asarray(self.senders), jnp.asarray(self.receivers)
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
