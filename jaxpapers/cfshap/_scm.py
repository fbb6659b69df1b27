"""Structural causal models: discrete (response-function form) and linear-Gaussian.

Both models expose the same three operations the explanation games need:

* ``solve(noise, values, mask)``: the world of one exogenous setting ``noise`` under the
  intervention ``do(X_S = values_S)`` with ``S = {i : mask_i}`` (``mask`` all false: the factual
  world). Every counterfactual is "abduce the noise, act with ``mask``, predict with ``solve``".
* ``abduct``: the exogenous settings consistent with an observed ``x`` and their posterior weights.
* ``reference_worlds``: exogenous settings drawn from the prior, with weights.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from jaxpapers.core.checks import check_finite, check_int, check_key, check_ndim, is_concrete


class Worlds(NamedTuple):
    """A weighted set of exogenous settings and the factual values they produce.

    Attributes:
      noise: ``(w, n)`` exogenous settings (indices for a discrete SCM, additive noise for a
        linear one).
      weight: ``(w,)`` probabilities (sum to one).
      values: ``(w, n)`` the factual values ``X(noise)``.
    """

    noise: Array
    weight: Float[Array, " w"]
    values: Array


def topological_order(parents: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """Kahn's order of a DAG given by parent lists; ``ValueError`` on self-loops, unknown nodes,
    cycles."""
    n = len(parents)
    for i, pa in enumerate(parents):
        for j in pa:
            if not isinstance(j, int | np.integer) or not 0 <= j < n:
                raise ValueError(f"parents[{i}] names node {j!r}; expected nodes 0..{n - 1}")
            if j == i:
                raise ValueError(f"parents[{i}] contains {i}: self-loops are not allowed")
        if len(set(pa)) != len(pa):
            raise ValueError(f"parents[{i}]={pa} repeats a node")
    order: list[int] = []
    remaining = {i: set(pa) for i, pa in enumerate(parents)}
    while remaining:
        ready = sorted(i for i, pa in remaining.items() if not pa & set(remaining))
        if not ready:
            raise ValueError(f"the graph is cyclic: nodes {sorted(remaining)} form a cycle")
        order += ready
        for i in ready:
            del remaining[i]
    return tuple(order)


def ancestors(parents: tuple[tuple[int, ...], ...], node: int) -> set[int]:
    """All strict ancestors of ``node``."""
    seen: set[int] = set()
    stack = list(parents[node])
    while stack:
        j = stack.pop()
        if j not in seen:
            seen.add(j)
            stack += parents[j]
    return seen


def response_functions(card: int, parent_cards: tuple[int, ...]) -> np.ndarray:
    """Every map from parent configurations to ``{0..card-1}``: ``(card ** P, P)`` with
    ``P = prod(parent_cards)``; a root gets the identity table ``(card, 1)``."""
    check_int("card", card, minimum=1)
    for c in parent_cards:
        check_int("parent_cards", c, minimum=1)
    configs = math.prod(parent_cards)
    return np.array(list(itertools.product(range(card), repeat=configs)), dtype=np.int32)


def monotone_mask(table: np.ndarray, parent_cards: tuple[int, ...]) -> np.ndarray:
    """Which rows of a response-function table are non-decreasing in every parent."""
    check_ndim("table", table, 2)
    for c in parent_cards:
        check_int("parent_cards", c, minimum=1)
    if np.shape(table)[1] != math.prod(parent_cards):
        raise ValueError(
            f"table has shape {np.shape(table)}; expected {math.prod(parent_cards)} columns "
            f"(the parent configurations of parent_cards={tuple(parent_cards)})"
        )
    table = np.asarray(table)
    keep = np.ones(table.shape[0], bool)
    if not parent_cards:
        return keep
    grid = table.reshape((table.shape[0], *parent_cards))
    for axis in range(1, grid.ndim):
        keep &= np.all(np.diff(grid, axis=axis) >= 0, axis=tuple(range(1, grid.ndim)))
    return keep


class DiscreteSCM(eqx.Module):
    """A finite-valued SCM in response-function form, with a joint law over the noises.

    Variable ``i`` takes values ``0..cards[i]-1``; its exogenous noise ``U_i`` picks a row of
    ``functions[i]`` (``(r_i, prod parent cards)``), whose entry at the parents' configuration
    (row-major in the listed parent order) is ``X_i``. ``noise`` is the joint law of
    ``(U_1..U_n)`` flattened row-major over ``(r_1..r_n)``: a product law is a Markovian model,
    any other law encodes hidden confounding.

    Examples:
      >>> import jax.numpy as jnp
      >>> scm = DiscreteSCM.markovian(
      ...     cards=(2, 2), parents=((), (0,)),
      ...     functions=(jnp.array([[0], [1]]), jnp.array([[0, 1], [1, 0]])),
      ...     noise_marginals=(jnp.array([0.5, 0.5]), jnp.array([0.9, 0.1])))
      >>> [round(float(p), 3) for p in scm.observational()]
      [0.45, 0.05, 0.05, 0.45]
    """

    functions: tuple[Int[Array, "r p"], ...]
    noise: Float[Array, " R"]
    cards: tuple[int, ...] = eqx.field(static=True)
    parents: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    order: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, cards, parents, functions, noise):
        self.cards = tuple(int(c) for c in cards)
        self.parents = tuple(tuple(int(j) for j in pa) for pa in parents)
        self.functions = tuple(jnp.asarray(f, jnp.int32) for f in functions)
        self.noise = jnp.asarray(noise)
        self.order = topological_order(self.parents)

    def __check_init__(self) -> None:
        n = len(self.cards)
        if len(self.parents) != n or len(self.functions) != n:
            raise ValueError(
                f"cards, parents and functions must have one entry per variable; got "
                f"{n}, {len(self.parents)}, {len(self.functions)}"
            )
        if any(c < 1 for c in self.cards):
            raise ValueError(f"cards={self.cards}; expected positive cardinalities")
        for i, f in enumerate(self.functions):
            want = math.prod(self.cards[j] for j in self.parents[i])
            if f.ndim != 2 or f.shape[1] != want:
                raise ValueError(
                    f"functions[{i}] has shape {f.shape}; expected (num_noise_values, {want})"
                )
            if is_concrete(f) and (
                np.any(np.asarray(f) < 0) or np.any(np.asarray(f) >= self.cards[i])
            ):
                raise ValueError(f"functions[{i}] has values outside 0..{self.cards[i] - 1}")
        if self.noise.shape != (self.num_noise,):
            raise ValueError(
                f"noise has shape {self.noise.shape}; expected ({self.num_noise},) = the product "
                f"of the noise sizes {self.noise_sizes}"
            )
        if is_concrete(self.noise):
            check_finite("noise", self.noise)
            p = np.asarray(self.noise, np.float64)
            if np.any(p < -1e-7) or abs(p.sum() - 1.0) > 1e-4:
                raise ValueError(f"noise must be a probability vector; got sum {p.sum():.6g}")

    @classmethod
    def markovian(cls, cards, parents, functions, noise_marginals) -> DiscreteSCM:
        """An SCM with independent noises: the joint law is the product of ``noise_marginals``."""
        joint = jnp.ones(1)
        for m in noise_marginals:
            joint = jnp.outer(joint, jnp.asarray(m)).reshape(-1)
        return cls(cards, parents, functions, joint)

    @classmethod
    def canonical(cls, cards, parents, noise=None, *, monotone: bool = False) -> DiscreteSCM:
        """The canonical SCM: each noise ranges over all (optionally monotone) response functions.

        ``noise=None`` gives the uniform law over response-function combinations.
        """
        cards = tuple(int(c) for c in cards)
        parents = tuple(tuple(pa) for pa in parents)
        topological_order(parents)
        tables = []
        for i, pa in enumerate(parents):
            pc = tuple(cards[j] for j in pa)
            t = response_functions(cards[i], pc)
            if monotone:
                t = t[monotone_mask(t, pc)]
            tables.append(t)
        size = math.prod(t.shape[0] for t in tables)
        if noise is None:
            noise = jnp.full((size,), 1.0 / size)
        return cls(cards, parents, tables, noise)

    @property
    def num_features(self) -> int:
        return len(self.cards)

    @property
    def noise_sizes(self) -> tuple[int, ...]:
        return tuple(int(f.shape[0]) for f in self.functions)

    @property
    def num_noise(self) -> int:
        return math.prod(self.noise_sizes)

    @property
    def num_configs(self) -> int:
        return math.prod(self.cards)

    def noise_configs(self) -> Int[Array, "R n"]:
        """Every exogenous setting, row-major (row ``k`` has flat index ``k``)."""
        grid = np.indices(self.noise_sizes).reshape(self.num_features, -1).T
        return jnp.asarray(grid, jnp.int32)

    def value_configs(self) -> Int[Array, "K n"]:
        """Every joint value of the variables, row-major (row ``k`` has flat index ``k``)."""
        return jnp.asarray(np.indices(self.cards).reshape(self.num_features, -1).T, jnp.int32)

    def config_index(self, x: Int[Array, " n"]) -> Int[Array, ""]:
        """Row-major flat index of a joint value."""
        strides = np.cumprod((1, *self.cards[::-1]))[::-1][1:]
        return jnp.sum(jnp.asarray(x) * jnp.asarray(strides, jnp.int32))

    def solve(
        self, noise: Int[Array, " n"], values: Array, mask: Bool[Array, " n"]
    ) -> Int[Array, " n"]:
        """Values of all variables for one noise setting under ``do(X_S = values_S)``."""
        xs: list = [None] * self.num_features
        for i in self.order:
            idx = jnp.zeros((), jnp.int32)
            for j in self.parents[i]:
                idx = idx * self.cards[j] + xs[j]
            own = self.functions[i][noise[i], idx]
            xs[i] = jnp.where(mask[i], jnp.asarray(values[i], jnp.int32), own)
        return jnp.stack(xs)

    def _factual_values(self) -> Int[Array, "R n"]:
        n = self.num_features
        return jax.vmap(lambda u: self.solve(u, jnp.zeros(n, jnp.int32), jnp.zeros(n, bool)))(
            self.noise_configs()
        )

    def observational(self) -> Float[Array, " K"]:
        """The joint law of the variables, flattened row-major over ``cards``."""
        idx = jax.vmap(self.config_index)(self._factual_values())
        return jax.ops.segment_sum(self.noise, idx, num_segments=self.num_configs)

    def interventional(self, node: int, value: int) -> Float[Array, " K"]:
        """The joint law under ``do(X_node = value)``, flattened row-major."""
        n = self.num_features
        mask = jnp.zeros(n, bool).at[node].set(True)
        vals = jnp.zeros(n, jnp.int32).at[node].set(value)
        xs = jax.vmap(lambda u: self.solve(u, vals, mask))(self.noise_configs())
        idx = jax.vmap(self.config_index)(xs)
        return jax.ops.segment_sum(self.noise, idx, num_segments=self.num_configs)

    def reference_worlds(self) -> Worlds:
        """Every exogenous setting with its prior probability."""
        return Worlds(self.noise_configs(), self.noise, self._factual_values())

    def abduct(self, x: Int[Array, " n"], prob_x: Array | None = None) -> Worlds:
        """Posterior over exogenous settings given ``X = x``: ``p(u) 1[X(u) = x] / P(x)``.

        ``prob_x`` overrides the normaliser (the bounds fix it to the observed ``P(x)``).
        """
        values = self._factual_values()
        hit = jnp.all(values == jnp.asarray(x, jnp.int32)[None], axis=-1)
        w = jnp.where(hit, self.noise, 0.0)
        norm = w.sum() if prob_x is None else prob_x
        return Worlds(self.noise_configs(), w / norm, values)

    def sample(self, num: int, *, key: Array) -> Int[Array, "num n"]:
        """``num`` i.i.d. draws of ``X``."""
        check_key("key", key)
        num = check_int("num", num, minimum=0)
        k = jax.random.choice(key, self.num_noise, (num,), p=self.noise)
        return self._factual_values()[k]


class LinearGaussianSCM(eqx.Module):
    """``X = B X + mean + scale * eps`` with ``eps ~ N(0, I)`` and ``B`` acyclic.

    ``weights[i, j]`` is the direct effect of ``X_j`` on ``X_i``. The noise of a world is the
    vector ``c = mean + scale * eps = (I - B) X``, so abduction from an observed ``x`` is exact.

    Examples:
      >>> import jax.numpy as jnp
      >>> scm = LinearGaussianSCM(jnp.array([[0.0, 0.0], [2.0, 0.0]]))
      >>> scm.covariance().tolist()
      [[1.0, 2.0], [2.0, 5.0]]
    """

    weights: Float[Array, "n n"]
    mean: Float[Array, " n"]
    scale: Float[Array, " n"]

    def __init__(self, weights, mean=None, scale=None):
        self.weights = jnp.asarray(weights, float)
        n = self.weights.shape[0] if self.weights.ndim == 2 else 0
        self.mean = jnp.zeros(n) if mean is None else jnp.asarray(mean, float)
        self.scale = jnp.ones(n) if scale is None else jnp.asarray(scale, float)

    def __check_init__(self) -> None:
        w = self.weights
        if w.ndim != 2 or w.shape[0] != w.shape[1]:
            raise ValueError(f"weights has shape {w.shape}; expected a square (n, n) matrix")
        n = w.shape[0]
        for name, v in (("mean", self.mean), ("scale", self.scale)):
            if v.shape != (n,):
                raise ValueError(f"{name} has shape {v.shape}; expected ({n},)")
        if is_concrete(w):
            check_finite("weights", w)
            support = np.asarray(w) != 0
            if np.any(np.diag(support)):
                raise ValueError("weights has a non-zero diagonal: self-loops are not allowed")
            reach = support.astype(np.int64)
            for _ in range(n):
                reach = np.minimum(reach @ support.astype(np.int64) + reach, 1)
            if np.any(np.diag(reach)):
                raise ValueError("weights describe a cyclic graph; expected a DAG")

    @property
    def num_features(self) -> int:
        return int(self.weights.shape[0])

    @property
    def parents(self) -> tuple[tuple[int, ...], ...]:
        w = np.asarray(self.weights)
        return tuple(tuple(int(j) for j in np.flatnonzero(w[i])) for i in range(w.shape[0]))

    def solve(self, noise: Float[Array, " n"], values: Array, mask: Bool[Array, " n"]):
        """``X`` with noise ``c`` under ``do(X_S = values_S)``:
        ``X = (I - D B)^{-1} (D c + (1 - D) values)`` with ``D = diag(1 - mask)``."""
        keep = 1.0 - mask.astype(self.weights.dtype)
        eye = jnp.eye(self.num_features, dtype=self.weights.dtype)
        rhs = keep * noise + (1.0 - keep) * values
        return jnp.linalg.solve(eye - keep[:, None] * self.weights, rhs)

    def abduct_noise(self, x: Float[Array, "... n"]) -> Float[Array, "... n"]:
        """``c = (I - B) x``, the noise that reproduces ``x``."""
        return x - x @ self.weights.T

    def abduct(self, x: Float[Array, " n"]) -> Worlds:
        """The single world consistent with ``x``."""
        return Worlds(self.abduct_noise(x)[None], jnp.ones(1), jnp.asarray(x)[None])

    def values_from_noise(self, c: Float[Array, "... n"]) -> Float[Array, "... n"]:
        eye = jnp.eye(self.num_features, dtype=self.weights.dtype)
        return c @ jnp.linalg.inv(eye - self.weights).T

    def reference_worlds(self, background: Float[Array, "m n"]) -> Worlds:
        """Equally weighted worlds of background draws of ``X`` (their noises by abduction)."""
        background = jnp.asarray(background)
        m = background.shape[0]
        return Worlds(self.abduct_noise(background), jnp.full(m, 1.0 / m), background)

    def covariance(self) -> Float[Array, "n n"]:
        a = jnp.linalg.inv(jnp.eye(self.num_features) - self.weights)
        return (a * self.scale[None] ** 2) @ a.T

    def expected_values(self) -> Float[Array, " n"]:
        return self.values_from_noise(self.mean)

    def sample(self, num: int, *, key: Array) -> Float[Array, "num n"]:
        """``num`` i.i.d. draws of ``X``."""
        check_key("key", key)
        num = check_int("num", num, minimum=0)
        eps = jax.random.normal(key, (num, self.num_features))
        return self.values_from_noise(self.mean[None] + self.scale[None] * eps)
