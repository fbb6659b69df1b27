"""Small pattern graphs ``H`` for homomorphism densities."""

from __future__ import annotations

import itertools

import equinox as eqx

from jaxpapers.core.checks import check_int


class PatternGraph(eqx.Module):
    """A simple undirected graph on nodes ``0..num_nodes-1``.

    Examples:
      >>> triangle().num_edges, triangle().automorphisms()
      (3, 6)
    """

    num_nodes: int = eqx.field(static=True)
    edges: tuple[tuple[int, int], ...] = eqx.field(static=True)
    name: str = eqx.field(static=True, default="H")

    def __init__(self, num_nodes: int, edges, name: str = "H"):
        self.num_nodes = int(num_nodes)
        self.edges = tuple(tuple(sorted((int(a), int(b)))) for a, b in edges)
        self.name = name

    def __check_init__(self) -> None:
        if self.num_nodes < 1:
            raise ValueError(f"num_nodes={self.num_nodes}; expected >= 1")
        for a, b in self.edges:
            if a == b:
                raise ValueError(f"edge ({a}, {b}) is a self-loop; pattern graphs are simple")
            if not (0 <= a < self.num_nodes and 0 <= b < self.num_nodes):
                raise ValueError(f"edge ({a}, {b}) names a node outside 0..{self.num_nodes - 1}")
        if len(set(self.edges)) != len(self.edges):
            raise ValueError(f"edges {self.edges} repeat an edge")
        if not self.edges:
            raise ValueError("a pattern graph needs at least one edge")

    @property
    def num_edges(self) -> int:
        return len(self.edges)

    def automorphisms(self) -> int:
        """Number of node permutations that map the edge set onto itself."""
        es = set(self.edges)
        return sum(
            {tuple(sorted((p[a], p[b]))) for a, b in self.edges} == es
            for p in itertools.permutations(range(self.num_nodes))
        )


def edge() -> PatternGraph:
    """The single edge ``K2`` (its density is the graphon's edge density)."""
    return PatternGraph(2, [(0, 1)], "K2")


def clique(r: int) -> PatternGraph:
    """The complete graph ``K_r`` on ``r`` nodes."""
    check_int("r", r, minimum=1)
    return PatternGraph(r, itertools.combinations(range(r), 2), f"K{r}")


def triangle() -> PatternGraph:
    """The triangle ``K3``."""
    return clique(3)


def cycle(k: int) -> PatternGraph:
    """The cycle ``C_k`` on ``k`` nodes."""
    check_int("k", k, minimum=3)
    return PatternGraph(k, [(i, (i + 1) % k) for i in range(k)], f"C{k}")


def path(k: int) -> PatternGraph:
    """The path with ``k`` nodes (``k - 1`` edges)."""
    check_int("k", k, minimum=1)
    return PatternGraph(k, [(i, i + 1) for i in range(k - 1)], f"P{k}")
