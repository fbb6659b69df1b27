"""P06 kFFM experiments: MMD-RBF of kFFM (each kernel) vs FFM vs Euclidean minibatch OT, the
data-vs-data MMD floor, Euler steps to integrate each learned flow, and the pair draw.

Data sets, each scaled to unit variance:

* 1-D (32-point grids in quick mode, 128 in ``--full``): GP-mixture time series,
  stochastic-oscillator paths, viscous Burgers solutions and Allen-Cahn reaction-diffusion
  solutions; five pairings (``ffm`` independent, ``ot_euclid`` Euclidean OT on the grid,
  ``kffm_rbf``, ``kffm_sobolev``, ``kffm_signature``), FNO1d.
* 2-D (smoke and ``--full`` only; 16 x 16 in the ``long_*`` CPU study, 32 x 32 at ``--full``
  size): 2-D heat-equation fields and 2-D
  Navier-Stokes vorticity fields (the FNO benchmark in miniature: Kolmogorov-type forcing,
  viscosity 1e-3, time 5, solved on a 2x finer grid) on the periodic unit square, a 2-D GP
  prior, FNO2d, and the four pairings that apply to fields (the signature kernel is a path kernel,
  1-D only; the Sobolev kernel uses the 2-D gradient).

Within each family (1-D, 2-D) the pairings share one budget: for every seed the models start
from the same FNO initialisation and see the same data batches, prior draws and times, so they
differ only in how prior and data are paired. All ``data sets x pairings x seeds`` models of a
family train in one jitted program (parameters stacked, the FNO ``vmap``-ed, one Sinkhorn solve
per model and step) through :func:`jaxpapers.core.train.train` with orbax checkpoints; the
experiments share the data sets, the trained models' scores and the pair draws through
``ctx.cached``, so ``--resume`` repeats nothing.

Samples: each learned field is integrated from fresh GP draws with diffrax (adaptive Tsit5; Euler
with 2 steps in smoke mode) and compared with held-out data by the unbiased MMD-RBF with
per-grid-point bandwidths 0.1/0.2/0.5/1 (``jaxpapers.core.metrics.mmd_rbf``); density MSE,
spectrum MSE, the Hilbert Sinkhorn divergence (RBF on L2) and the evaluation counts go into the
extras.

The floor: every MMD table carries the row ``data_floor``, the MMD between two random
halves of the held-out set (one split per seed). It is what the estimator reports for two samples
of the *same* distribution, so a difference between two pairings smaller than its root mean
square is not resolved by the table, whatever the seed spread says (the seeds share one held-out
set). The verdicts use :class:`~jaxpapers.kffm.experiments._rules.FloorBetter`: the paired
per-seed test decides, and the floor (rescaled from the halves' sample size to the scoring
size: half the measured root mean square, ``FLOOR_SCALE``) only turns a "holds" whose mean gain
lies inside it into "inconclusive"; a significant wrong-way difference reads "does not hold"
(the models of a seed share held-out set and prior draws, so that common noise cancels in the
paired differences).

Evaluations (``evals_burgers``): straighter paths should show first in how few steps integrate
the learned flow, not in the converged samples. The former target (MMD below a tenth of the
prior's) mixed each model's bias into the count and was never reached by some models at quick
size (ties at "2 x max"). Now each Burgers model is integrated with 1..16 Euler steps from the
same prior draws as its adaptive Tsit5 solve, and the row is the (log-log interpolated) number of
steps at which the RMS distance per grid point to the Tsit5 endpoints falls to 0.1 (a tenth of
the data's scale): a continuous, bias-free measure of the learned flow's curvature. The MMD
curves and the steps to the former MMD target stay in the extras.

Pair draws (``pairing_draws``): draws with replacement (one categorical draw per row of the plan)
use only part of a batch's data functions. ``replace=False`` of the pairings draws a random
permutation that follows the plan, so each data function is used once. The experiment measures,
from one plan per pairing, the distinct fraction and the pairs' transport cost (mean squared L2
distance) for both draws. Quick mode does not train a second set of models with the permutation
draw, so the effect of the draw on the MMD is not measured there (the trained models use the
paper's draw, with replacement).

Budget (issues 20, 11): quick mode trains the 1-D family on 32-point grids for 100 steps (FNO
width 16, 8 modes, depth 2), scores 256 held-out functions, and runs the Euler curves only on
the Burgers models (128 draws); the 2-D family (256 training fields, FNO width 12, 80 steps at
its quick sizes) and its experiments (``mmd_heat2d``, ``mmd_ns2d``, ``kernels_pde_2d``) run at
smoke and ``--full`` only. At these sizes the models are undertrained: the MMD claims need
longer training than quick mode allows and are not resolvable in quick mode; ``--full`` trains
5,000 steps at 128 points. The evaluation experiment resolves already at quick size. Measured
costs and their history: ``results/P06/NOTES.md``.

Longer training on a CPU ("--full trains to convergence"): the ``long_*``
experiments are the quick test beds trained ``LONG_STEPS`` steps (2,000 in 1-D, 1,000 in 2-D;
same grids, widths, data, seeds and rules, families of their own with their own checkpoints and
scores), declared for ``--full`` only; ``results/full/P06`` holds such a run with its command.
The full sizes proper (128-point grids, FNO width 64, 5,000 steps) are meant for an accelerator.
The ``long_draw_*`` pair (``DRAW_METHODS``, Burgers) trains Euclidean OT and kFFM-Sobolev with
the plan drawn with replacement (the paper's draw) and without (``*_perm``).

Layout: ``__init__`` holds the configurations (``SIZES``) and the experiments
(``EXPERIMENTS``); data sets, pairings, the prior and the configuration record in ``_data.py``,
training in ``_train.py``, scoring in ``_score.py``, the pair-draw statistics in ``_draws.py``,
the run functions in ``_runs.py``, the floor-aware rule in ``_rules.py``, plots in
``_plots.py``.
"""

from __future__ import annotations

import dataclasses
import functools

from jaxpapers.core.experiment import AllOf, AnyOf, Better, Experiment, Threshold
from jaxpapers.kffm.experiments._data import Config, Family, Sizes
from jaxpapers.kffm.experiments._draws import OT_PAIRINGS
from jaxpapers.kffm.experiments._plots import (
    plot_evals,
    plot_fields,
    plot_kernels_pde,
    plot_samples,
)
from jaxpapers.kffm.experiments._rules import FloorBetter
from jaxpapers.kffm.experiments._runs import (
    FLOOR,
    FLOOR_SCALE,
    PATH_TOL,
    family_of,
    row,
    run_draws,
    run_evals,
    run_kernels_pde,
    run_mmd,
)
from jaxpapers.kffm.experiments._score import EULER_STEPS

BASELINES = ("ffm", "ot_euclid")
KFFM = ("kffm_rbf", "kffm_sobolev", "kffm_signature")
# Function-space-aware kernels (derivatives, path structure), as opposed to RBF on plain L2.
FUNCTION_SPACE_KERNELS = ("kffm_sobolev", "kffm_signature")

DATASETS = ("gp_mixture", "oscillator", "burgers", "reaction_diffusion")
DATASETS_2D = ("heat2d", "ns2d")
FAMILY_1D = Family(
    name="1d",
    ndim=1,
    datasets=DATASETS,
    methods=("ffm", "ot_euclid", "kffm_rbf", "kffm_sobolev", "kffm_signature"),
    sizes="1d",
    curves=("burgers",),
)
FAMILY_2D = Family(
    name="2d",
    ndim=2,
    datasets=DATASETS_2D,
    methods=("ffm", "ot_euclid", "kffm_rbf", "kffm_sobolev"),
    sizes="2d",
    curves=(),
)
FAMILIES = (FAMILY_1D, FAMILY_2D)
# The long study: the quick test beds trained longer (``Config.sizes_*_long``), at --full only.
FAMILY_1D_LONG = dataclasses.replace(FAMILY_1D, name="1d_long", sizes="1d_long")
FAMILY_2D_LONG = dataclasses.replace(FAMILY_2D, name="2d_long", sizes="2d_long")
# The pair draw in training: two OT pairings, each drawn with replacement (the paper's
# draw) and without (``*_perm``), on Burgers, trained like ``FAMILY_1D_LONG``.
DRAW_METHODS = ("ot_euclid", "ot_euclid_perm", "kffm_sobolev", "kffm_sobolev_perm")
FAMILY_DRAW_LONG = dataclasses.replace(
    FAMILY_1D_LONG, name="draw_long", datasets=("burgers",), methods=DRAW_METHODS
)
PDE_DATASETS = ("burgers", "reaction_diffusion", "heat2d", "ns2d")
LONG_STEPS = {"1d": 2000, "2d": 1000}

# Quick sizes: 32-point 1-D grids; 2-D 16 x 16 fields and a small FNO2d (budget); --full is
# 128 points and 32 x 32.
_SMOKE_1D = Sizes(
    n_train=64, n_test=32, grid=32, batch=16, steps=3, width=8, modes=4, depth=1, lr=2e-3
)
_SMOKE_2D = Sizes(
    n_train=64, n_test=32, grid=8, batch=16, steps=3, width=8, modes=2, depth=1, lr=2e-3
)
_QUICK_1D = Sizes(
    n_train=1024, n_test=256, grid=32, batch=64, steps=100, width=16, modes=8, depth=2, lr=3e-3,
    n_curve=128,
)  # fmt: skip
_QUICK_2D = Sizes(
    n_train=256, n_test=256, grid=16, batch=32, steps=80, width=12, modes=6, depth=2, lr=3e-3
)
SIZES = {
    "smoke": Config(
        sizes_1d=_SMOKE_1D,
        sizes_2d=_SMOKE_2D,
        sizes_1d_long=_SMOKE_1D,
        sizes_2d_long=_SMOKE_2D,
        solver="euler",
        solver_steps=2,
        euler_steps=(1, 2),
        checkpoint_every=3,
    ),
    "quick": Config(
        sizes_1d=_QUICK_1D,
        sizes_2d=_QUICK_2D,
        sizes_1d_long=_QUICK_1D,
        sizes_2d_long=_QUICK_2D,
        solver="tsit5",
        solver_steps=0,
        euler_steps=EULER_STEPS,
        checkpoint_every=100,
    ),
    "full": Config(
        sizes_1d=Sizes(
            n_train=4096, n_test=1024, grid=128, batch=128, steps=5000, width=64, modes=16,
            depth=4, lr=1e-3, n_curve=256,
        ),
        sizes_2d=Sizes(
            n_train=4096, n_test=1024, grid=32, batch=64, steps=5000, width=32, modes=12,
            depth=4, lr=1e-3,
        ),
        sizes_1d_long=dataclasses.replace(_QUICK_1D, steps=LONG_STEPS["1d"]),
        sizes_2d_long=dataclasses.replace(_QUICK_2D, steps=LONG_STEPS["2d"]),
        solver="tsit5",
        solver_steps=0,
        euler_steps=(*EULER_STEPS, 24, 32),
        checkpoint_every=500,
    ),
}  # fmt: skip

# The 2-D family's experiments run at smoke and --full sizes only (budget).
NOT_QUICK = ("smoke", "full")
ALL_SIZES = ("smoke", "quick", "full")


def _pde_rows(
    datasets: tuple[str, ...], families: tuple[Family, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Baseline and method rows of a ``kernels_pde`` experiment: every pairing of every PDE
    data set in ``datasets``."""
    baselines, methods = [], []
    for d in datasets:
        for m in family_of(d, families).methods:
            (methods if m in FUNCTION_SPACE_KERNELS else baselines).append(row(d, m))
        baselines.append(row(d, FLOOR))
    return tuple(baselines), tuple(methods)


def _pde_rule(datasets: tuple[str, ...], families: tuple[Family, ...]) -> AllOf:
    """Per PDE data set: some function-space kernel beats kFFM-RBF (L2) and Euclidean OT, beyond
    the seed spread and that data set's MMD floor."""
    per_dataset = []
    for d in datasets:
        candidates = [m for m in family_of(d, families).methods if m in FUNCTION_SPACE_KERNELS]
        wins = [
            AllOf(
                tuple(
                    FloorBetter(row(d, k), row(d, b), row(d, FLOOR), FLOOR_SCALE)
                    for b in ("kffm_rbf", "ot_euclid")
                )
            )
            for k in candidates
        ]
        per_dataset.append(wins[0] if len(wins) == 1 else AnyOf(tuple(wins)))
    return AllOf(tuple(per_dataset))


def _best_of(best: str) -> AllOf:
    return AllOf(tuple(FloorBetter(best, b, FLOOR, FLOOR_SCALE) for b in BASELINES))


_METRIC = "MMD^2-RBF to held-out data (unbiased, bandwidths 0.1/0.2/0.5/1 per grid point)"

_MMD_CLAIMS = (
    ("gp_mixture", "kffm_rbf", "Time series (GP mixture): kFFM with an RBF kernel on L2"),
    (
        "oscillator",
        "kffm_signature",
        "Path-valued data (stochastic oscillator): kFFM with the signature kernel",
    ),
    (
        "burgers",
        "kffm_sobolev",
        "PDE data (viscous Burgers): kFFM with the derivative-aware Sobolev kernel",
    ),
    (
        "reaction_diffusion",
        "kffm_sobolev",
        "PDE data (Allen-Cahn reaction-diffusion): kFFM with the derivative-aware Sobolev kernel",
    ),
    (
        "heat2d",
        "kffm_sobolev",
        "2-D PDE data (heat equation; 16 x 16 quick, 32 x 32 full): kFFM with the Sobolev kernel "
        "on the 2-D gradient",
    ),
    (
        "ns2d",
        "kffm_sobolev",
        "2-D PDE data (Navier-Stokes vorticity; 16 x 16 quick, 32 x 32 full): kFFM with the "
        "function-space-aware Sobolev kernel on the 2-D gradient",
    ),
)

_PDE_CLAIM = (
    "Function-space-aware kernels are best on PDE data: on each of {names}, the better of the "
    "Sobolev and signature kernels (Sobolev only in 2-D) has lower MMD than kFFM with an RBF "
    "kernel on L2 and than Euclidean OT"
)
_PDE_NAMES = {
    "1d": "Burgers and Allen-Cahn",
    "2d": "2-D heat and 2-D Navier-Stokes",
}


def _family_experiments(prefix: str, families: tuple[Family, ...], sizes) -> tuple:
    """The MMD tables, the evaluation experiment and the PDE-kernel comparisons of ``families``
    (ids ``<prefix>mmd_<data set>``, ``<prefix>evals_burgers``, ``<prefix>kernels_pde[_2d]``);
    ``sizes(fam)`` gives the run sizes of each family's experiments."""
    note = (
        ""
        if not prefix
        else f" (quick sizes trained {LONG_STEPS['1d']:,} steps in 1-D, "
        f"{LONG_STEPS['2d']:,} in 2-D)"
    )
    mmd = tuple(
        Experiment(
            id=f"{prefix}mmd_{data}",
            claim=f"{subject} has lower MMD than FFM and than Euclidean minibatch-OT pairing{note}",
            metric=_METRIC,
            lower_is_better=True,
            baselines=(*BASELINES, FLOOR),
            methods=tuple(m for m in fam.methods if m not in BASELINES),
            rule=_best_of(kernel),
            run=functools.partial(run_mmd, dataset=data, family=fam),
            plot=plot_samples if fam.ndim == 1 else plot_fields,
            sizes=sizes(fam),
        )
        for data, kernel, subject in _MMD_CLAIMS
        for fam in [family_of(data, families)]
    )
    evals = Experiment(
        id=f"{prefix}evals_burgers",
        claim="Straighter paths: kFFM (Sobolev) needs fewer Euler steps than FFM to integrate "
        "its learned flow on Burgers to a fixed accuracy (RMS distance per grid point to the "
        f"same model's adaptive Tsit5 endpoints <= {PATH_TOL:g}, data at unit variance){note}",
        metric="Euler steps (= field evaluations) to reach the tolerance, log-log "
        "interpolated on the step grid (first-order extrapolation beyond it)",
        lower_is_better=True,
        baselines=BASELINES,
        methods=KFFM,
        rule=Better("kffm_sobolev", "ffm"),
        run=functools.partial(run_evals, family=families[0]),
        plot=plot_evals,
        sizes=sizes(families[0]),
    )
    pde = tuple(
        Experiment(
            id=f"{prefix}kernels_pde" + ("_2d" if fam.ndim == 2 else ""),
            claim=_PDE_CLAIM.format(names=_PDE_NAMES[f"{fam.ndim}d"]) + note,
            metric=_METRIC + "; rows are data set/pairing",
            lower_is_better=True,
            baselines=_pde_rows(datasets, families)[0],
            methods=_pde_rows(datasets, families)[1],
            rule=_pde_rule(datasets, families),
            run=functools.partial(run_kernels_pde, datasets=datasets, families=families),
            plot=plot_kernels_pde,
            sizes=sizes(fam),
        )
        for fam in families
        for datasets in [tuple(d for d in PDE_DATASETS if d in fam.datasets)]
    )
    return (*mmd, evals, *pde)


_DRAW_NOTE = (
    f" (Burgers, the quick test bed trained {LONG_STEPS['1d']:,} steps; the same plans drawn "
    "with replacement, one categorical draw per row, and without, a permutation that follows "
    "the plan)"
)

EXPERIMENTS = (
    *_family_experiments("", FAMILIES, lambda fam: ALL_SIZES if fam.ndim == 1 else NOT_QUICK),
    *_family_experiments("long_", (FAMILY_1D_LONG, FAMILY_2D_LONG), lambda fam: ("full",)),
    Experiment(
        id="pairing_draws",
        claim="sanity and diagnosis of the pair draw: drawn without replacement from the plan, "
        "every data function of a batch is used exactly once (distinct fraction 1); drawn with "
        "replacement (one categorical draw per row of the plan), kFFM-Sobolev uses fewer than "
        "90% of them",
        metric="fraction of distinct data functions among a batch's pairs (1-D data sets x seeds)",
        lower_is_better=False,
        baselines=tuple(f"{p}/with" for p in OT_PAIRINGS),
        methods=tuple(f"{p}/without" for p in OT_PAIRINGS),
        rule=AllOf(
            (
                *(Threshold(f"{p}/without", 0.999, below=False) for p in OT_PAIRINGS),
                Threshold("kffm_sobolev/with", 0.9),
            )
        ),
        run=functools.partial(run_draws, family=FAMILY_1D),
    ),
    Experiment(
        id="long_draw_evals_burgers",
        claim="Pairs drawn without replacement straighten the learned flow more: kFFM-Sobolev "
        "and Euclidean OT trained on permutation draws need fewer Euler steps than the same "
        "pairings drawn with replacement" + _DRAW_NOTE,
        metric="Euler steps to RMS distance per grid point <= 0.1 to the model's own Tsit5 "
        "endpoints (as evals_burgers)",
        lower_is_better=True,
        baselines=("ot_euclid", "kffm_sobolev"),
        methods=("ot_euclid_perm", "kffm_sobolev_perm"),
        rule=AllOf(
            (Better("kffm_sobolev_perm", "kffm_sobolev"), Better("ot_euclid_perm", "ot_euclid"))
        ),
        run=functools.partial(run_evals, family=FAMILY_DRAW_LONG),
        plot=plot_evals,
        sizes=("full",),
    ),
    Experiment(
        id="long_draw_mmd_burgers",
        claim="Pairs drawn without replacement give lower MMD than the same pairings drawn "
        "with replacement, beyond the data-vs-data floor" + _DRAW_NOTE,
        metric=_METRIC,
        lower_is_better=True,
        baselines=("ot_euclid", "kffm_sobolev", FLOOR),
        methods=("ot_euclid_perm", "kffm_sobolev_perm"),
        rule=AllOf(
            (
                FloorBetter("kffm_sobolev_perm", "kffm_sobolev", FLOOR, FLOOR_SCALE),
                FloorBetter("ot_euclid_perm", "ot_euclid", FLOOR, FLOOR_SCALE),
            )
        ),
        run=functools.partial(run_mmd, dataset="burgers", family=FAMILY_DRAW_LONG),
        sizes=("full",),
    ),
)
