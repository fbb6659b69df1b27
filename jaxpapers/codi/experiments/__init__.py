"""P01 experiments, registered for ``jaxpapers reproduce P01``.

One vmapped pretraining run trains every (lambda, seed) pair (lambda = 0 is iBOT, bit for bit:
see ``sanity``) on 32x32 scenes; frozen teacher features are probed per patch (linear probe:
dense accuracy, mIoU) and per image ([CLS] k-NN on the largest object's class). The same probes
run on the untrained network of each seed (its initial teacher), and the majority-class
prediction is reported beside them, so every table shows whether pretraining learned anything
(the background is ~76% of the patches, so a dense accuracy near 0.76-0.79 is no evidence of
learning by itself). The results are shared by:

* ``pretraining_learns`` (precondition): iBOT's features beat the untrained network's on dense
  accuracy, mIoU and k-NN. ``codi_vs_ibot``, ``low_attention_patches`` and ``lambda_sweep``
  declare it in ``requires``: comparing two pretrainings that did not learn says nothing about
  CODI, so while it does not hold their verdicts are "inconclusive (precondition not met)" and
  their rows and own rule verdicts are still reported;
* ``codi_vs_ibot`` (headline, the abstract's "improves both dense and image-level
  performance"): dense and k-NN accuracy of CODI (lambda = 0.1) above iBOT's, with the
  untrained-network and majority-class rows as references (the collapse diagnostics of every run,
  teacher target entropies, centre norm and feature std, are in the extras);
* ``low_attention_patches``: the dense error reduction of CODI in the lowest [CLS]-attention
  bin exceeds the reduction in the highest bin;
* ``lambda_sweep``: dense accuracy against lambda;
* ``sanity``: lambda = 0 gives iBOT's parameters bit for bit after a few steps, and the autodiff
  read-out gradient equals the attention-weighted closed form (log-log slope of the gradient norm
  against the attention mass in the extras).

Recipe at quick size: EMA momentum from 0.95 (not DINO's 0.996: with a few hundred steps a slow
teacher stays close to its random initialisation), a constant teacher temperature 0.04 and AdamW
at 3e-4. With the earlier 0.99 / 0.04->0.07 / 1e-3 the distillation loss rose from 3.8 to 7.4
(above log K = 4.16: the student fits targets it cannot follow) and the teacher targets stayed
nearly uniform (per-image entropy 3.6 of 4.16); with this recipe the loss falls (3.8 -> 3.3) and
the targets sharpen (per-image entropy ~0.9, entropy of the mean ~2.4: no collapse), measured on
one seed of 150 steps at dim 64; quick now runs dim 32 to fit its CPU budget. The probes still
show no gain over the untrained network (see the package docstring for the diagnosis).
``--full`` uses DINO's schedules (0.996, 0.04 -> 0.07, 5e-4).
"""

from __future__ import annotations

from typing import NamedTuple

from jaxpapers.codi.experiments._plots import plot_bins
from jaxpapers.codi.experiments._runs import pretrain_and_evaluate, sanity
from jaxpapers.core.experiment import (
    AllOf,
    AnyOf,
    Better,
    Context,
    Experiment,
    Outcome,
    Threshold,
    register,
)


class Sizes(NamedTuple):
    steps: int
    batch: int
    train_n: int
    test_n: int
    dim: int
    depth: int
    out_dim: int
    probe_steps: int
    knn_k: int
    lr: float
    momentum_base: float
    teacher_temp_end: float


def sizes(ctx: Context) -> Sizes:
    return ctx.pick(
        smoke=Sizes(
            steps=3,
            batch=4,
            train_n=16,
            test_n=8,
            dim=16,
            depth=1,
            out_dim=8,
            probe_steps=5,
            knn_k=2,
            lr=3e-4,
            momentum_base=0.95,
            teacher_temp_end=0.04,
        ),
        quick=Sizes(
            steps=100,
            batch=32,
            train_n=512,
            test_n=256,
            dim=32,
            depth=2,
            out_dim=32,
            probe_steps=200,
            knn_k=10,
            lr=3e-4,
            momentum_base=0.95,
            teacher_temp_end=0.04,
        ),
        full=Sizes(
            steps=5000,
            batch=256,
            train_n=8192,
            test_n=2048,
            dim=192,
            depth=6,
            out_dim=1024,
            probe_steps=1000,
            knn_k=20,
            lr=5e-4,
            momentum_base=0.996,
            teacher_temp_end=0.07,
        ),
    )


#: lambda values pretrained at every size (0 = iBOT); CODI's headline row uses CODI_LAMBDA.
LAMBDAS = (0.0, 0.1, 0.3)
CODI_LAMBDA = 0.1
IBOT, CODI = "iBOT", f"CODI (lambda={CODI_LAMBDA:g})"
#: reference rows: the same probes on the untrained network, and the majority-class prediction.
INIT, MAJORITY = "untrained ViT", "majority class"


def _shared(ctx: Context) -> dict:
    s = sizes(ctx)
    return ctx.cached(
        f"pretrain_{ctx.size}", lambda: pretrain_and_evaluate(ctx, s, LAMBDAS), shared=True
    )


def run_codi_vs_ibot(ctx: Context) -> Outcome:
    res = _shared(ctx)
    base, codi = res["0"], res[f"{CODI_LAMBDA:g}"]
    init, major = res["init"], res["majority"]
    values = {
        f"{MAJORITY} dense": major["dense"],
        f"{INIT} dense": init["dense"],
        f"{IBOT} dense": base["dense"],
        f"{CODI} dense": codi["dense"],
        f"{MAJORITY} k-NN": major["knn"],
        f"{INIT} k-NN": init["knn"],
        f"{IBOT} k-NN": base["knn"],
        f"{CODI} k-NN": codi["knn"],
    }
    extras = {
        "mIoU": {
            MAJORITY: major["miou"],
            INIT: init["miou"],
            IBOT: base["miou"],
            CODI: codi["miou"],
        },
        "final_loss": {IBOT: base["final_loss"], CODI: codi["final_loss"]},
        "all_losses_finite": all(res["finite"]),
        "collapse_diagnostics (per run, runs in the order of 'runs')": res["diagnostics"],
        "runs (lambda, seed)": res["runs"],
    }
    return Outcome(values, extras)


def run_pretraining_learns(ctx: Context) -> Outcome:
    res = _shared(ctx)
    base, init = res["0"], res["init"]
    values = {
        f"{INIT} dense": init["dense"],
        f"{IBOT} dense": base["dense"],
        f"{INIT} mIoU": init["miou"],
        f"{IBOT} mIoU": base["miou"],
        f"{INIT} k-NN": init["knn"],
        f"{IBOT} k-NN": base["knn"],
    }
    return Outcome(values, {"majority class": res["majority"]})


def run_low_attention(ctx: Context) -> Outcome:
    res = _shared(ctx)
    base, codi = res["0"], res[f"{CODI_LAMBDA:g}"]
    gain = [
        [b - c for b, c in zip(bb, cb, strict=True)]
        for bb, cb in zip(base["bins"], codi["bins"], strict=True)
    ]
    values = {
        "error reduction, lowest-attention bin": [g[0] for g in gain],
        "error reduction, highest-attention bin": [g[-1] for g in gain],
    }
    return Outcome(values, {"binned_error": {IBOT: base["bins"], CODI: codi["bins"]}})


def run_lambda_sweep(ctx: Context) -> Outcome:
    res = _shared(ctx)
    lams = LAMBDAS
    values = {f"lambda={lam:g}": res[f"{lam:g}"]["dense"] for lam in lams}
    extras = {
        "knn": {f"lambda={lam:g}": res[f"{lam:g}"]["knn"] for lam in lams},
        "miou": {f"lambda={lam:g}": res[f"{lam:g}"]["miou"] for lam in lams},
    }
    return Outcome(values, extras)


def run_sanity(ctx: Context) -> Outcome:
    res = ctx.cached("sanity", lambda: sanity(ctx, sizes(ctx)))
    values = {
        "max |CODI(lambda=0) - iBOT| parameters": res["diff"],
        "read-out gradient: max relative error of the closed form": res["relerr"],
    }
    return Outcome(values, {"loglog_slope_grad_norm_vs_attention_mass": res["slope"]})


register(
    Experiment(
        paper="P01",
        id="pretraining_learns",
        claim="Reference: iBOT pretraining improves the frozen teacher features over the same "
        "untrained network (dense probe accuracy, mIoU and [CLS] k-NN accuracy)",
        metric="accuracy / mIoU (frozen teacher features vs the untrained network)",
        lower_is_better=False,
        baselines=(f"{INIT} dense", f"{INIT} mIoU", f"{INIT} k-NN"),
        methods=(f"{IBOT} dense", f"{IBOT} mIoU", f"{IBOT} k-NN"),
        rule=AllOf(tuple(Better(f"{IBOT} {m}", f"{INIT} {m}") for m in ("dense", "mIoU", "k-NN"))),
        run=run_pretraining_learns,
    )
)

register(
    Experiment(
        paper="P01",
        id="codi_vs_ibot",
        claim="CODI improves both dense (per-patch probe) and image-level (k-NN) accuracy over "
        "iBOT at equal pretraining budget (meaningful only when pretraining_learns holds)",
        metric="accuracy (frozen teacher features)",
        lower_is_better=False,
        baselines=(
            f"{MAJORITY} dense",
            f"{INIT} dense",
            f"{IBOT} dense",
            f"{MAJORITY} k-NN",
            f"{INIT} k-NN",
            f"{IBOT} k-NN",
        ),
        methods=(f"{CODI} dense", f"{CODI} k-NN"),
        rule=AllOf(
            (
                Better(f"{CODI} dense", f"{IBOT} dense"),
                Better(f"{CODI} k-NN", f"{IBOT} k-NN"),
            )
        ),
        run=run_codi_vs_ibot,
        requires=("pretraining_learns",),
    )
)

register(
    Experiment(
        paper="P01",
        id="low_attention_patches",
        claim="CODI shrinks the dense error most on the patches the [CLS] token attends to least",
        metric="dense error of iBOT minus CODI in an attention-mass bin",
        lower_is_better=False,
        baselines=("error reduction, highest-attention bin",),
        methods=("error reduction, lowest-attention bin",),
        rule=Better(
            "error reduction, lowest-attention bin", "error reduction, highest-attention bin"
        ),
        run=run_low_attention,
        plot=plot_bins,
        requires=("pretraining_learns",),
    )
)


_SWEEP = tuple(f"lambda={lam:g}" for lam in LAMBDAS[1:])

register(
    Experiment(
        paper="P01",
        id="lambda_sweep",
        claim="some small lambda > 0 improves dense accuracy over lambda = 0 (iBOT)",
        metric="dense per-patch probe accuracy",
        lower_is_better=False,
        baselines=("lambda=0",),
        methods=_SWEEP,
        rule=AnyOf(tuple(Better(r, "lambda=0") for r in _SWEEP)),
        run=run_lambda_sweep,
        requires=("pretraining_learns",),
    )
)

_SANITY_ROWS = (
    "max |CODI(lambda=0) - iBOT| parameters",
    "read-out gradient: max relative error of the closed form",
)

register(
    Experiment(
        paper="P01",
        id="sanity",
        claim="Sanity: lambda = 0 reproduces iBOT (its targets bit for bit, tested; the states "
        "after 3 Adam steps of the two separately compiled float32 programs within 1e-3, Adam "
        "turning rounding-level gradient differences into step-size-level ones), and the "
        "read-out gradient w.r.t. patch tokens equals the attention-weighted closed form",
        metric="max abs parameter difference / max relative gradient error",
        lower_is_better=True,
        baselines=(),
        methods=_SANITY_ROWS,
        rule=AllOf((Threshold(_SANITY_ROWS[0], 1e-3), Threshold(_SANITY_ROWS[1], 1e-4))),
        run=run_sanity,
    )
)
