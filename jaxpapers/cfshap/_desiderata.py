"""The four desiderata as executable checks, the witness SCMs, and every method on one unit.

The desiderata (our reading of the abstract; each is a property of the credit vector ``phi`` for
the unit ``x`` of an SCM with model ``f``; "zero" means ``|phi_i| <= tol``). Each is defined
from the SCM, the model and the unit alone, never from the coalition game that an attribution
method averages (the counterfactuals are enumerated by a float64 NumPy solver written apart from
``_games.py``), so no method passes one by construction:

1. efficiency: ``sum_i phi_i = f(x) - E f(X)``;
2. non-causes get nothing: a variable that is neither a model input nor an ancestor of one gets
   zero credit (a correlate is not a cause);
3. counterfactual credit: a variable whose change alone would have changed this unit's
   prediction (``effect(i) = E_{u|x} E_{a ~ P(X_i)} |f(X^{do(X_i = a)}(u)) - f(x)| > tol``, its
   descendants responding, the unit keeping its own noise) and whose counterfactual changes all
   push the prediction one way (sign-consistent, direction ``s``: in every world ``u``
   consistent with ``x``, under every intervention ``do(X_S = a_S)`` on the other variables,
   ``s (f(X^{do(X_S = a_S)}(u)) - f(X^{do(X_S = a_S, X_i = b)}(u))) >= 0`` for every value ``b``)
   gets credit of that sign and at least its share, ``s phi_i >= effect(i) / n - tol``, even
   when the model does not read it (an indirect cause);
4. counterfactual null: a variable that cannot change this unit's prediction (no value of it
   changes ``f`` in any world consistent with ``x``, under any intervention on any set of the
   other variables) gets zero credit.

Why counterfactual Shapley values satisfy (3): each marginal contribution of ``X_i`` to the
natural-total-effect game, ``NTE_{S+i} - NTE_S = E_{u|x} E_{x'} [f(X^{do(X_S = x'_S)}(u)) -
f(X^{do(X_S = x'_S, X_i = x'_i)}(u))]``, averages differences that sign-consistency makes all of
sign ``s``, and the empty coalition's one is ``s effect(i)`` (with ``S`` empty the unit keeps
``f(x)``); its Shapley weight is ``1/n``, so ``s phi_i >= effect(i) / n``. Without
sign-consistency no such guarantee exists: a variable that raises the prediction in some worlds
and lowers it in others can get ``phi_i ~ 0`` with a large ``effect(i)`` (a cancellation; on
random binary SCMs about 2 units in 3 have one, ``results/P10/NOTES.md``), and we do not read
the abstract as asking for non-zero credit there. (4) follows from the dummy axiom. The checks
never evaluate the game, so a wrong game or a wrong aggregation still fails them.

``tol = 0.03``: about 3 standard deviations of LIME's sampling noise at 20,000 samples (largest
per-coordinate standard deviation over the witnesses and 8 keys: 0.0105), so a zero LIME credit
is read as zero; the exact methods' float32 rounding (~1e-6) is far below it.

Witness SCMs (binary, ``X_0 -> X_1`` unless said): ``efficiency`` (three independent causes of
``f = AND``; LIME's linear surrogate misses the interaction), ``noncause`` (``f = X_0`` with a
child ``X_1``; observational SHAP credits the correlate), ``indirect`` (``X_1 = X_0 xor U``,
``f = X_1``; interventional SHAP and LIME give ``X_0`` nothing), ``unit_null``
(``X_1 = X_0 and U``, unit ``(1, 0)`` so ``U = 0``; causal, asymmetric and observational
Shapley credit ``X_0`` from population averages although it cannot matter for this unit).
The impossibility pair (:func:`equivalent_pair`) is judged by :func:`pair_desiderata`.
"""

from __future__ import annotations

import itertools
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
from jaxpapers.cfshap._shapley import asymmetric_shapley_values, shapley_values
from jaxpapers.core.checks import check_key, check_range

DESIDERATA = ("efficiency", "noncause_null", "counterfactual_credit", "counterfactual_null")
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


def witnesses(*, key: Array) -> list[Witness]:
    """The four witness SCMs with noise probabilities drawn from ``key``."""
    check_key("key", key)
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
    check_key("key", key)
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
        background = scm.sample(4096, key=key)
        return lime_values(tabulate(scm, model), x, background, key=key, num_samples=lime_samples)
    raise ValueError(f"method={method!r}; expected one of {METHODS}")


def model_inputs(scm: DiscreteSCM, model) -> set[int]:
    """Variables the model's output depends on."""
    table = np.asarray(tabulate(scm, model).table).reshape(scm.cards)
    return {i for i in range(scm.num_features) if np.ptp(table, axis=i).max() > 0}


class _Counterfactuals:
    """Abduction, action and prediction in float64 NumPy, written apart from ``_games.py``.

    It reads only the SCM's definition (``cards``, ``parents``, ``functions``, ``noise``) and
    a table of ``f`` over all joint values, so the desiderata checks share no code with the
    games that the attribution methods average (a test makes the games raise while the checks
    run).
    """

    def __init__(self, scm: DiscreteSCM, model, x) -> None:
        self.cards = tuple(scm.cards)
        self.parents = tuple(scm.parents)
        self.functions = [np.asarray(f) for f in scm.functions]
        self.n = len(self.cards)
        self.order = self._order()
        self.f = np.asarray(tabulate(scm, model).table, np.float64).reshape(self.cards)
        noise = np.asarray(scm.noise, np.float64).reshape([f.shape[0] for f in self.functions])
        self.x = tuple(int(v) for v in np.asarray(x))
        # posterior support of the noise given X = x, and the marginal law of each X_i
        self.worlds, self.marginals = [], [np.zeros(c) for c in self.cards]
        self.mean_f = 0.0
        for u in itertools.product(*(range(f.shape[0]) for f in self.functions)):
            p = float(noise[u])
            if p <= 0:
                continue
            vals = self.solve(u, {})
            self.mean_f += p * float(self.f[vals])
            for i, v in enumerate(vals):
                self.marginals[i][v] += p
            if vals == self.x:
                self.worlds.append((u, p))
        total = sum(p for _, p in self.worlds)
        if not total > 0:
            raise ValueError(f"x={list(self.x)} has probability zero under the SCM")
        self.worlds = [(u, p / total) for u, p in self.worlds]
        self.fx = float(self.f[self.x])

    def _order(self) -> list[int]:
        done: list[int] = []
        while len(done) < self.n:
            ready = set(done)
            done += [i for i in range(self.n) if i not in ready and set(self.parents[i]) <= ready]
        return done

    def solve(self, u, do: dict[int, int]) -> tuple[int, ...]:
        vals = [0] * self.n
        for i in self.order:
            if i in do:
                vals[i] = do[i]
                continue
            idx = 0
            for j in self.parents[i]:
                idx = idx * self.cards[j] + vals[j]
            vals[i] = int(self.functions[i][u[i], idx])
        return tuple(vals)

    def prediction(self, u, do: dict[int, int]) -> float:
        return float(self.f[self.solve(u, do)])

    def effect(self, i: int) -> float:
        """``E_{u|x} E_{a ~ P(X_i)} |f(X^{do(X_i = a)}(u)) - f(x)|``: how much this unit's
        prediction moves when ``X_i`` alone takes another natural value (descendants respond)."""
        return sum(
            p * q * abs(self.prediction(u, {i: a}) - self.fx)
            for u, p in self.worlds
            for a, q in enumerate(self.marginals[i])
            if q > 0
        )

    def direction(self, i: int, tol: float = 1e-9) -> int | None:
        """``s`` in ``{+1, -1}`` when every counterfactual change of ``X_i`` pushes this unit's
        prediction one way: ``s (f(X^{do(S)}(u)) - f(X^{do(S, X_i = b)}(u))) >= 0`` in every
        abduced world, under every intervention ``do(S)`` on any set of the other variables, for
        every value ``b`` (and some difference is non-zero); ``0`` when none is; ``None`` when
        the differences take both signs (mixed)."""
        others = [j for j in range(self.n) if j != i]
        signs = set()
        for r in range(len(others) + 1):
            for subset in itertools.combinations(others, r):
                for values in itertools.product(*(range(self.cards[j]) for j in subset)):
                    do = dict(zip(subset, values, strict=True))
                    for u, _ in self.worlds:
                        base = self.prediction(u, do)
                        for b in range(self.cards[i]):
                            d = base - self.prediction(u, {**do, i: b})
                            if abs(d) > tol:
                                signs.add(1 if d > 0 else -1)
        if len(signs) > 1:
            return None
        return signs.pop() if signs else 0

    def null(self, i: int, tol: float = 1e-9) -> bool:
        """Whether setting ``X_i`` to any value never changes this unit's prediction, in any
        abduced world and under any intervention on any set of the other variables."""
        others = [j for j in range(self.n) if j != i]
        for r in range(len(others) + 1):
            for subset in itertools.combinations(others, r):
                for values in itertools.product(*(range(self.cards[j]) for j in subset)):
                    do = dict(zip(subset, values, strict=True))
                    for u, _ in self.worlds:
                        base = self.prediction(u, do)
                        for a in range(self.cards[i]):
                            if abs(self.prediction(u, {**do, i: a}) - base) > tol:
                                return False
        return True


def check_desiderata(phi, scm: DiscreteSCM, model, x, *, tol: float = 0.03) -> dict[str, bool]:
    """Which of the four desiderata the credit vector ``phi`` satisfies on this unit.

    Every criterion is computed from the SCM, the model and the unit alone (graph, observational
    law and brute-force counterfactuals in float64 NumPy), never from a coalition game, so no
    attribution method satisfies one by construction.
    """
    phi = np.asarray(phi, np.float64)
    n = scm.num_features
    if phi.shape != (n,):
        raise ValueError(f"phi has shape {phi.shape}; expected ({n},)")
    check_range("tol", tol, 0.0)
    cf = _Counterfactuals(scm, model, x)
    inputs = model_inputs(scm, model)
    relevant = inputs | {a for i in inputs for a in ancestors(scm.parents, i)}
    ok = {"efficiency": abs(phi.sum() - (cf.fx - cf.mean_f)) <= tol}
    ok["noncause_null"] = all(abs(phi[i]) <= tol for i in range(n) if i not in relevant)
    ok["counterfactual_credit"] = all(
        phi[i] * d >= cf.effect(i) / n - tol
        for i in range(n)
        if cf.effect(i) > tol and (d := cf.direction(i))
    )
    ok["counterfactual_null"] = all(abs(phi[i]) <= tol for i in range(n) if cf.null(i))
    return ok


def desiderata_table(*, key: Array, lime_samples: int = 20000) -> dict[str, dict[str, bool]]:
    """For every method, whether it satisfies each desideratum on every witness."""
    check_key("key", key)
    wk, lk = jax.random.split(key)
    table = {m: dict.fromkeys(DESIDERATA, True) for m in METHODS}
    for w in witnesses(key=wk):
        for m in METHODS:
            phi = attributions(m, w.scm, w.model, w.x, key=lk, lime_samples=lime_samples)
            for d, holds in check_desiderata(phi, w.scm, w.model, w.x).items():
                table[m][d] &= bool(holds)
    return table


def equivalent_pair(*, key: Array) -> tuple[DiscreteSCM, DiscreteSCM]:
    """Two SCMs with one observational law and opposite arrows (``X_0 -> X_1``, ``X_1 -> X_0``).

    Any method that reads only the observational law gives both the same credits; the
    desiderata ask for different ones (the impossibility argument's witness).
    """
    check_key("key", key)
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


#: Methods that read only the observational law of ``X`` (and the model), never the SCM.
OBSERVATIONAL_METHODS = ("interventional_shap", "observational_shap", "lime")


class PairResult(NamedTuple):
    """Every method on the impossibility pair of :func:`equivalent_pair`.

    Attributes:
      satisfied: ``{method: number of desiderata satisfied, summed over both SCMs (of 8)}``.
      credits: ``{method: (credits under the forward SCM, under the backward SCM)}``.
      law_gap: largest difference between the two SCMs' observational laws.
    """

    satisfied: dict[str, int]
    credits: dict[str, tuple[np.ndarray, np.ndarray]]
    law_gap: float


def pair_desiderata(*, key: Array, lime_samples: int = 20000) -> PairResult:
    """The desiderata of every method on the pair of :func:`equivalent_pair` (model
    ``f = X_1``, unit ``(1, 1)``).

    Under the forward SCM ``X_0`` causes the prediction (counterfactual credit asks for
    non-zero credit); under the backward SCM it is a child of ``X_1`` that the model does not
    read (a non-cause: zero credit). The two SCMs share their observational law, so a method
    that reads only that law gives both the same credits and breaks a desideratum on one of
    them: the Explanatory Impossibility Theorem on its smallest witness.
    """
    check_key("key", key)
    pk, lk = jax.random.split(key)
    forward, backward = equivalent_pair(key=pk)
    x = jnp.array([1, 1])

    def model(v):
        return v[1].astype(float)

    law_gap = float(
        np.max(
            np.abs(
                np.asarray(forward.observational(), np.float64)
                - np.asarray(backward.observational(), np.float64)
            )
        )
    )
    satisfied, credits = {}, {}
    for m in METHODS:
        phis = []
        count = 0
        for scm in (forward, backward):
            phi = np.asarray(attributions(m, scm, model, x, key=lk, lime_samples=lime_samples))
            phis.append(phi)
            count += sum(check_desiderata(phi, scm, model, x).values())
        satisfied[m] = int(count)
        credits[m] = (phis[0], phis[1])
    return PairResult(satisfied, credits, law_gap)
