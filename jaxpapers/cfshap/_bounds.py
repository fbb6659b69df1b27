"""Tight bounds on counterfactual Shapley values by linear programming over response functions.

When only the causal graph and the observational (and some interventional) distributions are
known, the SCM is a canonical one: each noise ``U_i`` picks a response function (a map from the
parents' values to ``X_i``), and the unknown is the joint law ``q`` of the response functions
(any law: hidden confounding is allowed). Every observed distribution is linear in ``q``:
``P(x) = sum_r q(r) 1[X(r) = x]`` and ``P(x | do(X_j = a)) = sum_r q(r) 1[X^{do}(r) = x]``.

The counterfactual Shapley value is linear in ``q`` too, once two quantities are fixed at their
observed values: the abduction normaliser ``P(x)`` and the law of the reference values ``X'``
(the observational law). With both fixed,
``phi_i(q) = c_i^T q`` and the tight bounds are ``min / max c_i^T q`` over
``{q >= 0 : A q = b}`` (Balke and Pearl 1997 for the average causal effect). The coefficients
``c_i`` are the exact Jacobian of ``q -> phi(q)`` (the map is linear), computed in float64; the
programmes are solved by ``scipy.optimize.linprog`` (HiGHS).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpapers.cfshap._games import CounterfactualGame, tabulate
from jaxpapers.cfshap._scm import DiscreteSCM, Worlds, response_functions
from jaxpapers.cfshap._shapley import shapley_values


class Bounds(NamedTuple):
    """Lower and upper bounds of each value, and whether every programme solved.

    Attributes:
      lower: ``(n,)`` lower bounds.
      upper: ``(n,)`` upper bounds.
      success: all linear programmes reached optimality.
      minimizers: ``(n, R)`` a law of the response functions attaining each lower bound (an SCM
        consistent with every given law: the bounds are tight); ``None`` where not computed.
      maximizers: ``(n, R)`` the same for the upper bounds.
    """

    lower: np.ndarray
    upper: np.ndarray
    success: bool
    minimizers: np.ndarray | None = None
    maximizers: np.ndarray | None = None


def _check_distribution(name: str, p, size: int) -> np.ndarray:
    p = np.asarray(p, np.float64)
    if p.shape != (size,):
        raise ValueError(f"{name} has shape {p.shape}; expected ({size},)")
    if not np.all(np.isfinite(p)) or np.any(p < -1e-9) or np.any(p > 1 + 1e-9):
        raise ValueError(f"{name} has entries outside [0, 1]")
    if abs(p.sum() - 1.0) > 1e-6:
        raise ValueError(f"{name} sums to {p.sum():.6g}; expected 1")
    return p


def _indicator(scm: DiscreteSCM, mask, values) -> np.ndarray:
    """``A[k, r] = 1[X^{do(mask=values)}(r) = config k]``."""
    xs = jax.vmap(lambda u: scm.solve(u, values, mask))(scm.noise_configs())
    idx = np.asarray(jax.vmap(scm.config_index)(xs))
    A = np.zeros((scm.num_configs, scm.num_noise))
    A[idx, np.arange(scm.num_noise)] = 1.0
    return A


def _solve_bounds(c: np.ndarray, A: np.ndarray, b: np.ndarray) -> Bounds:
    from scipy.optimize import linprog

    lo, hi, ok = [], [], True
    arg = {1.0: [], -1.0: []}
    for ci in c:
        for sign, out in ((1.0, lo), (-1.0, hi)):
            res = linprog(sign * ci, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
            ok &= bool(res.status == 0)
            out.append(sign * res.fun if res.status == 0 else np.nan)
            arg[sign].append(res.x if res.status == 0 else np.full(A.shape[1], np.nan))
    return Bounds(np.array(lo), np.array(hi), ok, np.array(arg[1.0]), np.array(arg[-1.0]))


def cf_shapley_bounds(
    structure: DiscreteSCM,
    model: Callable[[Array], Array],
    x: Array,
    observational: Float[Array, " K"],
    *,
    interventional: Mapping[tuple[int, int], Array] | None = None,
) -> Bounds:
    """Tight bounds on the counterfactual Shapley values of unit ``x``.

    Args:
      structure: a canonical :class:`DiscreteSCM` fixing the graph and the allowed response
        functions (``DiscreteSCM.canonical``; ``monotone=True`` adds monotonicity); its noise law
        is ignored.
      model: ``(n,) int -> scalar``.
      x: the explained unit, ``(n,)`` ints with ``P(x) > 0``.
      observational: ``(K,)`` observed joint law of the variables, row-major over the cards.
      interventional: optional ``{(node, value): (K,) law under do(X_node = value)}``.

    Returns:
      :class:`Bounds` with ``(n,)`` lower and upper bounds.

    Examples:
      >>> import jax.numpy as jnp
      >>> s = DiscreteSCM.canonical((2, 2), ((), (0,)))
      >>> b = cf_shapley_bounds(s, lambda x: x[1].astype(float), jnp.array([1, 1]),
      ...                       jnp.array([0.3, 0.2, 0.1, 0.4]))
      >>> bool(b.success and (b.lower <= b.upper + 1e-9).all())
      True
    """
    K = structure.num_configs
    p_obs = _check_distribution("observational", observational, K)
    xi = np.asarray(x)
    if xi.shape != (structure.num_features,):
        raise ValueError(f"x has shape {xi.shape}; expected ({structure.num_features},)")
    n = structure.num_features
    with jax.enable_x64(True):
        p_x = float(p_obs[int(structure.config_index(jnp.asarray(xi, jnp.int32)))])
        if p_x <= 0:
            raise ValueError(f"x={xi.tolist()} has observed probability 0; nothing to explain")
        table = tabulate(structure, model)
        table = type(table)(jnp.asarray(table.table, jnp.float64), table.strides)
        configs = structure.value_configs()
        reference = Worlds(configs, jnp.asarray(p_obs), configs)

        def phi(q):
            scm = DiscreteSCM(structure.cards, structure.parents, structure.functions, q)
            factual = scm.abduct(jnp.asarray(xi, jnp.int32), prob_x=p_x)
            game = CounterfactualGame(scm, table, jnp.asarray(xi, jnp.int32), factual, reference)
            return shapley_values(game)

        q0 = jnp.full(structure.num_noise, 1.0 / structure.num_noise, jnp.float64)
        c = np.asarray(jax.jacrev(phi)(q0), np.float64)
        no_mask = jnp.zeros(n, bool)
        rows = [_indicator(structure, no_mask, jnp.zeros(n, jnp.int32))]
        rhs = [p_obs]
        for (node, value), dist in (interventional or {}).items():
            if not (0 <= node < n and 0 <= value < structure.cards[node]):
                raise ValueError(f"interventional key {(node, value)} names no node/value")
            rows.append(
                _indicator(
                    structure,
                    no_mask.at[node].set(True),
                    jnp.zeros(n, jnp.int32).at[node].set(value),
                )
            )
            rhs.append(_check_distribution(f"interventional[{(node, value)}]", dist, K))
    return _solve_bounds(c, np.concatenate(rows), np.concatenate(rhs))


def balke_pearl_bounds(p_xy_given_z: Float[Array, "2 2 2"]) -> tuple[float, float]:
    """Tight bounds on the average causal effect ``P(Y_1 = 1) - P(Y_0 = 1)`` with a binary
    instrument ``Z -> X -> Y`` and arbitrary confounding of ``X`` and ``Y`` (Balke and Pearl 1997).

    Args:
      p_xy_given_z: ``[z, x, y]`` table of ``P(X = x, Y = y | Z = z)``.

    Returns:
      ``(lower, upper)``.

    Examples:
      >>> import numpy as np
      >>> p = np.zeros((2, 2, 2)); p[0, 0] = [0.0064, 0.9936]; p[1, 0] = [0.0028, 0.1972]
      >>> p[1, 1] = [0.001, 0.799]
      >>> [round(v, 4) for v in balke_pearl_bounds(p)]
      [-0.1946, 0.0054]
    """
    p = np.asarray(p_xy_given_z, np.float64)
    if p.shape != (2, 2, 2):
        raise ValueError(f"p_xy_given_z has shape {p.shape}; expected (2, 2, 2) as [z, x, y]")
    for z in range(2):
        _check_distribution(f"p_xy_given_z[{z}]", p[z].reshape(-1), 4)
    rx = response_functions(2, (2,))  # X = rx[z]
    ry = response_functions(2, (2,))  # Y = ry[x]
    A = np.zeros((8, 16))
    c = np.zeros(16)
    for a in range(4):
        for b in range(4):
            col = 4 * a + b
            c[col] = ry[b, 1] - ry[b, 0]
            for z in range(2):
                xv = rx[a, z]
                A[4 * z + 2 * xv + ry[b, xv], col] = 1.0
    out = _solve_bounds(c[None], A, p.reshape(-1))
    return float(out.lower[0]), float(out.upper[0])
