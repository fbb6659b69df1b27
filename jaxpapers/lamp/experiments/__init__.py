"""P07 LAMP experiments: the configuration of each run size and the experiments, as data (the runs
are in ``_mixture``, ``_risk``, ``_digits``; plots in ``_plots``).

* ``mixture_<backbone>_d<d>`` (headline; d = 8, 80, 800, 25-Gaussian prior, m = 2, sigma_y =
  0.05) and ``gaussian_<backbone>_d16`` (Gaussian prior, m = 8, sigma_y = 0.01: a test bed where
  the backbones' bias is small): sliced W2 to the exact posterior at two NFE levels.
* ``..._disc``: the same runs scored by the distance to each sampler's own high-NFE output (the
  discretisation error that a second-order correction targets).
* ``mixture_ablation_d80``: strength x lag (differencing the denoised or the data-consistent
  estimates). ``unconditional_2m``: with A = 0, LAMP is DPM-Solver++(2M) (sanity).
  ``nfe_equal``: counted evaluations. ``one_step_risk``: the bias-variance prediction.
* ``digits_<task>`` / ``digits_ssim``: inpainting, deblurring and 2x super-resolution of 16x16
  digits (a U-Net trained here at ``--full``; an exact kernel denoiser at smaller sizes).
* ``disc_nfe_<bed>_<backbone>``: the discretisation error against NFE (5, 10, 20, 40) with each
  sampler's own 400-step output as reference (``Config.disc_nfe``, sized for a CPU).

All LAMP rows use the default lag of the denoised prediction (see ``jaxpapers.lamp``); the
backbone rows run ``lamp(backbone, 0.0)``, the backbone bit for bit. Every sampler runs through
:func:`jaxpapers.lamp.sample_posterior`, the chains of one bed, backbone and step count vmapped
in one call (tuning cells use fewer samples per validation problem and are padded to the same
number of chains, so tuning and testing at one NFE share a compiled program).

Rules: a LAMP-X row is the paired per-seed difference LAMP over X minus X (same problems, initial
noise and re-noising keys), and a claim holds when every such row is on the better side of 0.

At ``--full`` only (``Experiment.sizes``; ``--experiments`` still runs them at any size): the
d = 800 bed, the digits (quick mode could afford only an exact kernel denoiser of 64 training
digits, not the paper's learned U-Net), the strength x lag ablation and the ``disc_nfe_*``
study. Quick mode runs the d = 80 bed at 128 samples per problem.
"""

from __future__ import annotations

import functools

from jaxpapers.core.experiment import AllOf, AnyOf, Experiment, Threshold
from jaxpapers.lamp.experiments import _digits, _mixture, _plots, _risk
from jaxpapers.lamp.experiments._common import BACKBONES, LEVELS, Config, DigitsModel, paired_rule

SIZES = {
    "smoke": Config(
        nfe=(4, 6),
        ref_nfe=8,
        problems=2,
        samples=64,
        tune=False,
        risk_steps=(5,),
        digits=DigitsModel(kind="kernel", kde_components=32),
        digits_nfe=4,
        digits_images=4,
    ),
    "quick": Config(
        nfe=(10, 20),
        ref_nfe=100,
        problems=4,
        samples=256,
        tune=True,
        risk_steps=(5, 10, 20),
        digits=DigitsModel(kind="kernel", kde_components=64),
        digits_nfe=10,
        digits_images=8,
        samples_by_dim=((80, 128),),
    ),
    "full": Config(
        nfe=(20, 100),
        ref_nfe=1000,
        problems=8,
        samples=2048,
        tune=True,
        risk_steps=(5, 10, 20, 50),
        digits=DigitsModel(channels=(32, 64), steps=20_000, batch=128, checkpoint_every=2000),
        digits_nfe=50,
        digits_images=64,
    ),
}

FULL_ONLY = ("full",)

_METRICS = {
    "posterior": ("", "the exact posterior", "sliced W2 to exact posterior samples"),
    "discretisation": (
        "_disc",
        "its own high-NFE output (discretisation error)",
        "sliced W2 to the same sampler's output at ref_nfe steps (same knob, same initial noise)",
    ),
}


def _prefix(bed: _mixture.Bed) -> str:
    return "mixture" if bed.prior == "grid" else "gaussian"


def _bed_experiment(bed: _mixture.Bed, kind: str, metric: str) -> Experiment:
    suffix, target, desc = _METRICS[metric]
    return Experiment(
        id=f"{_prefix(bed)}_{kind.lower()}_d{bed.dim}{suffix}",
        claim=f"LAMP over {kind} is closer to {target} than {kind} at equal NFE (low and high "
        f"NFE; {bed.prior} prior, d={bed.dim}, m={bed.m}, sigma_y={bed.sigma_y})",
        metric=f"{desc}; LAMP-X rows: paired per-seed difference",
        lower_is_better=True,
        baselines=tuple(f"{kind} @{lv}" for lv in LEVELS),
        methods=tuple(f"{kind}+LAMP @{lv}" for lv in LEVELS)
        + tuple(f"LAMP-{kind} @{lv}" for lv in LEVELS),
        rule=paired_rule([f"LAMP-{kind} @{lv}" for lv in LEVELS], True),
        run=functools.partial(_mixture.run_bed, bed=bed, kind=kind, metric=metric),
        plot=_plots.plot_levels,
        sizes=_mixture.bed_run_sizes(bed),
    )


_ABLATION_ROWS = tuple(
    tuple(
        _mixture.ablation_row(k, g, s)
        for g in _mixture.ABLATION_STRENGTHS
        for s in _mixture.ABLATION_LAGS
    )
    for k in BACKBONES
)
_UNCOND = tuple(f"LAMP-{k} @{lv}" for k in _mixture.UNCOND_SAMPLERS for lv in LEVELS)


def _digits_experiment(task: str) -> Experiment:
    return Experiment(
        id=f"digits_{task}",
        claim=f"LAMP raises PSNR over each backbone on digits {task} at equal NFE",
        metric="PSNR in dB on held-out 16x16 digits (LAMP-X rows: paired per-seed difference)",
        lower_is_better=False,
        baselines=BACKBONES,
        methods=tuple(f"{k}+LAMP" for k in BACKBONES) + tuple(f"LAMP-{k}" for k in BACKBONES),
        rule=paired_rule([f"LAMP-{k}" for k in BACKBONES], False),
        run=functools.partial(_digits.run_psnr, task=task),
        plot=_plots.plot_examples,
        sizes=FULL_ONLY,
    )


def _disc_nfe_experiment(bed: _mixture.Bed, kind: str) -> Experiment:
    study = SIZES["full"].disc_nfe
    diffs = [_mixture.disc_nfe_row(kind, k, None) for k in study.nfe]
    return Experiment(
        id=f"disc_nfe_{_prefix(bed)}_{kind.lower()}_d{bed.dim}",
        claim=f"LAMP over {kind} has a smaller discretisation error than {kind} at every NFE in "
        f"{study.nfe} (distance to the sampler's own {study.ref_nfe}-step output; {bed.prior} "
        f"prior, d={bed.dim}, m={bed.m}, sigma_y={bed.sigma_y})",
        metric="sliced W2 to the same sampler's output at ref_nfe steps (same knob, same noise); "
        "LAMP-X rows: paired per-seed difference",
        lower_is_better=True,
        baselines=tuple(_mixture.disc_nfe_row(kind, k, False) for k in study.nfe),
        methods=tuple(_mixture.disc_nfe_row(kind, k, True) for k in study.nfe) + tuple(diffs),
        rule=paired_rule(diffs, True),
        run=functools.partial(_mixture.run_disc_nfe, bed=bed, kind=kind),
        sizes=FULL_ONLY,
    )


EXPERIMENTS = (
    *(
        _bed_experiment(bed, kind, metric)
        for bed in _mixture.BEDS.values()
        for kind in BACKBONES
        for metric in _METRICS
    ),
    Experiment(
        id=f"mixture_ablation_d{_mixture.ABLATION_BED.dim}",
        claim="For each backbone some LAMP setting (strength 0.25/0.5/1, differencing the "
        "data-consistent (dc) or the denoised (den) estimates) lowers the sliced Wasserstein "
        f"distance to the exact posterior (d={_mixture.ABLATION_BED.dim}, high NFE)",
        metric="sliced W2 (backbone rows) and paired per-seed difference LAMP variant - backbone",
        lower_is_better=True,
        baselines=BACKBONES,
        methods=tuple(r for rows in _ABLATION_ROWS for r in rows),
        rule=AllOf(
            tuple(
                AnyOf(tuple(Threshold(r, 0.0, below=True) for r in rows)) for rows in _ABLATION_ROWS
            )
        ),
        run=_mixture.run_ablation,
        sizes=FULL_ONLY,
    ),
    Experiment(
        id="unconditional_2m",
        claim="Sanity check of the lagged term: with no measurement (A = 0) LAMP is "
        "DPM-Solver++(2M) and lowers the sliced Wasserstein distance to the prior (d=8 mixture) "
        "over DDIM and DDPM at equal NFE",
        metric="sliced W2 to exact prior samples; LAMP-X rows: paired per-seed difference",
        lower_is_better=True,
        baselines=tuple(f"{k} @{lv}" for k in _mixture.UNCOND_SAMPLERS for lv in LEVELS),
        methods=tuple(f"{k}+LAMP @{lv}" for k in _mixture.UNCOND_SAMPLERS for lv in LEVELS)
        + _UNCOND,
        rule=paired_rule(list(_UNCOND), True),
        run=_mixture.run_unconditional,
    ),
    Experiment(
        id="nfe_equal",
        claim="LAMP uses exactly the backbone's number of denoiser evaluations (= steps)",
        metric="ratio of counted evaluations (mean over NFE levels and problems)",
        lower_is_better=True,
        baselines=tuple(f"{k} NFE / steps" for k in BACKBONES),
        methods=tuple(f"{k}+LAMP / {k} NFE" for k in BACKBONES),
        rule=AllOf(
            tuple(
                t
                for k in BACKBONES
                for row in (f"{k}+LAMP / {k} NFE", f"{k} NFE / steps")
                for t in (
                    Threshold(row, 1.0 + 1e-9, below=True),
                    Threshold(row, 1.0 - 1e-9, below=False),
                )
            )
        ),
        run=_mixture.run_nfe,
    ),
    Experiment(
        id="one_step_risk",
        claim="Where the one-step bias-variance expansion predicts LAMP lowers the risk of the "
        "reverse transition (Gaussian prior), the measured risk is lower",
        metric="Monte-Carlo one-step risk ratio R_LAMP / R_backbone (agreement: fraction)",
        lower_is_better=True,
        baselines=(_risk.HURT,),
        methods=(_risk.HELP, _risk.AGREE),
        rule=AllOf(
            (Threshold(_risk.HELP, 1.0, below=True), Threshold(_risk.AGREE, 0.9, below=False))
        ),
        run=_risk.run_risk,
    ),
    *(_digits_experiment(task) for task in _digits.TASKS),
    Experiment(
        id="digits_ssim",
        claim="LAMP raises SSIM over each backbone on digits (mean over the three tasks)",
        metric="SSIM (7x7 Gaussian window) on held-out 16x16 digits",
        lower_is_better=False,
        baselines=tuple(f"{t} {k}" for t in _digits.TASKS for k in BACKBONES),
        methods=tuple(f"{t} {k}+LAMP" for t in _digits.TASKS for k in BACKBONES)
        + tuple(f"LAMP-{k} (mean over tasks)" for k in BACKBONES),
        rule=paired_rule([f"LAMP-{k} (mean over tasks)" for k in BACKBONES], False),
        run=_digits.run_ssim,
        sizes=FULL_ONLY,
    ),
    *(_disc_nfe_experiment(bed, kind) for bed in _mixture.DISC_NFE_BEDS for kind in BACKBONES),
)
