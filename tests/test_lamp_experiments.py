"""Smoke run of P07's experiments (tiny sizes) through the runner: every experiment is
registered; a representative subset runs (one backbone on the mixture and Gaussian beds, both
metrics, the sanity checks and one digits task), which exercises every runner module."""

from __future__ import annotations

import json
import math

from jaxpapers.core.experiment import experiments_for, run_paper

BEDS = [f"mixture_{b}_d{d}" for b in ("dps", "diffpir", "ddrm") for d in (8, 80, 800)] + [
    f"gaussian_{b}_d16" for b in ("dps", "diffpir", "ddrm")
]
RUN = [
    "mixture_ddrm_d8",
    "mixture_ddrm_d8_disc",
    "gaussian_dps_d16",
    "unconditional_2m",
    "one_step_risk",
    "digits_inpaint",
]


def test_p07_registered():
    ids = {e.id for e in experiments_for("P07")}
    assert {
        *BEDS,
        *(f"{b}_disc" for b in BEDS),
        "nfe_equal",
        "unconditional_2m",
        "mixture_ablation_d80",
        "one_step_risk",
        "digits_inpaint",
        "digits_deblur",
        "digits_sr2",
        "digits_ssim",
    } <= ids


def test_p07_smoke(tmp_path):
    record = run_paper("P07", tmp_path, size="smoke", seeds=2, only=RUN, log=lambda _: None)
    saved = json.loads((tmp_path / "P07" / "result.json").read_text())
    assert saved["paper"] == "P07" and saved["size"] == "smoke"
    assert {e["id"] for e in saved["experiments"]} == set(RUN)
    for exp in saved["experiments"]:
        assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
        assert exp["rows"]
        for row in exp["rows"]:
            if "predicted to hurt" in row["method"]:
                continue  # empty when every smoke cell is predicted to help
            assert math.isfinite(row["mean"]), (exp["id"], row)
            assert len(row["seeds"]) == 2
    assert (tmp_path / "P07" / "digits_inpaint.png").exists()
    assert (tmp_path / "P07" / "mixture_ddrm_d8_disc.png").exists()
    # With A = 0, LAMP is DPM-Solver++(2M): it must beat DDIM / DDPM even at 4 steps.
    uncond = next(e for e in saved["experiments"] if e["id"] == "unconditional_2m")
    diffs = [r["mean"] for r in uncond["rows"] if r["method"].startswith("LAMP-")]
    assert len(diffs) == 4 and max(diffs) < 0, uncond["rows"]
    inpaint = next(e for e in saved["experiments"] if e["id"] == "digits_inpaint")
    # The digits test bed runs a trained U-Net whose held-out epsilon error beats predicting 0.
    assert inpaint["extras"]["denoiser"]["kind"] == "unet"
    assert inpaint["extras"]["denoiser"]["heldout_eps_mse"] < 1.0
    assert record["experiments"]
