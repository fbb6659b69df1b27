"""P07 LAMP experiments: the table of sizes and the registrations (the work is in ``_mixture``,
``_risk``, ``_digits``; plots in ``_plots``).

* ``mixture_<backbone>_d<d>`` (headline; d = 8, 80, 800, 25-Gaussian prior, m = 2, sigma_y =
  0.05) and ``gaussian_<backbone>_d16`` (Gaussian prior, m = 8, sigma_y = 0.01: a test bed where
  the backbones' bias is small): sliced W2 to the exact posterior at two NFE levels.
* ``..._disc``: the same runs scored by the distance to each sampler's own high-NFE output (the
  discretisation error that a second-order correction targets).
* ``mixture_ablation_d80``: strength x lag (differencing the denoised or the data-consistent
  estimates). ``unconditional_2m``: with A = 0, LAMP is DPM-Solver++(2M) (sanity).
  ``nfe_equal``: counted evaluations. ``one_step_risk``: the bias-variance prediction.
* ``digits_<task>`` / ``digits_ssim``: a U-Net trained here on sklearn's digits.

All LAMP rows use the default lag of the denoised prediction (see ``jaxpapers.lamp``); the
backbone rows run ``lamp(backbone, 0.0)``, the backbone bit for bit.

* ``disc_nfe_<bed>_<backbone>`` (``--full`` only, sized for a CPU by its own table
  ``_mixture.DISC_NFE``): the discretisation error against NFE (5, 10, 20, 40) with each sampler's
  own 400-step output as reference (``results/full/P07``).

Quick-mode budget: the samplers run through ``_common.run_chain``, the solver steps of
``sample_posterior`` in a ``fori_loop`` with a traced step count (bit for bit, tested), so one
compiled program per bed, backbone and lag serves tuning, both NFE levels, the high-NFE reference
and the A = 0 check; chains are a flat batch of one size per bed (tuning cells use fewer samples
per validation problem, tests only the tuned configurations); XLA backend optimisation level 1.
Quick mode is compile-bound (the d = 8 DDRM bed: 10.9 CPU-s in a fresh process, 2.0 CPU-s when
its programs are already compiled). Sizes cut in quick mode: d = 80 at 128 samples per problem.
At ``--full`` only (``Experiment.sizes``; ``--experiments`` still runs them at any size): the
d = 800 bed, the digits (quick mode could afford only an exact kernel denoiser of 64 training
digits, not the paper's learned U-Net) and the strength x lag ablation. Measured under load
average ~33 on the 2-core machine (CPU-s = user + sys): 155 CPU-s with the digits and the
ablation (digits 58, ablation 11), 89 CPU-s without them, every remaining row mean and verdict
identical. Earlier: 169 CPU-s with the d = 800 bed, 146 without it (load 25-40).
"""

from __future__ import annotations

from jaxpapers.core.experiment import AllOf, AnyOf, Experiment, Threshold, register
from jaxpapers.lamp.experiments import _digits, _mixture, _plots, _risk
from jaxpapers.lamp.experiments._common import (
    BACKBONES,
    LEVELS,
    DigitsModel,
    Sizes,
    paired_rule,
)

SIZES = {
    "smoke": Sizes(
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
    "quick": Sizes(
        nfe=(10, 20),
        ref_nfe=100,
        problems=4,
        samples=256,
        tune=True,
        risk_steps=(5, 10, 20),
        digits=DigitsModel(kind="kernel", kde_components=64),
        digits_nfe=10,
        digits_images=8,
        # d = 80 at half the samples (the d = 800 bed runs at --full only: _mixture.FULL_ONLY_DIMS).
        per_dim={80: {"samples": 128}},
    ),
    "full": Sizes(
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


# Studies that run at --full only (an explicit ``--experiments`` still runs them at any size):
# the digits (quick mode could afford only an exact kernel denoiser, not the paper's learned one,
# for 58 of the quick run's 155 CPU-s) and the strength x lag ablation (11 CPU-s, three more
# compiled programs for the data-consistent lag).
FULL_ONLY = ("full",)


def _sized(fn, *args):
    return lambda ctx: fn(ctx, ctx.pick(**SIZES), *args)


_METRICS = {
    "posterior": ("", "the exact posterior", "sliced W2 to exact posterior samples"),
    "discretisation": (
        "_disc",
        "its own high-NFE output (discretisation error)",
        "sliced W2 to the same sampler's output at ref_nfe steps (same knob, same initial noise)",
    ),
}

for _bed in _mixture.BEDS.values():
    for _kind in BACKBONES:
        for _metric, (_suffix, _target, _desc) in _METRICS.items():
            _prefix = "mixture" if _bed.prior == "grid" else "gaussian"
            register(
                Experiment(
                    paper="P07",
                    id=f"{_prefix}_{_kind.lower()}_d{_bed.dim}{_suffix}",
                    claim=f"LAMP over {_kind} is closer to {_target} than {_kind} at equal NFE "
                    f"(low and high NFE; {_bed.prior} prior, d={_bed.dim}, m={_bed.m}, "
                    f"sigma_y={_bed.sigma_y})",
                    metric=f"{_desc}; LAMP-X rows: paired per-seed difference",
                    lower_is_better=True,
                    baselines=tuple(f"{_kind} @{lv}" for lv in LEVELS),
                    methods=tuple(f"{_kind}+LAMP @{lv}" for lv in LEVELS)
                    + tuple(f"LAMP-{_kind} @{lv}" for lv in LEVELS),
                    rule=paired_rule([f"LAMP-{_kind} @{lv}" for lv in LEVELS], True),
                    run=_sized(_mixture.run_bed, _bed, _kind, _metric),
                    plot=_plots.plot_levels,
                    sizes=_mixture.bed_run_sizes(_bed),
                )
            )

_ABL = [
    [
        _mixture.ablation_row(k, g, s)
        for g in _mixture.ABLATION_STRENGTHS
        for s in _mixture.ABLATION_LAGS
    ]
    for k in BACKBONES
]
register(
    Experiment(
        paper="P07",
        id=f"mixture_ablation_d{_mixture.ABLATION_BED.dim}",
        claim="For each backbone some LAMP setting (strength 0.25/0.5/1, differencing the "
        "data-consistent (dc) or the denoised (den) estimates) lowers the sliced Wasserstein "
        f"distance to the exact posterior (d={_mixture.ABLATION_BED.dim}, high NFE)",
        metric="sliced W2 (backbone rows) and paired per-seed difference LAMP variant - backbone",
        lower_is_better=True,
        baselines=BACKBONES,
        methods=tuple(r for rows in _ABL for r in rows),
        rule=AllOf(
            tuple(AnyOf(tuple(Threshold(r, 0.0, below=True) for r in rows)) for rows in _ABL)
        ),
        run=_sized(_mixture.run_ablation),
        sizes=FULL_ONLY,
    )
)

_UNCOND = [f"LAMP-{k} @{lv}" for k in _mixture.UNCOND_SAMPLERS for lv in LEVELS]
register(
    Experiment(
        paper="P07",
        id="unconditional_2m",
        claim="Sanity check of the lagged term: with no measurement (A = 0) LAMP is "
        "DPM-Solver++(2M) and lowers the sliced Wasserstein distance to the prior (d=8 mixture) "
        "over DDIM and DDPM at equal NFE",
        metric="sliced W2 to exact prior samples; LAMP-X rows: paired per-seed difference",
        lower_is_better=True,
        baselines=tuple(f"{k} @{lv}" for k in _mixture.UNCOND_SAMPLERS for lv in LEVELS),
        methods=tuple(f"{k}+LAMP @{lv}" for k in _mixture.UNCOND_SAMPLERS for lv in LEVELS)
        + tuple(_UNCOND),
        rule=paired_rule(_UNCOND, True),
        run=_sized(_mixture.run_unconditional),
    )
)

register(
    Experiment(
        paper="P07",
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
        run=_sized(_mixture.run_nfe),
    )
)

register(
    Experiment(
        paper="P07",
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
        run=_sized(_risk.run_risk),
    )
)

for _task in _digits.TASKS:
    register(
        Experiment(
            paper="P07",
            id=f"digits_{_task}",
            claim=f"LAMP raises PSNR over each backbone on digits {_task} at equal NFE",
            metric="PSNR in dB on held-out 16x16 digits (LAMP-X rows: paired per-seed difference)",
            lower_is_better=False,
            baselines=BACKBONES,
            methods=tuple(f"{k}+LAMP" for k in BACKBONES) + tuple(f"LAMP-{k}" for k in BACKBONES),
            rule=paired_rule([f"LAMP-{k}" for k in BACKBONES], False),
            run=_sized(_digits.run_psnr, _task),
            plot=_plots.plot_examples,
            sizes=FULL_ONLY,
        )
    )

register(
    Experiment(
        paper="P07",
        id="digits_ssim",
        claim="LAMP raises SSIM over each backbone on digits (mean over the three tasks)",
        metric="SSIM (7x7 Gaussian window) on held-out 16x16 digits",
        lower_is_better=False,
        baselines=tuple(f"{t} {k}" for t in _digits.TASKS for k in BACKBONES),
        methods=tuple(f"{t} {k}+LAMP" for t in _digits.TASKS for k in BACKBONES)
        + tuple(f"LAMP-{k} (mean over tasks)" for k in BACKBONES),
        rule=paired_rule([f"LAMP-{k} (mean over tasks)" for k in BACKBONES], False),
        run=_sized(_digits.run_ssim),
        sizes=FULL_ONLY,
    )
)

# --full only, sized for a CPU (its own table ``_mixture.DISC_NFE``): discretisation error vs NFE.
for _bed in _mixture.DISC_NFE_BEDS:
    for _kind in BACKBONES:
        _prefix = "mixture" if _bed.prior == "grid" else "gaussian"
        _diffs = [_mixture.disc_nfe_row(_kind, k, None) for k in _mixture.DISC_NFE.nfe]
        register(
            Experiment(
                paper="P07",
                id=f"disc_nfe_{_prefix}_{_kind.lower()}_d{_bed.dim}",
                claim=f"LAMP over {_kind} has a smaller discretisation error than {_kind} at every "
                f"NFE in {_mixture.DISC_NFE.nfe} (distance to the sampler's own "
                f"{_mixture.DISC_NFE.ref_nfe}-step output; {_bed.prior} prior, d={_bed.dim}, "
                f"m={_bed.m}, sigma_y={_bed.sigma_y})",
                metric="sliced W2 to the same sampler's output at ref_nfe steps (same knob, same "
                "noise); LAMP-X rows: paired per-seed difference",
                lower_is_better=True,
                baselines=tuple(
                    _mixture.disc_nfe_row(_kind, k, False) for k in _mixture.DISC_NFE.nfe
                ),
                methods=tuple(_mixture.disc_nfe_row(_kind, k, True) for k in _mixture.DISC_NFE.nfe)
                + tuple(_diffs),
                rule=paired_rule(_diffs, True),
                run=lambda ctx, b=_bed, k=_kind: _mixture.run_disc_nfe(ctx, b, k),
                sizes=("full",),
            )
        )
