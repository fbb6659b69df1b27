r"""Cayley graphs of :math:`SL(2, \mathbb{Z}_n)` and the layer graphs built from them.

:math:`SL(2, \mathbb{Z}_n)` is the group of 2x2 integer matrices with determinant 1 modulo ``n``.
Its Cayley graph for the generating set
:math:`S = \{A, A^{-1}, B, B^{-1}\}`, :math:`A = [[1, 1], [0, 1]]`, :math:`B = [[1, 0], [1, 1]]`,
has the group elements as nodes and an edge :math:`g \to g s` for every :math:`s \in S`. ``S`` is
closed under inverses, so every edge appears in both directions. The order is

.. math:: |SL(2, \mathbb{Z}_n)| = n^3 \prod_{p \mid n} (1 - 1/p^2)

(6, 24, 48, 120, 144, 336 for n = 2..7). For ``n >= 3`` the four generators are distinct and the
graph is 4-regular; for ``n = 2`` :math:`A = A^{-1}` and :math:`B = B^{-1}` and the graph is a
6-cycle. The graph is built by breadth-first search from the identity, so node 0 is the identity
and nodes are numbered by distance from it.
"""

from __future__ import annotations

from collections import deque
from typing import Literal, NamedTuple

import numpy as np

_GENERATORS = ((1, 1, 0, 1), (1, -1, 0, 1), (1, 0, 1, 1), (1, 0, -1, 1))


class CayleyGraph(NamedTuple):
    """A Cayley graph with every undirected edge stored once per direction.

    Attributes:
      elements: ``[N, 4]`` int, the matrices ``(a, b, c, d)`` in BFS order (node 0 = identity).
      senders, receivers: ``[E]`` int node ids of the directed edges ``senders -> receivers``.
    """

    elements: np.ndarray
    senders: np.ndarray
    receivers: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.elements.shape[0])


class LayerGraph(NamedTuple):
    """The graph a layer GNN runs on: nodes ``0 .. num_layers - 1`` hold the LM's layers.

    Attributes:
      senders, receivers: ``[E]`` int directed edges (both directions of each undirected edge).
      num_nodes: nodes in the graph (``>= num_layers``; the extra ones are virtual).
      num_layers: nodes that carry a layer's representation.
    """

    senders: np.ndarray
    receivers: np.ndarray
    num_nodes: int
    num_layers: int


def _check_n(n: int) -> None:
    if not (isinstance(n, int | np.integer) and n >= 2):
        raise ValueError(f"n={n!r}; SL(2, Z_n) needs an integer n >= 2")


def sl2_order(n: int) -> int:
    r"""``|SL(2, Z_n)| = n^3 \prod_{p | n} (1 - 1/p^2)``.

    Examples:
        >>> [sl2_order(n) for n in range(2, 8)]
        [6, 24, 48, 120, 144, 336]
    """
    _check_n(n)
    order, m, p = n**3, n, 2
    while p * p <= m:
        if m % p == 0:
            order = order // (p * p) * (p * p - 1)
            while m % p == 0:
                m //= p
        p += 1
    if m > 1:
        order = order // (m * m) * (m * m - 1)
    return order


def sl2_cayley_graph(n: int) -> CayleyGraph:
    """The Cayley graph of ``SL(2, Z_n)`` for the generators ``[[1,1],[0,1]]``, ``[[1,0],[1,1]]``
    and their inverses, by breadth-first search from the identity.

    Args:
      n: modulus, ``>= 2``.

    Returns:
      :class:`CayleyGraph` with ``sl2_order(n)`` nodes; parallel edges (``n = 2``) are merged.

    Examples:
        >>> g = sl2_cayley_graph(3)
        >>> g.num_nodes, len(g.senders), np.bincount(g.senders).tolist() == [4] * 24
        (24, 96, True)

    References:
        Deac, Lackenby & Veličković 2022, "Expander Graph Propagation", arXiv:2210.02997.
        Wilson, Bechler-Speicher & Veličković 2024, "Cayley Graph Propagation", arXiv:2410.03424.
    """
    _check_n(n)
    n = int(n)

    def mul(g: tuple[int, ...], s: tuple[int, ...]) -> tuple[int, ...]:
        a, b, c, d = g
        e, f, h, k = s
        return ((a * e + b * h) % n, (a * f + b * k) % n, (c * e + d * h) % n, (c * f + d * k) % n)

    identity = (1, 0, 0, 1)
    index = {identity: 0}
    order = [identity]
    edges: set[tuple[int, int]] = set()
    queue = deque([identity])
    while queue:
        g = queue.popleft()
        for s in _GENERATORS:
            h = mul(g, s)
            if h not in index:
                index[h] = len(order)
                order.append(h)
                queue.append(h)
            edges.add((index[g], index[h]))
    pairs = np.array(sorted(edges), dtype=np.int32)
    return CayleyGraph(np.array(order, dtype=np.int32), pairs[:, 0], pairs[:, 1])


def cayley_modulus(num_layers: int) -> int:
    """Smallest ``n >= 2`` with ``|SL(2, Z_n)| >= num_layers``."""
    if not (isinstance(num_layers, int | np.integer) and num_layers >= 1):
        raise ValueError(f"num_layers={num_layers!r}; expected an int >= 1")
    n = 2
    while sl2_order(n) < num_layers:
        n += 1
    return n


def layer_graph(
    num_layers: int, *, topology: Literal["cayley", "complete"] = "cayley", virtual: bool = True
) -> LayerGraph:
    """The graph over ``num_layers`` LM layers that a layer GNN aggregates on.

    Args:
      num_layers: layers to place (``L``).
      topology: ``"cayley"``: the Cayley graph of ``SL(2, Z_n)`` for the smallest ``n`` with
        ``|SL(2, Z_n)| >= L``, layer ``l`` on BFS node ``l``; ``"complete"``: every pair of the
        ``L`` layers connected (no self-loops).
      virtual: for ``"cayley"``, keep every group element (nodes ``L ..`` are virtual, fed with
        learned or zero features) or truncate to the subgraph induced by the first ``L`` BFS nodes
        (connected, since BFS order is a tree order).

    Returns:
      :class:`LayerGraph`.

    Examples:
        >>> g = layer_graph(7)
        >>> g.num_nodes, g.num_layers
        (24, 7)
        >>> layer_graph(7, virtual=False).num_nodes
        7
    """
    if topology == "complete":
        if not (isinstance(num_layers, int | np.integer) and num_layers >= 1):
            raise ValueError(f"num_layers={num_layers!r}; expected an int >= 1")
        s, r = np.nonzero(~np.eye(num_layers, dtype=bool))
        return LayerGraph(s.astype(np.int32), r.astype(np.int32), int(num_layers), int(num_layers))
    if topology != "cayley":
        raise ValueError(f"topology={topology!r}; expected 'cayley' or 'complete'")
    g = sl2_cayley_graph(cayley_modulus(num_layers))
    if virtual:
        return LayerGraph(g.senders, g.receivers, g.num_nodes, int(num_layers))
    keep = (g.senders < num_layers) & (g.receivers < num_layers)
    return LayerGraph(g.senders[keep], g.receivers[keep], int(num_layers), int(num_layers))
