"""The run functions of the P04 experiments: each reads one study's cached result and returns its
rows (the studies live in ``_mixture``, ``_digits`` and ``_ar``)."""

from __future__ import annotations

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.scale.experiments._ar import ARStudy, ar_study
from jaxpapers.scale.experiments._config import Config
from jaxpapers.scale.experiments._digits import DigitsStudy, digits_study
from jaxpapers.scale.experiments._mixture import SCALE_AT_W, MixtureStudy, mixture_study

#: The rows of ``sanity_limits``: the four limits, then the guided-target errors.
SANITY_ROWS = {
    "|CFG(w=1) - conditional| (samples, max)": "cfg",
    "|GFT(beta=1) - conditional| (loss)": "gft",
    "|MG(w=1) - conditional| (loss)": "mg",
    "|SCALE(w=1, no self term) - conditional| (loss)": "scale",
    "CFG(w=3) error to exact guided eps": "to_guided",
    "CFG(w=3) error to exact unguided eps": "to_conditional",
}
LIMIT_ROWS = tuple(SANITY_ROWS)[:4]
HEADLINE = ("CFG", "GFT", "MG", "SCALE")
DPO_SW, DPO_MISS = "sliced Wasserstein", "missed support (1 - recall)"
#: The rows of ``mixture2d_self_score_fit``: SCALE's online self network psi against a self
#: network psi' refitted offline on fresh self samples, the contrast of psi' with the exact data
#: predictor, and their per-seed ratio.
SELF_ERROR = "online self network error |eps_psi - eps_psi'|^2"
SELF_CONTRAST = "contrast |eps_data - eps_psi'|^2"
SELF_RATIO = "error / contrast"
#: A second offline refit psi'' (fresh samples of the same likelihood model, fresh key) against
#: psi': the error of an offline refit itself, the floor of what the error row can measure.
SELF_FLOOR = "refit-vs-refit floor |eps_psi'' - eps_psi'|^2"
SELF_OVER_FLOOR = "error / floor"


def _mixture(ctx: Context, config: Config, dim: int) -> MixtureStudy:
    """The ``dim``-D mixture study, computed once per run and shared by its experiments (the 2-D
    bed with its DPO stage and the ``sanity_limits`` numbers)."""
    return ctx.cached(
        f"mixture{dim}d",
        lambda: mixture_study(config, dim, ctx.seed_list, with_dpo=dim == 2, with_sanity=dim == 2),
    )


def run_sanity(ctx: Context, config: Config) -> Outcome:
    """``sanity_limits`` from the 2-D study's conditional model (the same program)."""
    r = _mixture(ctx, config, 2).sanity
    values = {row: r[key] for row, key in SANITY_ROWS.items()}
    return Outcome(values, {"note": "limits at equal keys; eps errors are mean squared norms"})


def run_mixture(
    ctx: Context,
    config: Config,
    *,
    dim: int,
    rows: tuple[str, ...],
    metric: str,
    samples: bool = False,
) -> Outcome:
    """The ``dim``-D study's ``rows`` of ``metric``; the extras carry the study's numbers, and
    its 2-D sample scatter only where ``samples`` (one experiment keeps them in ``result.json``)."""
    r = _mixture(ctx, config, dim)
    values = {row: r.rows[row][metric] for row in rows}
    return Outcome(values, r.extras(samples=samples))


def run_dpo(ctx: Context, config: Config) -> Outcome:
    """SCALE before and after DPO, judged on what the preference pairs were not ranked by.

    The pairs are ranked by the true class log-likelihood, so that quantity (and precision, a
    threshold on it) is the DPO step's own objective and judges nothing: it is in the extras.
    The rows are the sliced Wasserstein distance of the samples to held-out exact samples (the
    analogue of the paper's FID: distance between distributions) and the missed support, one
    minus the k-NN recall (coverage of the held-out samples). DPO's beta is chosen per seed
    on the validation draw by the sliced Wasserstein distance (extras: the grid and the choice).
    """
    study = _mixture(ctx, config, 2)
    r = study.rows
    values = {}
    # DPO fine-tunes SCALE trained at ``config.scale_w`` (not the per-seed tuned SCALE row)
    pairs = (("SCALE", SCALE_AT_W), ("SCALE+DPO", "SCALE+DPO"))
    for row, key in pairs:
        values[f"{row} {DPO_SW}"] = r[key]["sw"]
        values[f"{row} {DPO_MISS}"] = [1.0 - v for v in r[key]["recall"]]
    extras = {
        "SCALE's trained w": config.scale_w,
        "DPO beta grid": list(config.dpo_betas),
        "DPO beta chosen per seed (validation sliced Wasserstein)": study.dpo_beta,
        "ranking signal, not judged (log_lik)": {row: r[key]["log_lik"] for row, key in pairs},
        "precision (a threshold on the ranking signal), not judged": {
            row: r[key]["precision"] for row, key in pairs
        },
    }
    return Outcome(values, extras)


def run_self_score_fit(ctx: Context, config: Config) -> Outcome:
    """The 2-D study's self-score diagnostic (``_oracle.self_score_error``) as rows: SCALE's
    online self network at ``scale_w`` against one refitted offline, the refit's contrast, and
    their ratio per seed; a second refit against the first (the floor) and the error over it."""
    d = _mixture(ctx, config, 2).self_score_fit
    ratio = [e / c for e, c in zip(d["error"], d["contrast"], strict=True)]
    over_floor = [e / f for e, f in zip(d["error"], d["floor"], strict=True)]
    values = {
        SELF_ERROR: d["error"],
        SELF_CONTRAST: d["contrast"],
        SELF_FLOOR: d["floor"],
        SELF_RATIO: ratio,
        SELF_OVER_FLOOR: over_floor,
    }
    extras = {
        "SCALE's trained w": config.scale_w,
        "replay buffer (refreshes)": config.replay,
        "self samples per refresh": config.self_batch,
        "refit: fresh samples, Adam steps": [config.self_fit_samples, config.self_fit_steps],
    }
    return Outcome(values, extras)


def run_digits(ctx: Context, config: Config, *, metric: str) -> Outcome:
    """The digits study's headline rows of ``metric`` (``"accuracy"`` or ``"frechet"``)."""
    r: DigitsStudy = ctx.cached("digits", lambda: digits_study(config, ctx.seed_list))
    return Outcome({row: r.rows[row][metric] for row in HEADLINE}, r._asdict())


def run_ar(ctx: Context, config: Config) -> Outcome:
    """The token-model study's log-likelihood rows."""
    r: ARStudy = ctx.cached("ar", lambda: ar_study(config, ctx.seed_list))
    return Outcome({row: v["log_lik"] for row, v in r.rows.items()}, r._asdict())
