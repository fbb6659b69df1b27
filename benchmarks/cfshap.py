"""P10 benchmark: exact counterfactual Shapley values over 2^n coalitions, and the LP bounds.

Exact values: a random linear-Gaussian SCM with n features (edge probability 0.4), a nonlinear
model, 32 background draws; all 2^n coalitions are evaluated in batches of 4096 (``lax.map``) and
aggregated with the (n, 2^n) Shapley weight matrix. Bounds: the three-variable binary graph
X0 -> X1 -> X2, X0 -> X2 with observational and all single-variable interventional laws
(6 programmes, 128 response-function combinations, HiGHS).

Peer rows: shap's ``ExactExplainer`` and ``PermutationExplainer`` against our
:func:`shapley_values` / :func:`shapley_sampling` of the same game. shap's explainers with an
``Independent`` masker compute *interventional* SHAP, ``v(S) = mean_b f(x_S, b_{-S})`` over the
background rows ``b``: our :class:`InterventionalGame` with the background as uniformly weighted
worlds. The model is a polynomial (linear terms, every pair, ``n / 2`` random triples), so the
values have a closed form (each monomial is a game among its own variables; ``_closed_form``)
that both sides are checked against; shap's antithetic pairs are exact for games with pairwise
interactions only, hence the triples. 64 explained points, 32 background rows; shap runs its
float64 NumPy model, ours float32 under ``jit`` + ``vmap`` over the points. Permutation sampling
at equal orders: shap's ``max_evals = P (2 n + 1)`` gives ``P`` antithetic pairs (``2 P``
orders), ours ``2 P`` independent orders.
"""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.cfshap import (
    DiscreteSCM,
    InterventionalGame,
    LinearGaussianSCM,
    TableModel,
    Worlds,
    cf_shapley_bounds,
    counterfactual_game,
    shapley_sampling,
    shapley_values,
)
from jaxpapers.core.bench import bench_main, median_time, paired_time_ratio, row

EXPLAINED = 64
BACKGROUND = 32
PERM_PAIRS = 8  # shap's antithetic pairs; ours draws 2 * PERM_PAIRS independent orders


def _model(v):
    return jnp.tanh(v[0] * v[-1]) + jnp.sum(jnp.sin(v))


def _exact_time(n: int) -> float:
    kw, kb, kx = jax.random.split(jax.random.key(n), 3)
    w = jnp.tril(jax.random.normal(kw, (n, n)) * 0.5, k=-1) * (jax.random.uniform(kb, (n, n)) < 0.4)
    scm = LinearGaussianSCM(w)
    game = counterfactual_game(
        scm, _model, scm.sample(1, key=kx)[0], background=scm.sample(32, key=kb)
    )
    return median_time(lambda g: shapley_values(g).block_until_ready(), game, repeats=3)


def _lp_time() -> float:
    parents = ((), (0,), (0, 1))
    with jax.enable_x64(True):
        mono = DiscreteSCM.canonical((2, 2, 2), parents, monotone=True)
        q = jax.random.dirichlet(jax.random.key(0), jnp.full(mono.num_noise, 0.3))
        truth = DiscreteSCM(mono.cards, parents, mono.functions, q)
        full = DiscreteSCM.canonical((2, 2, 2), parents)
        model = TableModel(jax.random.uniform(jax.random.key(1), (8,)), (4, 2, 1))
        x = jnp.array([1, 1, 1])
        obs = truth.observational()
        ints = {(i, a): truth.interventional(i, a) for i in range(3) for a in range(2)}
        return median_time(
            lambda: cf_shapley_bounds(full, model, x, obs, interventional=ints), repeats=3
        )


def _polynomial_problem(n: int, seed: int):
    """``(terms, background, X)``: monomials ``(coefficient, variables)`` of the model and its
    inputs, float64. Linear terms, every pair (``/ sqrt(n)``) and ``n / 2`` random triples."""
    rng = np.random.default_rng(seed)
    terms = [(float(c), (i,)) for i, c in enumerate(rng.normal(size=n))]
    terms += [(float(rng.normal()) / np.sqrt(n), (i, j)) for i in range(n) for j in range(i + 1, n)]
    for _ in range(n // 2):
        terms.append((float(rng.normal()), tuple(sorted(rng.choice(n, 3, replace=False)))))
    return terms, rng.normal(size=(BACKGROUND, n)), rng.normal(size=(EXPLAINED, n))


def _model_arrays(terms, n: int):
    """The model as ``f(x) = x . lin + x^T Q x + sum_k c_k prod_{l in T_k} x_l``."""
    lin, Q, cubic = np.zeros(n), np.zeros((n, n)), []
    for c, v in terms:
        if len(v) == 1:
            lin[v[0]] += c
        elif len(v) == 2:
            Q[v] += c
        else:
            cubic.append((c, *v))
    cubic = np.array(cubic, np.float64).reshape(-1, 4)
    return lin, Q, cubic[:, 0], cubic[:, 1:].astype(np.int64)


def _closed_form(terms, background, X) -> np.ndarray:
    """Interventional Shapley values of a polynomial model over an empirical background.

    Shapley values add over the model's terms, and a monomial ``c prod_{l in T} x_l`` is a game
    among its own variables ``T`` only (the others are null players): ``v(R) = c mean_b
    prod_{l in T} (x_l if l in R else b_l)``, whose Shapley values are enumerated over the
    ``2^|T|`` subsets with the usual weights ``|R|! (|T| - |R| - 1)! / |T|!``.
    """
    phi = np.zeros_like(X)
    for c, T in terms:
        k = len(T)

        def v(R, T=T, c=c):
            prod = np.ones((len(X), len(background)))
            for u in T:
                prod = prod * (X[:, u : u + 1] if u in R else background[None, :, u])
            return c * prod.mean(1)

        for i in T:
            rest = [u for u in T if u != i]
            for r in range(k):
                w = math.factorial(r) * math.factorial(k - r - 1) / math.factorial(k)
                for R in itertools.combinations(rest, r):
                    phi[:, i] += w * (v((*R, i)) - v(R))
    return phi


def _shap_rows(quick: bool) -> list[dict]:
    """shap's Exact (n = 10) and Permutation (n = 20) explainers against ours (module doc)."""
    import shap

    rows = []
    repeats = 5 if quick else 11
    for n, kind in ((10, "exact"), (20, "permutation")):
        terms, bg, X = _polynomial_problem(n, seed=n)
        truth = _closed_form(terms, bg, X)
        lin, Q, c3, idx = _model_arrays(terms, n)

        def peer_model(Z, lin=lin, Q=Q, c3=c3, idx=idx):
            return Z @ lin + np.einsum("bi,ij,bj->b", Z, Q, Z) + np.prod(Z[:, idx], -1) @ c3

        lj, Qj, cj = (jnp.asarray(t, jnp.float32) for t in (lin, Q, c3))

        def model(v, lj=lj, Qj=Qj, cj=cj, idx=idx):
            return v @ lj + v @ Qj @ v + jnp.prod(v[idx], -1) @ cj

        bgj = jnp.asarray(bg, jnp.float32)
        ref = Worlds(bgj, jnp.full(BACKGROUND, 1.0 / BACKGROUND), bgj)
        Xj = jnp.asarray(X, jnp.float32)
        masker = shap.maskers.Independent(bg, max_samples=BACKGROUND)
        if kind == "exact":
            explainer = shap.explainers.Exact(peer_model, masker)
            peer = lambda explainer=explainer, X=X: explainer(X, silent=True).values
            ours_fn = jax.jit(
                jax.vmap(
                    lambda x, model=model, ref=ref: shapley_values(
                        InterventionalGame(model, x, ref)
                    )
                )
            )
            ours = lambda ours_fn=ours_fn, Xj=Xj: ours_fn(Xj)
        else:
            explainer = shap.explainers.Permutation(peer_model, masker, seed=0)
            evals = PERM_PAIRS * (2 * n + 1)
            peer = lambda explainer=explainer, evals=evals, X=X: (
                explainer(X, max_evals=evals, silent=True).values
            )
            keys = jax.random.split(jax.random.key(0), EXPLAINED)
            ours_fn = jax.jit(
                jax.vmap(
                    lambda x, k, model=model, ref=ref: (
                        shapley_sampling(
                            InterventionalGame(model, x, ref),
                            key=k,
                            num_permutations=2 * PERM_PAIRS,
                        ).values
                    )
                )
            )
            ours = lambda ours_fn=ours_fn, Xj=Xj, keys=keys: ours_fn(Xj, keys)
        m = paired_time_ratio(peer, ours, repeats=repeats)
        peer_vals = np.asarray(peer(), np.float64)
        our_vals = np.asarray(ours(), np.float64)
        scale = float(np.abs(truth).max())
        name = f"shap_{kind}_over_ours_time_n{n}"
        rows.append(
            row(
                name,
                "ratio",
                m["ratio"],
                f"shap {kind} explainer / ours, {EXPLAINED} points, {BACKGROUND} background rows; "
                "median of ABBA-paired ratios",
                q25=m["q25"],
                q75=m["q75"],
                peer_s=m["time"],
                ours_s=m["baseline_time"],
                repeats=repeats,
            )
        )
        rows.append(
            row(
                f"shap_{kind}_vs_ours_max_abs_diff_n{n}",
                "agreement",
                float(np.abs(peer_vals - our_vals).max()),
                f"max |shap - ours| over {EXPLAINED} x {n} values (largest |value| {scale:.3g})",
            )
        )
        for side, vals in (("shap", peer_vals), ("ours", our_vals)):
            err = vals - truth
            rows.append(
                row(
                    f"{side}_{kind}_max_abs_error_vs_closed_form_n{n}",
                    "agreement",
                    float(np.abs(err).max()),
                    "max |value - closed form|",
                    rms=float(np.sqrt((err**2).mean())),
                )
            )
        print(rows[-4:], flush=True)
    return rows


def run(quick: bool = True) -> list[dict]:
    rows = _shap_rows(quick)
    for n in (8, 12, 16) if quick else (8, 12, 16, 18):
        rows.append(row(f"cfshap_exact_features_{n}_time", "time", _exact_time(n), "s"))
        print(rows[-1], flush=True)
    rows.append(row("lp_bounds_time", "time", _lp_time(), "s (3 features, obs + do, 6 LPs)"))
    print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    bench_main("cfshap", run)
