"""Measurements behind the P10 experiments (one run function per experiment)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.cfshap import (
    DESIDERATA,
    METHODS,
    OBSERVATIONAL_METHODS,
    DiscreteSCM,
    LinearGaussianSCM,
    TableModel,
    balke_pearl_bounds,
    cf_shapley_bounds,
    counterfactual_game,
    desiderata_table,
    pair_desiderata,
    shapley_sampling,
    shapley_values,
)
from jaxpapers.cfshap._desiderata import _Counterfactuals, attributions, check_desiderata
from jaxpapers.core.experiment import Context, Outcome


class Config(NamedTuple):
    """Every size-dependent setting of the P10 experiments (one per run size, ``SIZES``)."""

    lime_samples: int
    scms: int
    concentration: float
    features: int
    background: int
    permutations: tuple[int, ...]
    replicates: int
    units: int


#: ``tol`` of the desiderata checks (see :mod:`jaxpapers.cfshap._desiderata`).
CHECK_TOL = 0.03

#: Vitamin A supplementation trial (Sommer et al.), as tabulated by Balke and Pearl (1997):
#: ``[z, x, y]`` = P(X = x, Y = y | Z = z); the published ACE bounds are [-0.1946, 0.0054].
VITAMIN_A = np.array([[[0.0064, 0.9936], [0.0, 0.0]], [[0.0028, 0.1972], [0.001, 0.799]]])
VITAMIN_A_BOUNDS = (-0.1946, 0.0054)
GRAPH = ((), (0,), (0, 1))  # X0 -> X1 -> X2 and X0 -> X2, binary


def sanity(ctx: Context, config: Config) -> Outcome:
    """Closed forms of the linear chain, the Balke-Pearl bounds, and an identified SCM."""
    chain, bp, ident = [], [], []
    lo, hi = balke_pearl_bounds(VITAMIN_A)
    for seed in ctx.seed_list:
        k1, k2 = jax.random.split(jax.random.key(seed))
        alpha, beta = np.asarray(jax.random.uniform(k1, (2,), minval=-2.0, maxval=2.0))
        x = jax.random.normal(k2, (2,))
        scm = LinearGaussianSCM(jnp.array([[0.0, 0.0], [alpha, 0.0]]))

        def model(v, beta=beta):
            return beta * v[1]

        phi = shapley_values(counterfactual_game(scm, model, x, background=jnp.zeros((1, 2))))
        want = np.array([alpha * beta * x[0] / 2, beta * (x[1] - alpha * x[0] / 2)])
        chain.append(float(np.abs(np.asarray(phi) - want).max()))
        bp.append(max(abs(lo - VITAMIN_A_BOUNDS[0]), abs(hi - VITAMIN_A_BOUNDS[1])))
        p = np.asarray(jax.random.uniform(k1, (2,), minval=0.1, maxval=0.9))
        xor = DiscreteSCM.markovian(
            (2, 2),
            ((), (0,)),
            (jnp.array([[0], [1]]), jnp.array([[0, 1], [1, 0]])),
            (jnp.array([1 - p[0], p[0]]), jnp.array([1 - p[1], p[1]])),
        )
        b = cf_shapley_bounds(xor, _xor_model, jnp.array([1, 1]), xor.observational())
        ident.append(float(np.max(b.upper - b.lower)))
    return Outcome(
        {"chain_closed_form_error": chain, "balke_pearl_error": bp, "identified_width": ident},
        {"balke_pearl_bounds": [lo, hi], "published": VITAMIN_A_BOUNDS},
    )


def _xor_model(v):
    return v[1].astype(float)


def desiderata(ctx: Context, config: Config) -> Outcome:
    """Number of desiderata each method satisfies on the witness SCMs (noise drawn per seed)."""
    counts = {m: [] for m in METHODS}
    tables = []
    for seed in ctx.seed_list:
        table = desiderata_table(key=jax.random.key(seed), lime_samples=config.lime_samples)
        tables.append(table)
        for m in METHODS:
            counts[m].append(sum(table[m][d] for d in DESIDERATA))
    return Outcome(counts, {"tables": tables})


#: Exact attribution methods judged on the random units (LIME's 20,000 samples per unit would
#: cost more than the rest of the paper's quick run).
EXACT_METHODS = tuple(m for m in METHODS if m != "lime")


def random_desiderata(ctx: Context, config: Config) -> Outcome:
    """The four desiderata on ``config.units`` random units per seed, drawn from the family of
    ``bounds``' true SCMs (graph ``GRAPH``, monotone response functions,
    Dirichlet(``config.concentration``) noise law, a unit sampled from the SCM). Even units get
    ``bounds``' uniform random table model; odd units a random monotone one
    (:func:`_random_monotone_model`), because with a non-monotone model almost every variable's
    counterfactual changes take both signs and desideratum 3 then asks nothing (2 sign-consistent
    variables in 30 such units against 43 in 30 monotone ones, 2026-12-04). Per method and seed:
    the number of units on which it fails at least one desideratum. The row
    ``cf_shapley nonzero-credit failures`` counts the units where the plain non-zero-credit
    reading (``effect(i) > tol`` asks ``|phi_i| > tol``, without sign-consistency) fails for
    counterfactual Shapley values: reported, not judged."""
    structure = DiscreteSCM.canonical((2, 2, 2), GRAPH, monotone=True)
    rows = {m: [] for m in EXACT_METHODS}
    rows["cf_shapley nonzero-credit failures"] = []
    per_desideratum = {m: dict.fromkeys(DESIDERATA, 0) for m in EXACT_METHODS}
    mixed = judged = 0
    for seed in ctx.seed_list:
        fails = dict.fromkeys(EXACT_METHODS, 0)
        plain_fails = 0
        for j in range(config.units):
            kq, kf, kx = jax.random.split(jax.random.fold_in(jax.random.key(10_000 + seed), j), 3)
            truth = _random_truth(kq, structure, config.concentration)
            model = _random_model(kf) if j % 2 == 0 else _random_monotone_model(kf)
            x = truth.sample(1, key=kx)[0]
            cf = _Counterfactuals(truth, model, x)
            effects = [cf.effect(i) for i in range(3)]
            directions = [cf.direction(i) for i in range(3)]
            pairs = list(zip(effects, directions, strict=True))
            mixed += sum(e > CHECK_TOL and d is None for e, d in pairs)
            judged += sum(e > CHECK_TOL and bool(d) for e, d in pairs)
            for m in EXACT_METHODS:
                phi = np.asarray(attributions(m, truth, model, x, key=kx), np.float64)
                ok = check_desiderata(phi, truth, model, x, tol=CHECK_TOL)
                fails[m] += int(not all(ok.values()))
                for d, holds in ok.items():
                    per_desideratum[m][d] += int(not holds)
                if m == "cf_shapley":
                    plain_fails += int(
                        any(
                            e > CHECK_TOL and abs(phi[i]) <= CHECK_TOL
                            for i, e in enumerate(effects)
                        )
                    )
        for m in EXACT_METHODS:
            rows[m].append(float(fails[m]))
        rows["cf_shapley nonzero-credit failures"].append(float(plain_fails))
    return Outcome(
        rows,
        {
            "units_per_seed": config.units,
            "failures per desideratum (all seeds)": per_desideratum,
            "variables judged by desideratum 3 (sign-consistent, effect > tol)": int(judged),
            "variables with effect > tol and mixed signs, not judged": int(mixed),
        },
    )


def impossibility(ctx: Context, config: Config) -> Outcome:
    """Every method on the equivalent pair (drawn per seed): desiderata satisfied on both."""
    rows = {m: [] for m in ("cf_shapley", *OBSERVATIONAL_METHODS)}
    rows["observational law gap"] = []
    credits = []
    for seed in ctx.seed_list:
        res = pair_desiderata(key=jax.random.key(seed), lime_samples=config.lime_samples)
        for m in rows:
            if m in res.satisfied:
                rows[m].append(float(res.satisfied[m]))
        rows["observational law gap"].append(res.law_gap)
        credits.append({m: [c.tolist() for c in res.credits[m]] for m in res.credits})
    satisfied_all = {m: res.satisfied[m] for m in METHODS}
    return Outcome(rows, {"credits (forward, backward)": credits, "last seed": satisfied_all})


def _random_truth(key, structure_mono: DiscreteSCM, concentration: float) -> DiscreteSCM:
    q = jax.random.dirichlet(key, jnp.full(structure_mono.num_noise, concentration))
    return DiscreteSCM(structure_mono.cards, structure_mono.parents, structure_mono.functions, q)


def _random_model(key) -> TableModel:
    return TableModel(jax.random.uniform(key, (8,)), (4, 2, 1))


def _random_monotone_model(key) -> TableModel:
    """A random table model non-decreasing in each binary input: ``f(x) = sum_{T <= x} c_T``
    over the subsets ``T`` of the inputs set to 1, with ``c ~ U(0, 1)``, scaled into [0, 1]."""
    c = np.asarray(jax.random.uniform(key, (8,)), np.float64)
    table = np.array([sum(c[t] for t in range(8) if t & idx == t) for idx in range(8)])
    return TableModel(jnp.asarray(table / table.max(), jnp.float32), (4, 2, 1))


def bounds(ctx: Context, config: Config) -> Outcome:
    """Bounds of random SCMs under more and more assumptions, and whether they hold the truth.

    Float64 throughout: the observed laws enter the programmes as equality constraints, and
    float32 rounding makes the observational and interventional constraints slightly
    inconsistent (HiGHS then reports infeasibility).
    """
    with jax.enable_x64(True):
        return _bounds(ctx, config)


def _bounds(ctx: Context, config: Config) -> Outcome:
    cards = (2, 2, 2)
    full = DiscreteSCM.canonical(cards, GRAPH)
    mono = DiscreteSCM.canonical(cards, GRAPH, monotone=True)
    rows = {
        "obs": [],
        "obs+do": [],
        "obs+do+monotone": [],
        "truth_outside": [],
        "attained_error": [],
    }
    examples = []
    for seed in ctx.seed_list:
        widths = {k: [] for k in ("obs", "obs+do", "obs+do+monotone")}
        outside, attained = 0, 0.0
        for j in range(config.scms):
            kq, kf, kx = jax.random.split(jax.random.fold_in(jax.random.key(seed), j), 3)
            truth = _random_truth(kq, mono, config.concentration)
            model = _random_model(kf)
            obs = truth.observational()
            x = truth.sample(1, key=kx)[0]
            phi = np.asarray(shapley_values(counterfactual_game(truth, model, x)))
            ints = {(i, a): truth.interventional(i, a) for i in range(3) for a in range(2)}
            settings = {
                "obs": (full, None),
                "obs+do": (full, ints),
                "obs+do+monotone": (mono, ints),
            }
            for name, (structure, inter) in settings.items():
                b = cf_shapley_bounds(structure, model, x, obs, interventional=inter)
                widths[name].append(float(np.mean(b.upper - b.lower)))
                outside += int(np.any(phi < b.lower - 1e-6) or np.any(phi > b.upper + 1e-6))
                if j == 0 and name == "obs":  # the loosest setting, one SCM per seed (cost)
                    attained = max(attained, _attained_error(structure, model, x, b))
                if seed == 0 and j == 0:
                    examples.append(
                        {"setting": name, "lower": b.lower, "upper": b.upper, "truth": phi}
                    )
        for name, w in widths.items():
            rows[name].append(float(np.mean(w)))
        rows["truth_outside"].append(float(outside))
        rows["attained_error"].append(attained)
    return Outcome(rows, {"example": examples, "scms_per_seed": config.scms})


def _attained_error(structure: DiscreteSCM, model, x, b) -> float:
    """Largest gap between each bound and the counterfactual Shapley value of the SCM that the
    LP returns for it, recomputed through the full game (abduction normalised by that SCM's own
    P(x), reference worlds from its own law): zero when the bounds are attained (tight)."""
    worst = 0.0
    for bound, laws in ((b.lower, b.minimizers), (b.upper, b.maximizers)):
        for i, q in enumerate(laws):
            q = np.clip(q, 0.0, None)
            scm = DiscreteSCM(structure.cards, structure.parents, structure.functions, q / q.sum())
            phi = np.asarray(shapley_values(counterfactual_game(scm, model, x)), np.float64)
            worst = max(worst, abs(phi[i] - bound[i]))
    return worst


def sampling(ctx: Context, config: Config) -> Outcome:
    """Error of permutation sampling against exact values, vs the number of permutations."""
    n = config.features
    errors = {m: [] for m in config.permutations}
    zscores = []
    replicates = jax.random.split(jax.random.key(10_000), config.replicates)
    for seed in ctx.seed_list:
        kw, kx, kb = jax.random.split(jax.random.key(seed), 3)
        weights = jnp.tril(jax.random.normal(kw, (n, n)) * 0.5, k=-1)
        weights = weights * (jax.random.uniform(kb, (n, n)) < 0.4)
        scm = LinearGaussianSCM(weights)
        background = scm.sample(config.background, key=kb)
        x = scm.sample(1, key=kx)[0]
        game = counterfactual_game(scm, _nonlinear_model, x, background=background)
        exact = np.asarray(shapley_values(game))
        per_m = {}
        for m in config.permutations:
            per_m[m] = [
                shapley_sampling(game, key=jax.random.fold_in(r, seed), num_permutations=m)
                for r in replicates
            ]
        # one permutation's spread, from the largest run: errors in its units are ~ 1/sqrt(M)
        big = max(config.permutations)
        sigma = np.sqrt(np.mean([np.mean(np.asarray(e.stderr) ** 2) * big for e in per_m[big]]))
        for m, ests in per_m.items():
            sq = [np.mean((np.asarray(e.values) - exact) ** 2) for e in ests]
            errors[m].append(float(np.sqrt(np.mean(sq)) / sigma))
        zscores += [
            (np.asarray(e.values) - exact)[e.stderr > 1e-6] / np.asarray(e.stderr)[e.stderr > 1e-6]
            for e in per_m[big]
        ]
    z = np.concatenate(zscores)
    return Outcome(
        {f"rmse_M{m}": v for m, v in errors.items()},
        {
            "features": n,
            "permutations": list(config.permutations),
            "coverage_2se": float(np.mean(np.abs(z) < 2.0)),
            "z_std": float(np.std(z)),
        },
    )


def _nonlinear_model(v):
    return jnp.tanh(v[0] * v[-1]) + jnp.sum(jnp.sin(v))


def plot_sampling(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    ms = outcome.extras["permutations"]
    means = [np.mean(outcome.values[f"rmse_M{m}"]) for m in ms]
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.loglog(ms, means, "o-", label="permutation sampling")
    ax.loglog(ms, means[0] * np.sqrt(ms[0] / np.asarray(ms)), "k--", label="1/sqrt(M)")
    ax.set_xlabel("sampled permutations M")
    ax.set_ylabel("RMSE vs exact / one permutation's std")
    ax.set_title(f"{outcome.extras['features']} features, linear-Gaussian SCM")
    # one labelled tick per measured M (log-axis minor labels overlap at these ranges)
    ax.set_xticks(ms, [str(m) for m in ms])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_bounds(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for k, ex in enumerate(outcome.extras["example"]):
        lower, upper, truth = (np.asarray(ex[f]) for f in ("lower", "upper", "truth"))
        pos = np.arange(len(truth)) + 0.25 * (k - 1)
        # each setting its own colour, and its own true value at its own interval
        ax.errorbar(
            pos,
            (lower + upper) / 2,
            yerr=(upper - lower) / 2,
            fmt="none",
            capsize=4,
            color=f"C{k}",
            label=f"bounds: {ex['setting']}",
        )
        ax.plot(pos, truth, "*", color=f"C{k}", mec="k", ms=10)
    ax.plot([], [], "*", color="0.6", mec="k", ms=10, label="true value (per setting)")
    ax.set_xticks(np.arange(len(truth)), [f"X{i}" for i in range(len(truth))])
    ax.set_ylabel("counterfactual Shapley value")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=2, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
