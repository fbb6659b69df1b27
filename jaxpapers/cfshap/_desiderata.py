"""The four desiderata as executable checks, the witness SCMs, and every method on one unit.

The desiderata (our reading of the abstract; each is a property of the credit vector ``phi`` for
the unit ``x`` of an SCM with model ``f``; "zero" means ``|phi_i| <= tol``):

1. efficiency: ``sum_i phi_i = f(x) - E f(X)``;
2. non-causes get nothing: a variable that is neither a model input nor an ancestor of one gets
   zero credit (a correlate is not a cause);
3. indirect causes get credit: a variable whose switch to a natural value changes this unit's
   prediction through its descendants (``NTE_{{i}}(x) != 0``) gets non-zero credit, even when the
   model does not read it;
4. unit-level null: a variable on which this unit's prediction does not counterfactually depend
   in any context (``NTE_{S + i}(x) = NTE_S(x)`` for every ``S``) gets zero credit.

Witness SCMs (binary, ``X_0 -> X_1`` unless said): ``efficiency`` (three independent causes of
``f = AND``; LIME's linear surrogate misses the interaction), ``noncause`` (``f = X_0`` with a
child ``X_1``; observational SHAP credits the correlate), ``indirect`` (``X_1 = X_0 xor U``,
``f = X_1``; interventional SHAP and LIME give ``X_0`` nothing), ``unit_null``
(``X_1 = X_0 and U``, unit ``(1, 0)`` so ``U = 0``; causal, asymmetric and observational
Shapley credit ``X_0`` from population averages although it cannot matter for this unit).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from jaxpapers.cfshap._games import (
    causal_game,
    counterfactual_game,
    interventional_game,
    observational_game,
    tabulate,
)
from jaxpapers.cfshap._lime import lime_values
from jaxpapers.cfshap._scm import DiscreteSCM, ancestors, response_functions
from jaxpapers.cfshap._shapley import asymmetric_shapley_values, game_values, shapley_values

DESIDERATA = ("efficiency", "noncause_null", "indirect_credit", "unit_null")
METHODS = (
    "cf_shapley",
    "causal_shapley",
    "asymmetric_shapley",
    "interventional_shap",
    "observational_shap",
    "lime",
)


class Witness(NamedTuple):
    """One SCM, model and explained unit."""

    name: str
    scm: DiscreteSCM
    model: Callable[[Array], Array]
    x: Array


def _bern(p: float) -> jnp.ndarray:
    return jnp.array([1.0 - p, p])


def _root():
    return jnp.array([[0], [1]])


def witnesses(key: Array) -> list[Witness]:
    """The four witness SCMs with noise probabilities drawn from ``key``."""
    p = np.asarray(jax.random.uniform(key, (6,), minval=0.2, maxval=0.4))
    xor = jnp.array([[0, 1], [1, 0]])  # U = 0: copy the parent, U = 1: flip it
    gate = jnp.array([[0, 0], [0, 1]])  # U = 0: constant 0, U = 1: copy the parent
    eff = DiscreteSCM.markovian(
        (2, 2, 2), ((), (), ()), (_root(),) * 3, (_bern(0.5), _bern(0.5), _bern(0.5))
    )
    noncause = DiscreteSCM.markovian((2, 2), ((), (0,)), (_root(), xor), (_bern(0.5), _bern(p[0])))
    indirect = DiscreteSCM.markovian((2, 2), ((), (0,)), (_root(), xor), (_bern(p[1]), _bern(p[2])))
    unit_null = DiscreteSCM.markovian(
        (2, 2), ((), (0,)), (_root(), gate), (_bern(1 - p[3]), _bern(0.5 + p[4]))
    )
    return [
        Witness("efficiency", eff, lambda x: (x[0] * x[1] * x[2]).astype(float), jnp.ones(3, int)),
        Witness("noncause", noncause, lambda x: x[0].astype(float), jnp.array([1, 1])),
        Witness("indirect", indirect, lambda x: x[1].astype(float), jnp.array([1, 1])),
        Witness("unit_null", unit_null, lambda x: x[1].astype(float), jnp.array([1, 0])),
    ]


def attributions(method: str, scm: DiscreteSCM, model, x, *, key: Array, lime_samples: int = 20000):
    """Credits of every method on one unit of a discrete SCM."""
    if method == "cf_shapley":
        return shapley_values(counterfactual_game(scm, model, x))
    if method == "causal_shapley":
        return shapley_values(causal_game(scm, model, x))
    if method == "asymmetric_shapley":
        return asymmetric_shapley_values(observational_game(scm, model, x), scm.parents)
    if method == "interventional_shap":
        return shapley_values(interventional_game(scm, model, x))
    if method == "observational_shap":
        return shapley_values(observational_game(scm, model, x))
    if method == "lime":
        background = scm.sample(key, 4096)
        return lime_values(tabulate(scm, model), x, background, key=key, num_samples=lime_samples)
    raise ValueError(f"method={method!r}; expected one of {METHODS}")


def model_inputs(scm: DiscreteSCM, model) -> set[int]:
    """Variables the model's output depends on."""
    table = np.asarray(tabulate(scm, model).table).reshape(scm.cards)
    return {i for i in range(scm.num_features) if np.ptp(table, axis=i).max() > 0}


def check_desiderata(phi, scm: DiscreteSCM, model, x, *, tol: float = 0.03) -> dict[str, bool]:
    """Which of the four desiderata the credit vector ``phi`` satisfies on this unit."""
    phi = np.asarray(phi, np.float64)
    n = scm.num_features
    table = tabulate(scm, model)
    fx = float(table(jnp.asarray(x)))
    mean_f = float(scm.observational() @ table.table)
    inputs = model_inputs(scm, model)
    relevant = inputs | {a for i in inputs for a in ancestors(scm.parents, i)}
    v = np.asarray(game_values(counterfactual_game(scm, model, x)), np.float64)
    idx = np.arange(2**n)
    ok = {"efficiency": abs(phi.sum() - (fx - mean_f)) <= tol}
    ok["noncause_null"] = all(abs(phi[i]) <= tol for i in range(n) if i not in relevant)
    ok["indirect_credit"] = all(
        abs(phi[i]) > tol for i in range(n) if i not in inputs and abs(v[1 << i]) > tol
    )
    ok["unit_null"] = all(
        abs(phi[i]) <= tol for i in range(n) if np.all(np.abs(v[idx | (1 << i)] - v[idx]) <= 1e-6)
    )
    return ok


def desiderata_table(key: Array, *, lime_samples: int = 20000) -> dict[str, dict[str, bool]]:
    """For every method, whether it satisfies each desideratum on every witness."""
    wk, lk = jax.random.split(key)
    table = {m: dict.fromkeys(DESIDERATA, True) for m in METHODS}
    for w in witnesses(wk):
        for m in METHODS:
            phi = attributions(m, w.scm, w.model, w.x, key=lk, lime_samples=lime_samples)
            for d, holds in check_desiderata(phi, w.scm, w.model, w.x).items():
                table[m][d] &= bool(holds)
    return table


def equivalent_pair(key: Array) -> tuple[DiscreteSCM, DiscreteSCM]:
    """Two SCMs with one observational law and opposite arrows (``X_0 -> X_1``, ``X_1 -> X_0``).

    Any method that reads only the observational law gives both the same credits; the
    desiderata ask for different ones (the impossibility argument's witness).
    """
    a, e = np.asarray(jax.random.uniform(key, (2,), minval=0.2, maxval=0.4))
    xor = jnp.array([[0, 1], [1, 0]])
    forward = DiscreteSCM.markovian((2, 2), ((), (0,)), (_root(), xor), (_bern(a), _bern(e)))
    joint = np.asarray(forward.observational(), np.float64).reshape(2, 2)  # [x0, x1]
    p1 = joint.sum(0)
    b0, b1 = joint[1, 0] / p1[0], joint[1, 1] / p1[1]  # P(X0 = 1 | X1 = x1)
    table = response_functions(2, (2,))  # rows (r(0), r(1))
    q = np.array([(b1 if r[1] else 1 - b1) * (b0 if r[0] else 1 - b0) for r in table])
    backward = DiscreteSCM.markovian(
        (2, 2), ((1,), ()), (table, _root()), (jnp.asarray(q), jnp.asarray(p1))
    )
    return forward, backward
