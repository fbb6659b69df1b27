r"""Graphon variational problems, their optimisation by gradient descent, and references.

* Generalised Turan problems: maximise ``t(K_r, W)`` subject to ``t(H, W) = 0``, solved as
  ``min -t(K_r) + lambda t(H)`` (the optimum is a complete multipartite graphon: ``1/2`` edge
  density without triangles, ``2/9`` triangle density without ``K_4``).
* Erdos-Renyi tails (Chatterjee and Varadhan 2011): the rate of ``{t(H, G(n, p)) >= (1 + delta)
  p^{e(H)}}`` is ``min (1/2) iint h_p(W)`` over graphons with ``t(H, W) >= (1 + delta) p^{e(H)}``,
  with ``h_p(q) = q log(q / p) + (1 - q) log((1 - q) / (1 - p))``; the lower tail reverses the
  inequality. The constraint is active at the optimum, so it is enforced exactly by the embedded
  shift solver (``W = sigmoid(L + s)``, ``s`` from :func:`solve_shift`) and only the entropy is
  minimised.
* References for the triangle upper tail (Lubetzky and Zhao 2017): the planted clique
  ``W = 1`` on ``[0, a]^2`` (else ``p``), the hub ``W = 1`` where ``min(x, y) < b`` (else ``p``),
  and the constant ``(1 + delta)^{1/3} p`` (optimal in the replica-symmetric region).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jaxtyping import Array, Float

from jaxpapers.core.checks import (
    check_finite,
    check_int,
    check_key,
    check_positive,
    check_range,
    is_concrete,
)
from jaxpapers.core.fit import fit
from jaxpapers.graphons._constraint import solve_shift
from jaxpapers.graphons._density import (
    all_tuples_density,
    check_density_target,
    matrix_density,
    step_density,
)
from jaxpapers.graphons._graphs import PatternGraph, triangle
from jaxpapers.graphons._network import NeuralGraphon


def bernoulli_entropy(q: Array, p: float | Array) -> Array:
    """Relative entropy ``h_p(q)`` of Bernoulli(q) from Bernoulli(p) (``0 log 0 = 0``)."""
    check_range("p", p, 0.0, 1.0, low_open=True, high_open=True)
    check_finite("q", q)
    q = jnp.clip(q, 0.0, 1.0)
    a = jnp.where(q > 0, q * jnp.log(jnp.where(q > 0, q, 1.0) / p), 0.0)
    b = jnp.where(q < 1, (1 - q) * jnp.log(jnp.where(q < 1, 1 - q, 1.0) / (1 - p)), 0.0)
    return a + b


def _check_p(p) -> None:
    if not 0.0 < float(p) < 1.0:
        raise ValueError(f"p={float(p)!r}; expected p in (0, 1)")


def _off_diagonal_mean(M: Array) -> Array:
    m = M.shape[0]
    return (M * (1.0 - jnp.eye(m, dtype=M.dtype))).sum() / (m * (m - 1))


class TuranObjective(eqx.Module):
    """Maximise ``t(maximise, W)`` with ``t(forbidden, W) = slack`` held by the embedded solver.

    The shift solver keeps the forbidden density at a small ``slack`` on every sample, so the
    gradient can only raise ``t(maximise)`` by moving the forbidden copies' mass elsewhere, which
    carves ``W`` into parts; a plain penalty ``-t(K_r) + lambda t(H)`` instead collapses to the
    empty graphon (``t(H) = 0`` trivially) from a near-constant start. The loss is
    ``-log t(maximise)`` (scale-free gradients).
    """

    maximise: PatternGraph
    forbidden: PatternGraph
    slack: float = eqx.field(static=True, default=1e-3)

    def __call__(self, g: NeuralGraphon, points: Array, step: Array) -> tuple[Array, Array]:
        del step
        # Pairwise evaluation, not ``g.logit_matrix`` (same values up to float rounding): the
        # Turan trajectories are chaotic and this is the evaluation they were measured with.
        L = g.logits(*jnp.meshgrid(points, points, indexing="ij"))
        sol = solve_shift(self.forbidden, L, self.slack)
        value = matrix_density(self.maximise, jax.nn.sigmoid(L + sol.shift))
        return -jnp.log(value), value


class TailObjective(eqx.Module):
    """Entropy cost ``(1/2) mean h_p(W_ij)`` with ``t(H, W) = (1 +- delta) p^{e(H)}`` enforced by
    the embedded shift solver.

    The tail is held as an array ``sign`` (+1 upper, -1 lower), not a static flag, so that the
    upper and lower tails of one pattern share one compiled optimisation.
    """

    pattern: PatternGraph
    p: Float[Array, ""]
    delta: Float[Array, ""]
    sign: Float[Array, ""]

    def __init__(self, pattern: PatternGraph, p, delta, upper: bool = True):
        self.pattern = pattern
        self.p = jnp.asarray(p, float)
        self.delta = jnp.asarray(delta, float)
        self.sign = jnp.asarray(1.0 if upper else -1.0, float)

    def __check_init__(self) -> None:
        if is_concrete(self.p) and self.p.ndim == 0:
            _check_p(self.p)
            check_positive("delta", self.delta)
            check_density_target("target density", self.target)

    @property
    def upper(self) -> bool:
        """True for the upper tail (needs a concrete ``sign``)."""
        return bool(self.sign > 0)

    @property
    def target(self) -> Array:
        return (1.0 + self.sign * self.delta) * self.p**self.pattern.num_edges

    def __call__(self, g: NeuralGraphon, points: Array, step: Array) -> tuple[Array, Array]:
        del step
        L = g.logit_matrix(points)
        sol = solve_shift(self.pattern, L, self.target)
        W = jax.nn.sigmoid(L + sol.shift)
        rate = 0.5 * _off_diagonal_mean(bernoulli_entropy(W, self.p))
        return rate, rate


class OptimisationResult(NamedTuple):
    """A trained graphon, its optimiser state and its per-step objective values.

    Attributes:
      params: the trained parameters, the ``nnx.State`` of the graphon's ``nnx.Param``
        variables (the last finite ones if the run froze); the module is
        ``nnx.merge(nnx.graphdef(graphon), params)``, which is ``graphon`` below.
      opt_state: Adam's state after the last applied step.
      losses: ``(steps,)`` training objective.
      finite: False when a non-finite loss, gradient or update stopped the updates early.
      values: ``(steps,)`` the quantity reported by the objective (density or rate).
      graphon: the trained :class:`NeuralGraphon` (``params`` merged into the module).
    """

    params: nnx.State
    opt_state: Any
    losses: Float[Array, " steps"]
    finite: Array
    values: Float[Array, " steps"]
    graphon: NeuralGraphon


@functools.partial(jax.jit, static_argnames=("steps", "num_points", "learning_rate"))
def optimise_graphon(
    objective,
    graphon: NeuralGraphon,
    *,
    key: Array,
    steps: int,
    num_points: int,
    learning_rate: float | optax.Schedule = 3e-3,
) -> OptimisationResult:
    """Adam on ``objective(graphon, points, step)`` with fresh uniform ``points`` every step.

    One :func:`jaxpapers.core.fit.fit` loop over the graphon's parameters
    (``graphdef, params = nnx.split(graphon, nnx.Param)``; the loss merges them back): step
    ``t`` draws its ``num_points`` points from the ``t``-th key of ``jax.random.split(key,
    steps)``. ``learning_rate`` is a constant or an optax schedule (step -> rate; the
    experiments decay it to 0 by a cosine over ``steps``). Stops updating (keeping the last
    finite parameters) at the first non-finite loss, gradient or update. ``steps``,
    ``num_points`` and ``learning_rate`` are static. The trained module is the result's
    ``graphon``.

    Examples:
      >>> import jax
      >>> from jaxpapers.graphons._graphs import edge, triangle
      >>> obj = TuranObjective(edge(), triangle())
      >>> g = NeuralGraphon(key=jax.random.key(0), width=12, depth=1)
      >>> res = optimise_graphon(obj, g, key=jax.random.key(1), steps=3, num_points=8)
      >>> res.losses.shape, bool(res.finite), res.graphon.matrix(jnp.linspace(0, 1, 4)).shape
      ((3,), True, (4, 4))
    """
    check_key("key", key)
    graphdef, params = nnx.split(graphon, nnx.Param)

    def batch_fn(t, k):
        return jax.random.uniform(k, (num_points,)), t

    def loss_fn(params, batch, key):
        points, t = batch
        return objective(nnx.merge(graphdef, params), points, t)

    res = fit(
        loss_fn,
        params,
        optax.adam(learning_rate),
        steps=steps,
        key=key,
        batch_fn=batch_fn,
        has_aux=True,
    )
    trained = nnx.merge(graphdef, res.params)
    return OptimisationResult(res.params, res.opt_state, res.losses, res.finite, res.aux, trained)


@functools.partial(jax.jit, static_argnames="num_points")
def evaluate_tail(objective: TailObjective, graphon: NeuralGraphon, num_points: int):
    """Rate of a trained graphon on a midpoint grid, its shift re-solved there so that the grid
    density meets the target exactly. Returns ``(rate, density, shift)``."""
    check_int("num_points", num_points, minimum=1)
    x = (jnp.arange(num_points) + 0.5) / num_points
    L = graphon.logit_matrix(x)
    sol = solve_shift(objective.pattern, L, objective.target, density=all_tuples_density)
    W = jax.nn.sigmoid(L + sol.shift)
    rate = 0.5 * bernoulli_entropy(W, objective.p).mean()
    return rate, all_tuples_density(objective.pattern, W), sol.shift


class TuranValues(NamedTuple):
    """Grid values of a Turan graphon (its shift re-solved on the grid).

    Attributes:
      value: ``t(maximise, W)``.
      forbidden: ``t(forbidden, W)`` (equals the slack).
      rounded_value: ``t(maximise, 1[W > 1/2])``.
      rounded_forbidden: ``t(forbidden, 1[W > 1/2])``.
      shift: the logit shift on the grid.
    """

    value: Array
    forbidden: Array
    rounded_value: Array
    rounded_forbidden: Array
    shift: Array


@functools.partial(jax.jit, static_argnames="num_points")
def evaluate_turan(objective: TuranObjective, graphon: NeuralGraphon, num_points: int):
    """Values of a trained Turan graphon on a midpoint grid, the shift re-solved there so that
    ``t(forbidden) = slack`` (densities of the step graphon on the grid, all tuples)."""
    check_int("num_points", num_points, minimum=1)
    x = (jnp.arange(num_points) + 0.5) / num_points
    L = graphon.logit_matrix(x)
    sol = solve_shift(objective.forbidden, L, objective.slack, density=all_tuples_density)
    W = jax.nn.sigmoid(L + sol.shift)
    R = (W > 0.5).astype(W.dtype)
    return TuranValues(
        all_tuples_density(objective.maximise, W),
        all_tuples_density(objective.forbidden, W),
        all_tuples_density(objective.maximise, R),
        all_tuples_density(objective.forbidden, R),
        sol.shift,
    )


def shifted_matrix(graphon: NeuralGraphon, shift: Array, num_points: int) -> Array:
    """``sigmoid(logits + shift)`` on a midpoint grid (for heatmaps)."""
    check_int("num_points", num_points, minimum=1)
    check_finite("shift", shift)
    x = (jnp.arange(num_points) + 0.5) / num_points
    return jax.nn.sigmoid(graphon.logit_matrix(x) + shift)


# --------------------------------------------------------------------------------------------
# Reference constructions (exact, step graphons)
# --------------------------------------------------------------------------------------------


class Construction(NamedTuple):
    """A reference graphon for the upper tail: its parameter and rate."""

    name: str
    parameter: float
    rate: float


def _bisect(fn, lo: float, hi: float, iters: int = 100) -> float:
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if fn(mid) < 0 else (lo, mid)
    return 0.5 * (lo + hi)


def _triangle_step(sizes, values) -> float:
    with jax.enable_x64(True):
        return float(step_density(triangle(), jnp.asarray(sizes), jnp.asarray(values)))


def clique_construction(p: float, delta: float) -> Construction:
    """Planted clique ``1`` on ``[0, a]^2``, ``p`` elsewhere, with ``t(K3) = (1 + delta) p^3``."""
    _check_p(p)
    check_range("delta", delta, 0.0, 1.0 / p**3 - 1.0)
    target = (1 + delta) * p**3
    a = _bisect(lambda a: _triangle_step([a, 1 - a], [[1.0, p], [p, p]]) - target, 0.0, 1.0, 60)
    return Construction("clique", a, 0.5 * a**2 * float(np.log(1 / p)))


def hub_construction(p: float, delta: float) -> Construction:
    """Hub ``1`` where ``min(x, y) < b``, ``p`` elsewhere, with ``t(K3) = (1 + delta) p^3``."""
    _check_p(p)
    target = (1 + delta) * p**3
    b = _bisect(lambda b: _triangle_step([b, 1 - b], [[1.0, 1.0], [1.0, p]]) - target, 0.0, 1.0, 60)
    return Construction("hub", b, 0.5 * (1 - (1 - b) ** 2) * float(np.log(1 / p)))


def constant_construction(p: float, delta: float, edges: int = 3, upper: bool = True):
    """The replica-symmetric graphon ``r = ((1 +- delta) p^e)^{1/e}``."""
    _check_p(p)
    r = ((1 + (delta if upper else -delta)) * p**edges) ** (1 / edges)
    if not 0 <= r <= 1:
        raise ValueError(f"target density needs r={r}; outside [0, 1]")
    rate = 0.5 * float(bernoulli_entropy(jnp.asarray(r, jnp.float32), p))
    return Construction("constant", r, rate)


def best_reference(p: float, delta: float) -> Construction:
    """The best of the clique, hub and constant constructions for the triangle upper tail."""
    return min(
        (
            clique_construction(p, delta),
            hub_construction(p, delta),
            constant_construction(p, delta),
        ),
        key=lambda c: c.rate,
    )
