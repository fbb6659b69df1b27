"""Smoke run of P07's experiments (tiny sizes) through the runner: every experiment is
declared; a representative subset runs (one backbone on the mixture and Gaussian beds, both
metrics, the sanity checks and one digits task), which exercises every runner module."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from jaxpapers.core.experiment import Context, experiments_for, paper_config, run_paper
from jaxpapers.lamp.experiments import _mixture
from jaxpapers.lamp.experiments._common import DiscNfe

BEDS = [f"mixture_{b}_d{d}" for b in ("dps", "diffpir", "ddrm") for d in (8, 80, 800)] + [
    f"gaussian_{b}_d16" for b in ("dps", "diffpir", "ddrm")
]
# mixture_dps_d8 runs the same compiled DPS program as unconditional_2m (same bed, same number of
# chains), and DDRM on the Gaussian bed compiles no vector-Jacobian product: one compile fewer
# than DDRM on the mixture and DPS on the Gaussian bed, with the same three backbones covered
# (DiffPIR and all three in digits_inpaint).
RUN = [
    "mixture_dps_d8",
    "mixture_dps_d8_disc",
    "gaussian_ddrm_d16",
    "unconditional_2m",
    "one_step_risk",
    "digits_inpaint",
]


def test_p07_declared():
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
    assert (tmp_path / "P07" / "mixture_dps_d8_disc.png").exists()
    # With A = 0, LAMP is DPM-Solver++(2M): it must beat DDIM / DDPM even at 4 steps.
    uncond = next(e for e in saved["experiments"] if e["id"] == "unconditional_2m")
    diffs = [r["mean"] for r in uncond["rows"] if r["method"].startswith("LAMP-")]
    assert len(diffs) == 4 and max(diffs) < 0, uncond["rows"]
    inpaint = next(e for e in saved["experiments"] if e["id"] == "digits_inpaint")
    # Smoke and quick digits use the kernel denoiser; its held-out epsilon error beats 0.
    assert inpaint["extras"]["denoiser"]["kind"] == "kernel"
    assert inpaint["extras"]["denoiser"]["heldout_eps_mse"] < 1.0
    assert record["experiments"]


def test_disc_nfe_study_is_zero_at_its_reference(tmp_path):
    """The --full discretisation study (run here at a tiny size, on the smoke run's program
    shapes): at NFE = ref_nfe each sampler is its own reference (same knob, noise and keys), so
    the distance is exactly 0; below it positive; LAMP-X rows are the paired differences."""
    config = dataclasses.replace(
        paper_config("P07", "smoke"),
        disc_nfe=DiscNfe(nfe=(4, 8), ref_nfe=8, problems=2, samples=64),
    )
    ctx = Context(size="smoke", seeds=2, workdir=tmp_path, config=config)
    bed = _mixture.BEDS["gauss_d16"]
    v = _mixture.run_disc_nfe(ctx, config, bed=bed, kind="DDRM").values
    assert v["DDRM @NFE 8"] == [0.0, 0.0] and v["DDRM+LAMP @NFE 8"] == [0.0, 0.0]
    assert min(v["DDRM @NFE 4"] + v["DDRM+LAMP @NFE 4"]) > 0.0
    np.testing.assert_allclose(
        v["LAMP-DDRM @NFE 4"], np.subtract(v["DDRM+LAMP @NFE 4"], v["DDRM @NFE 4"]), rtol=1e-12
    )
