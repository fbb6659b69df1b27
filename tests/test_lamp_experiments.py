"""Smoke run of P07's registered experiments (tiny sizes) through the runner."""

from __future__ import annotations

import json
import math

from jaxpapers.core.experiment import run_paper


def test_p07_smoke(tmp_path):
    record = run_paper("P07", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    saved = json.loads((tmp_path / "P07" / "result.json").read_text())
    assert saved["paper"] == "P07" and saved["size"] == "smoke"
    ids = {e["id"] for e in saved["experiments"]}
    assert {
        *(f"mixture_{b}_d{d}" for b in ("dps", "diffpir", "ddrm") for d in (8, 80, 800)),
        "nfe_equal",
        "unconditional_2m",
        "mixture_ablation_d80",
        "one_step_risk",
        "digits_inpaint",
        "digits_deblur",
        "digits_sr2",
        "digits_ssim",
    } <= ids
    for exp in saved["experiments"]:
        assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
        assert exp["rows"]
        for row in exp["rows"]:
            if "predicted to hurt" in row["method"]:
                continue  # empty when every smoke cell is predicted to help
            assert math.isfinite(row["mean"]), (exp["id"], row)
            assert len(row["seeds"]) == 2
    assert next(e for e in saved["experiments"] if e["id"] == "nfe_equal")["verdict"] == "holds"
    assert (tmp_path / "P07" / "digits_inpaint.png").exists()
    assert (tmp_path / "P07" / "mixture_dps_d800.png").exists()
    # With A = 0, LAMP is DPM-Solver++(2M): it must beat DDIM / DDPM even at 4 steps.
    uncond = next(e for e in saved["experiments"] if e["id"] == "unconditional_2m")
    diffs = [r["mean"] for r in uncond["rows"] if r["method"].startswith("LAMP-")]
    assert len(diffs) == 4 and max(diffs) < 0, uncond["rows"]
    inpaint = next(e for e in saved["experiments"] if e["id"] == "digits_inpaint")
    # The digits test bed runs a trained U-Net whose held-out epsilon error beats predicting 0.
    assert inpaint["extras"]["denoiser"]["kind"] == "unet"
    assert inpaint["extras"]["denoiser"]["heldout_eps_mse"] < 1.0
    assert record["experiments"]
