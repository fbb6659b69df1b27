"""P06 experiments at smoke size through the runner: rows with finite numbers, computed verdicts
(seed spread and the data-vs-data MMD floor), plots, the per-data-set rows of ``kernels_pde``
against the MMD experiments, the 2-D cases (heat, Navier-Stokes), the evaluation experiment's
steps-to-tolerance, and a resumed run that repeats no work."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from jaxpapers.core.experiment import FAILS, HOLDS, UNSURE, AnyOf, Better, RowStats
from jaxpapers.kffm.experiments._rules import FloorBetter, floor_level, null_scale
from jaxpapers.kffm.experiments._score import steps_to_tolerance

ONE_D = {"ffm", "ot_euclid", "kffm_rbf", "kffm_sobolev", "kffm_signature"}
TWO_D = {"ffm", "ot_euclid", "kffm_rbf", "kffm_sobolev"}


def _better(m: dict, b: dict, floor: dict) -> str:
    """Independent re-statement of the `FloorBetter` rule (lower is better): the paired one-sided
    95% t bounds on the per-seed gains decide; a "holds" whose mean gain is within half the RMS of
    the floor row (the floor rescaled from halves to the scoring size) is inconclusive."""
    from scipy.stats import t

    gains = np.asarray(b["seeds"], float) - np.asarray(m["seeds"], float)
    n = gains.size
    half = t.ppf(0.95, n - 1) * gains.std(ddof=1) / math.sqrt(n)
    low, high = gains.mean() - half, gains.mean() + half
    if low > 0:
        level = 0.5 * math.sqrt(np.mean(np.square(floor["seeds"])))
        return UNSURE if abs(gains.mean()) <= level else HOLDS
    return FAILS if high < 0 or (high == 0 and low == 0) else UNSURE


# The smoke run and its resumed repeat, in a subprocess (it inherits the suite's smoke compile
# policy, XLA_FLAGS from conftest). Smoke programs are compile-dominated.
SMOKE_SCRIPT = """
import json, pathlib, sys
from jaxpapers.core.experiment import run_paper
means = lambda rec: [[r["mean"] for r in e["rows"]] for e in rec["experiments"]]
out = pathlib.Path(sys.argv[1])
first = run_paper("P06", out, size="smoke", seeds=2, log=lambda s: None)
again = run_paper("P06", out, size="smoke", seeds=2, resume=True, log=lambda s: None)
print("RESULT" + json.dumps({"first": means(first), "again": means(again)}))
"""


def _smoke_run(out) -> dict:
    env = dict(os.environ)  # with the smoke compile policy (conftest)
    proc = subprocess.run(
        [sys.executable, "-c", SMOKE_SCRIPT, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])


def test_p06_smoke_run(tmp_path):
    runs = _smoke_run(tmp_path)
    saved = json.loads((tmp_path / "P06" / "result.json").read_text())
    assert saved["paper"] == "P06" and saved["size"] == "smoke"
    exps = {e["id"]: e for e in saved["experiments"]}
    assert list(exps) == [
        "mmd_gp_mixture",
        "mmd_oscillator",
        "mmd_burgers",
        "mmd_reaction_diffusion",
        "mmd_heat2d",
        "mmd_ns2d",
        "evals_burgers",
        "kernels_pde",
        "kernels_pde_2d",
        "pairing_draws",
    ]
    for exp in saved["experiments"]:
        assert exp["verdict"] in {HOLDS, FAILS, UNSURE}
        for r in exp["rows"]:
            # pairing_draws pools data sets and seeds (4 x 2 values per row).
            assert len(r["seeds"]) == (8 if exp["id"] == "pairing_draws" else 2)
            assert all(math.isfinite(v) for v in r["seeds"])
        # Every experiment but the pair-draw table has a plot.
        assert len(exp["plots"]) == (0 if exp["id"] == "pairing_draws" else 1)
        for plot in exp["plots"]:
            assert (tmp_path / "P06" / plot).stat().st_size > 1000
    for name in ("gp_mixture", "oscillator", "burgers", "reaction_diffusion", "heat2d", "ns2d"):
        exp = exps[f"mmd_{name}"]
        rows = {r["method"]: r for r in exp["rows"]}
        assert set(rows) == (TWO_D if name in ("heat2d", "ns2d") else ONE_D) | {"data_floor"}
        # Two halves of one held-out set (16 functions each at smoke size): the unbiased MMD^2
        # scatters around 0 with a spread of a few hundredths there, and the seeds split apart.
        floor = rows["data_floor"]
        assert floor["role"] == "baseline"
        assert max(abs(v) for v in floor["seeds"]) < 0.5 and floor["seeds"][0] != floor["seeds"][1]
        assert math.isclose(
            exp["extras"]["mmd_floor_level"], math.sqrt(np.mean(np.square(floor["seeds"])))
        )
        # MMD^2 with 4 RBF kernels lies in (-8, 8); the prior draws differ from every data set.
        assert all(abs(r["mean"]) < 8 for r in rows.values())
        assert min(exp["extras"]["mmd_prior"]) > 0
        assert set(exp["extras"]) >= {"density_mse", "spectrum_mse", "hsd_rbf", "nfe", "samples"}
        # Smoke size integrates with 2 Euler steps: exactly 2 field evaluations.
        assert all(v == 2 for per_seed in exp["extras"]["nfe"].values() for v in per_seed)
        assert set(exp["extras"]["nfe"]) == set(rows) - {"data_floor"}
        assert all(min(v) > -1e-3 for v in exp["extras"]["hsd_rbf"].values())
        # The verdict is the rule applied to the rows: best kernel vs FFM and vs Euclidean OT.
        best = {"gp_mixture": "kffm_rbf", "oscillator": "kffm_signature"}.get(name, "kffm_sobolev")
        parts = [_better(rows[best], rows[b], floor) for b in ("ffm", "ot_euclid")]
        want = HOLDS if all(p == HOLDS for p in parts) else FAILS if FAILS in parts else UNSURE
        assert exp["verdict"] == want
    for name in ("heat2d", "ns2d"):
        shown = np.asarray(exps[f"mmd_{name}"]["extras"]["samples"]["kffm_sobolev"])
        assert shown.shape == (4, 8, 8) and np.std(shown) > 0
    # The two 2-D data sets are different fields (not one data set scored twice).
    data2d = [np.asarray(exps[f"mmd_{n}"]["extras"]["samples"]["data"]) for n in ("heat2d", "ns2d")]
    assert data2d[1].shape == (4, 8, 8) and np.abs(data2d[0] - data2d[1]).max() > 0.1
    data = np.asarray(exps["mmd_reaction_diffusion"]["extras"]["samples"]["data"])
    assert data.shape == (6, 32) and data.std(axis=1).min() > 0.1  # no constant profiles

    # kernels_pde (1-D) and kernels_pde_2d: the rows are the PDE experiments' rows, and each
    # verdict follows from them.
    for exp_id, plan in (
        (
            "kernels_pde",
            (
                ("burgers", ONE_D, ("kffm_sobolev", "kffm_signature")),
                ("reaction_diffusion", ONE_D, ("kffm_sobolev", "kffm_signature")),
            ),
        ),
        (
            "kernels_pde_2d",
            (("heat2d", TWO_D, ("kffm_sobolev",)), ("ns2d", TWO_D, ("kffm_sobolev",))),
        ),
    ):
        pde = {r["method"]: r for r in exps[exp_id]["rows"]}
        expected_rows = {f"{d}/{m}" for d, methods, _ in plan for m in methods}
        expected_rows |= {f"{d}/data_floor" for d, _, _ in plan}
        assert set(pde) == expected_rows
        per_dataset = []
        for d, _, kernels in plan:
            for r in exps[f"mmd_{d}"]["rows"]:
                assert pde[f"{d}/{r['method']}"]["seeds"] == r["seeds"]
            wins = []
            for k in kernels:
                parts = [
                    _better(pde[f"{d}/{k}"], pde[f"{d}/{b}"], pde[f"{d}/data_floor"])
                    for b in ("kffm_rbf", "ot_euclid")
                ]
                wins.append(
                    HOLDS if all(p == HOLDS for p in parts) else FAILS if FAILS in parts else UNSURE
                )
            per_dataset.append(
                HOLDS if HOLDS in wins else FAILS if all(w == FAILS for w in wins) else UNSURE
            )
        want = (
            HOLDS
            if all(v == HOLDS for v in per_dataset)
            else FAILS
            if FAILS in per_dataset
            else UNSURE
        )
        assert exps[exp_id]["verdict"] == want

    # evals_burgers: each row is the steps-to-tolerance of that model's path-error curve.
    ev = exps["evals_burgers"]
    ks, tol = ev["extras"]["euler_steps"], ev["extras"]["path_tolerance"]
    assert ks == [1, 2]
    for r in ev["rows"]:
        curves = ev["extras"]["path_err_curves"][r["method"]]
        assert len(curves) == 2 and all(len(c) == len(ks) and min(c) >= 0 for c in curves)
        want = [steps_to_tolerance(ks, c, tol) for c in curves]
        np.testing.assert_allclose(r["seeds"], want, rtol=1e-12)
        # At the largest step count the reference is the same 2-step Euler solve: zero error.
        assert all(c[-1] < 1e-5 for c in curves)

    # pairing_draws: a permutation uses every data function once; categorical draws repeat some.
    dr = exps["pairing_draws"]
    draws = {r["method"]: r for r in dr["rows"]}
    assert len(draws) == 8
    for name, r in draws.items():
        assert len(r["seeds"]) == 4 * 2  # 1-D data sets x seeds
        if name.endswith("/without"):
            assert r["seeds"] == [1.0] * 8
        else:
            assert all(1 / 16 <= v <= 1 for v in r["seeds"])
        # The pairs are real data functions paired with prior draws: cost near 2 (unit variances).
        costs = [v for per_d in dr["extras"]["pair_cost"][name].values() for v in per_d]
        assert all(0.1 < c < 10 for c in costs)
    ffm_cost = dr["extras"]["pair_cost"]["ffm"]
    assert set(ffm_cost) == {"gp_mixture", "oscillator", "burgers", "reaction_diffusion"}
    assert dr["verdict"] in {HOLDS, FAILS, UNSURE}

    # A resumed run keeps every finished experiment and returns the same numbers.
    # (Both runs in the subprocess: the first run's means are those saved in result.json.)
    assert runs["first"] == [[r["mean"] for r in e["rows"]] for e in saved["experiments"]]
    assert runs["again"] == runs["first"]


def test_p06_sizes_of_the_experiments():
    """Quick mode runs the 1-D family only; the 2-D family at smoke and --full; the ``long_*``
    study (quick sizes trained longer, CPU-sized) at --full only, on families of its own (own
    checkpoints and scores) that differ from the quick ones in the number of steps alone."""
    import dataclasses

    from jaxpapers.core.experiment import experiments_for
    from jaxpapers.kffm import experiments as E
    from jaxpapers.kffm.experiments._data import make_pairing

    exps = {e.id: e for e in experiments_for("P06")}
    quick = sorted(i for i, e in exps.items() if "quick" in e.sizes)
    assert quick == sorted(
        [
            "mmd_gp_mixture",
            "mmd_oscillator",
            "mmd_burgers",
            "mmd_reaction_diffusion",
            "evals_burgers",
            "kernels_pde",
            "pairing_draws",
        ]
    )
    for i in ("mmd_heat2d", "mmd_ns2d", "kernels_pde_2d"):
        assert exps[i].sizes == ("smoke", "full")
    long_ids = [i for i in exps if i.startswith("long_")]
    assert len(long_ids) == 11 and all(exps[i].sizes == ("full",) for i in long_ids)
    draw_ids = ["long_draw_evals_burgers", "long_draw_mmd_burgers"]
    assert all(i in long_ids for i in draw_ids)
    # The draw study: the same pairings drawn with and without replacement, on the 1-D data.
    assert E.FAMILY_DRAW_LONG.sizes == E.FAMILY_1D_LONG.sizes == "1d_long"
    assert E.FAMILY_DRAW_LONG.name not in (E.FAMILY_1D_LONG.name, E.FAMILY_1D.name)
    for i in draw_ids:
        assert exps[i].methods == ("ot_euclid_perm", "kffm_sobolev_perm")
    for name in E.FAMILY_DRAW_LONG.methods:
        pairing = make_pairing(name, E.FAMILY_DRAW_LONG)
        assert pairing.replace is (not name.endswith("_perm"))
    long_ids = [i for i in long_ids if i not in draw_ids]
    for short, long, steps in (
        (E.FAMILY_1D, E.FAMILY_1D_LONG, 2000),
        (E.FAMILY_2D, E.FAMILY_2D_LONG, 1000),
    ):
        assert long.name != short.name and long.datasets == short.datasets
        quick, full = E.SIZES["quick"].sizes(short), E.SIZES["full"].sizes(long)
        assert full == dataclasses.replace(quick, steps=steps)
        # At the other sizes the long families train like the short ones.
        for size in ("smoke", "quick"):
            assert E.SIZES[size].sizes(long) == E.SIZES[size].sizes(short)
    # Each long experiment reads the long families' scores, with the same rows as its short twin.
    for i in long_ids:
        assert exps[i].baselines == exps[i[len("long_") :]].baselines
        assert exps[i].methods == exps[i[len("long_") :]].methods


def test_any_of_rule():
    rows = {
        "a": RowStats.from_values("a", "method", [1.0, 1.1]),  # clearly better than c
        "b": RowStats.from_values("b", "method", [5.0, 5.1]),  # clearly worse than c
        "c": RowStats.from_values("c", "baseline", [3.0, 3.1]),
        "d": RowStats.from_values("d", "method", [2.0, 4.2]),  # within the spread of c
    }
    a, b, d = Better("a", "c"), Better("b", "c"), Better("d", "c")
    assert AnyOf((b, a)).decide(rows, True) == HOLDS
    assert AnyOf((b, b)).decide(rows, True) == FAILS
    assert AnyOf((b, d)).decide(rows, True) == UNSURE
    assert AnyOf((a, b)).names() == ("a", "c", "b", "c")
    assert " OR " in AnyOf((a, b)).describe(True)


def test_floor_better_rule():
    """The floor only stops a "holds" whose mean gain is inside it; a significant paired result
    either way is decided by the paired test, inside the floor or not."""
    rows = {
        "m": RowStats.from_values("m", "method", [0.010, 0.011, 0.012]),
        "b": RowStats.from_values("b", "baseline", [0.020, 0.021, 0.022]),
        "small": RowStats.from_values("small", "baseline", [0.001, -0.002, 0.002]),
        "big": RowStats.from_values("big", "baseline", [0.02, -0.01, 0.015]),
    }
    assert math.isclose(floor_level(rows["big"]), math.sqrt((4 + 1 + 2.25) / 3) * 1e-2)
    assert FloorBetter("m", "b", "small").decide(rows, True) == HOLDS
    assert FloorBetter("b", "m", "small").decide(rows, True) == FAILS
    # Gain 0.010 inside the floor 0.0160: a "holds" becomes inconclusive ...
    assert FloorBetter("m", "b", "big").decide(rows, True) == UNSURE
    # ... but not once the floor is rescaled below the gain (0.5 x 0.0160 = 0.0080 < 0.010).
    assert FloorBetter("m", "b", "big", scale=0.5).decide(rows, True) == HOLDS
    # A significant wrong-way difference inside the floor does not hold (the old rule read it
    # inconclusive): the mmd_burgers case, method worse on every seed by less than the floor.
    assert FloorBetter("b", "m", "big").decide(rows, True) == FAILS
    # Not significant either way: inconclusive with any floor.
    rows["n"] = RowStats.from_values("n", "method", [0.025, 0.016, 0.021])
    assert FloorBetter("n", "b", "small").decide(rows, True) == UNSURE
    assert FloorBetter("m", "b", "big").names() == ("m", "b", "big")
    assert "floor" in FloorBetter("m", "b", "big").describe(True)
    with pytest.raises(ValueError, match="scale"):
        FloorBetter("m", "b", "big", scale=0.0)


def test_null_scale_matches_simulated_mmd_spread():
    """The null spread of the unbiased MMD^2 falls like 1/m + 1/n: simulated two-sample MMD^2 of
    one Gaussian at 64 vs 64 and at 128 vs 128 (float64 NumPy, 400 repeats each) have RMS ratio
    close to ``null_scale((64, 64), (128, 128)) = 1/2`` (a 1/sqrt(n) law would give 0.71)."""
    assert null_scale((128, 128), (256, 256)) == 0.5
    assert math.isclose(null_scale((10, 30), (20, 60)), 0.5)
    with pytest.raises(ValueError, match="floor_sizes"):
        null_scale((0, 4), (4, 4))

    rng = np.random.default_rng(0)

    def mmd2(x, y, bw=1.0):
        k = lambda a, c: np.exp(-((a[:, None, :] - c[None, :, :]) ** 2).sum(-1) / (2 * bw**2))
        kxx, kyy, kxy = k(x, x), k(y, y), k(x, y)
        m, n = len(x), len(y)
        sxx = (kxx.sum() - np.trace(kxx)) / (m * (m - 1))
        syy = (kyy.sum() - np.trace(kyy)) / (n * (n - 1))
        return sxx + syy - 2 * kxy.mean()

    rms = {}
    for n in (64, 128):
        vals = [mmd2(rng.normal(size=(n, 2)), rng.normal(size=(n, 2))) for _ in range(400)]
        rms[n] = math.sqrt(np.mean(np.square(vals)))
    # 400 repeats: the RMS of each is known to ~5% (chi-square-like tails), the ratio to ~8%.
    assert abs(rms[128] / rms[64] - 0.5) < 0.08


def test_steps_to_tolerance():
    """Exact on a first-order curve err = c / k (inside, below and beyond the grid) and log-log
    linear between grid points."""
    ks = [1, 2, 4, 8, 16]
    curve = [0.8 / k for k in ks]
    for tol in (0.9, 0.4, 0.3, 0.1, 0.05, 0.01):
        assert math.isclose(steps_to_tolerance(ks, curve, tol), 0.8 / tol, rel_tol=1e-12)
    # A faster-than-first-order piece: err 1 at k = 2, 0.01 at k = 4; tol 0.1 halfway in logs.
    assert math.isclose(steps_to_tolerance([2, 4], [1.0, 0.01], 0.1), 2 * math.sqrt(2))
