"""P06 experiments at smoke size through the runner: rows with finite numbers, computed verdicts,
plots, the per-data-set rows of ``kernels_pde`` against the MMD experiments, the 2-D cases (heat,
Navier-Stokes), and a resumed run that repeats no work."""

from __future__ import annotations

import json
import math

import numpy as np

from jaxpapers.core.experiment import FAILS, HOLDS, UNSURE, AnyOf, Better, RowStats, run_paper

ONE_D = {"ffm", "ot_euclid", "kffm_rbf", "kffm_sobolev", "kffm_signature"}
TWO_D = {"ffm", "ot_euclid", "kffm_rbf", "kffm_sobolev"}


def _better(m: dict, b: dict) -> str:
    """Independent re-statement of the `Better` rule (lower is better)."""
    gain, spread = b["mean"] - m["mean"], math.hypot(m["std"], b["std"])
    return HOLDS if gain > spread else FAILS if gain < -spread else UNSURE


def test_p06_smoke_run(tmp_path):
    record = run_paper("P06", tmp_path, size="smoke", seeds=2, log=lambda s: None)
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
    ]
    for exp in saved["experiments"]:
        assert exp["verdict"] in {HOLDS, FAILS, UNSURE}
        for r in exp["rows"]:
            assert len(r["seeds"]) == 2
            assert all(math.isfinite(v) for v in r["seeds"])
        assert (tmp_path / "P06" / exp["plots"][0]).stat().st_size > 1000
    for name in ("gp_mixture", "oscillator", "burgers", "reaction_diffusion", "heat2d", "ns2d"):
        exp = exps[f"mmd_{name}"]
        rows = {r["method"]: r for r in exp["rows"]}
        assert set(rows) == (TWO_D if name in ("heat2d", "ns2d") else ONE_D)
        # MMD^2 with 4 RBF kernels lies in (-8, 8); the prior draws differ from every data set.
        assert all(abs(r["mean"]) < 8 for r in rows.values())
        assert min(exp["extras"]["mmd_prior"]) > 0
        assert set(exp["extras"]) >= {"density_mse", "spectrum_mse", "hsd_rbf", "nfe", "samples"}
        # Smoke size integrates with 2 Euler steps: exactly 2 field evaluations.
        assert all(v == 2 for per_seed in exp["extras"]["nfe"].values() for v in per_seed)
        assert all(min(v) > -1e-3 for v in exp["extras"]["hsd_rbf"].values())
        # The verdict is the rule applied to the rows: best kernel vs FFM and vs Euclidean OT.
        best = {"gp_mixture": "kffm_rbf", "oscillator": "kffm_signature"}.get(name, "kffm_sobolev")
        parts = [_better(rows[best], rows[b]) for b in ("ffm", "ot_euclid")]
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

    # kernels_pde: the rows are the PDE experiments' rows, and its verdict follows from them.
    pde = {r["method"]: r for r in exps["kernels_pde"]["rows"]}
    expected_rows = {f"{d}/{m}" for d in ("burgers", "reaction_diffusion") for m in ONE_D}
    assert set(pde) == expected_rows | {f"{d}/{m}" for d in ("heat2d", "ns2d") for m in TWO_D}
    for name in ("burgers", "reaction_diffusion", "heat2d", "ns2d"):
        for r in exps[f"mmd_{name}"]["rows"]:
            assert pde[f"{name}/{r['method']}"]["seeds"] == r["seeds"]
    per_dataset = []
    for d, kernels in (
        ("burgers", ("kffm_sobolev", "kffm_signature")),
        ("reaction_diffusion", ("kffm_sobolev", "kffm_signature")),
        ("heat2d", ("kffm_sobolev",)),
        ("ns2d", ("kffm_sobolev",)),
    ):
        wins = []
        for k in kernels:
            parts = [_better(pde[f"{d}/{k}"], pde[f"{d}/{b}"]) for b in ("kffm_rbf", "ot_euclid")]
            wins.append(
                HOLDS if all(p == HOLDS for p in parts) else FAILS if FAILS in parts else UNSURE
            )
        per_dataset.append(
            HOLDS if HOLDS in wins else FAILS if all(w == FAILS for w in wins) else UNSURE
        )
    want = (
        HOLDS if all(v == HOLDS for v in per_dataset) else FAILS if FAILS in per_dataset else UNSURE
    )
    assert exps["kernels_pde"]["verdict"] == want

    # A resumed run keeps every finished experiment and returns the same numbers.
    again = run_paper("P06", tmp_path, size="smoke", seeds=2, resume=True, log=lambda s: None)
    means = lambda rec: [[r["mean"] for r in e["rows"]] for e in rec["experiments"]]
    assert means(again) == means(record)


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
