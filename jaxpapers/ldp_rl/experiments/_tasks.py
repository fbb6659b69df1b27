"""The P15 experiments' ``run(ctx, config)`` functions (``config``: ``SIZES`` in ``__init__``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.ldp_rl import exp3_regret_bound
from jaxpapers.ldp_rl.experiments import _audit, _runs


def large_epsilon_limit(ctx: Context, config) -> Outcome:
    """EXP3-LDP at a huge epsilon against EXP3 on the same bandits and keys."""
    z = config.sanity
    eps = 30.0
    private = _runs.bandit_regret(z.S, z.A, z.K, [eps], ctx.seed_list, private=True)[0]
    plain = _runs.bandit_regret(z.S, z.A, z.K, [None], ctx.seed_list, private=False)[0]
    gap = np.abs(private[:, -1] - plain[:, -1]) / plain[:, -1]
    return Outcome(
        {
            "EXP3": plain[:, -1].tolist(),
            "EXP3-LDP eps=30": private[:, -1].tolist(),
            "|EXP3-LDP eps=30 - EXP3| / EXP3": gap.tolist(),
        },
        {"S": z.S, "A": z.A, "K": z.K},
    )


def uncapped(S: int, A: int, K: int, epsilon: float) -> bool:
    """Whether EXP3-LDP's explicit regret bound at horizon ``K`` lies below ``K / 4`` (about the
    regret of the uniform policy on these bandits): otherwise the rate is capped at ``K`` and the
    run measures exploration, not the rate."""
    return exp3_regret_bound(S, A, K, epsilon) <= K / 4


def bandit_rate(ctx: Context, config) -> Outcome:
    """EXP3-LDP final regret over separately run horizons K, several epsilon and (S, A):
    per-seed exponents in K, and per-seed exponent of the regret in the minimax rate across
    every uncapped (S, A, epsilon) cell."""
    z = config.bandit
    ks = np.asarray(z.ks)
    values: dict[str, list[float]] = {}
    curves: dict[str, Any] = {}
    fits: dict[str, Any] = {}
    judged: list[float] = []
    rate_x, rate_y, cells = [], [], []
    for S, A in z.grid:
        first = (S, A) == tuple(z.grid[0])  # K-exponents and plots for the first (S, A)
        # the other cells enter only the rate fit, through their largest horizon: one run each
        # (runs of different horizons are separate, so this run is the one the full list holds)
        cell_ks = ks if first else ks[-1:]
        private = _runs.bandit_final_regret(S, A, cell_ks, z.epsilons, ctx.seed_list, private=True)
        tag = f"S={S},A={A}"
        if first:
            plain = _runs.bandit_final_regret(S, A, ks, [None], ctx.seed_list, private=False)[0]
            curves[f"EXP3 {tag}"] = plain
            fits[f"EXP3 {tag}"] = _runs.slope_summary(plain, ks)
            values["K-exponent EXP3"] = _runs.per_seed_slopes(plain, ks)
        for e, c in zip(z.epsilons, private, strict=True):
            if first:
                curves[f"EXP3-LDP eps={e:g} {tag}"] = c
                fits[f"EXP3-LDP eps={e:g} {tag}"] = _runs.slope_summary(c, ks)
                values[f"K-exponent EXP3-LDP eps={e:g}"] = _runs.per_seed_slopes(c, ks)
                if uncapped(S, A, int(ks[0]), e):
                    judged.append(e)
            rate_x.append(float(_runs.minimax_bandit_rate(S, A, ks[-1], e)))
            rate_y.append(np.maximum(c[:, -1], 1e-9))
            cells.append((S, A, e))
    keep = [i for i, (S, A, e) in enumerate(cells) if uncapped(S, A, int(ks[-1]), e)]
    if len(keep) >= 2:  # the smoke size has no uncapped cell: it fits all of them
        rate_x, rate_y, cells = ([v[i] for i in keep] for v in (rate_x, rate_y, cells))
    logx = np.log(rate_x)
    logy = np.log(np.stack(rate_y))  # [cells, seeds]
    values["exponent in minimax rate"] = [
        float(np.polyfit(logx, logy[:, i], 1)[0]) for i in range(logy.shape[1])
    ]
    S, A = z.grid[0]
    refs = {
        f"minimax rate eps={e:g} S={S},A={A}": _runs.minimax_bandit_rate(S, A, ks, e)
        for e in (min(z.epsilons), max(z.epsilons))
    }
    extras = {
        "ks": ks,
        "curves": curves,
        "loglog_fits": fits,
        "references": refs,
        "epsilons": list(z.epsilons),
        "judged_epsilons": judged,
        "rate_cells": cells,
        "grid": z.grid,
        "note": "one run per horizon K (tuned for that K); K-exponents judged only at the "
        "epsilons whose explicit bound at the smallest K is below K/4",
    }
    return Outcome(values, extras)


def rl_rate(ctx: Context, config) -> Outcome:
    """UCBVI-LDP vs UCBVI final regret over separately run horizons K (one run per K)."""
    z = config.rl
    ks = np.asarray(z.ks)
    private = _runs.rl_final_regret(
        z.S,
        z.A,
        z.H,
        ks,
        [z.epsilon],
        ctx.seed_list,
        private=True,
        privacy_bonus_scale=z.privacy_bonus_scale,
    )[0]
    plain = _runs.rl_final_regret(z.S, z.A, z.H, ks, [None], ctx.seed_list, private=False)[0]
    reported = None
    if z.reported_bonus_scale is not None:
        reported = _runs.rl_final_regret(
            z.S,
            z.A,
            z.H,
            ks,
            [z.epsilon],
            ctx.seed_list,
            private=True,
            privacy_bonus_scale=z.reported_bonus_scale,
        )[0]
    upper = z.H**2 * z.S**2 * np.sqrt(z.A * ks) / z.epsilon
    lower = z.H * z.S * np.sqrt(z.A * ks) / z.epsilon
    values = {
        "UCBVI regret": plain[:, -1].tolist(),
        "UCBVI-LDP regret": private[:, -1].tolist(),
        "K-exponent UCBVI-LDP": _runs.per_seed_slopes(private, ks),
    }
    if reported is not None:
        values[f"K-exponent UCBVI-LDP c_sigma={z.reported_bonus_scale:g}"] = _runs.per_seed_slopes(
            reported, ks
        )
    extras = {
        "ks": ks,
        "curves": {"UCBVI": plain, f"UCBVI-LDP eps={z.epsilon:g}": private},
        "references": {"H^2 S^2 sqrt(AK)/eps": upper, "H S sqrt(AK)/eps": lower},
        "loglog_fits": {
            "UCBVI": _runs.slope_summary(plain, ks),
            "UCBVI-LDP": _runs.slope_summary(private, ks),
        },
        "regret per episode UCBVI-LDP": (private.mean(0) / ks).tolist(),
        "S": z.S,
        "A": z.A,
        "H": z.H,
        "epsilon": z.epsilon,
        "privacy_bonus_scale": z.privacy_bonus_scale,
        "reported_bonus_scale (not judged)": z.reported_bonus_scale,
    }
    if reported is not None:
        extras["regret per episode UCBVI-LDP c_sigma=0.3"] = (reported.mean(0) / ks).tolist()
        extras["curves"]["UCBVI-LDP c_sigma=0.3"] = reported
    return Outcome(values, extras)


def privacy_audit(ctx: Context, config) -> Outcome:
    """Exact and sampled likelihood ratios of the released messages, per epsilon (rows over
    epsilon take the place of seeds; sampling uses seed i for epsilon i)."""
    z = config.audit
    values: dict[str, list[float]] = _audit.exact_losses(z.epsilons, z.categories)
    zs, ratios, rr = [], [], []
    for i, e in enumerate(z.epsilons):
        share, ratio = _audit.empirical_excess(e, z.categories, z.samples, seed=i)
        zs.append(share)
        ratios.append(ratio)
        rr.append(_audit.randomized_response_empirical(e, z.samples, seed=i))
    values["unary share of significant excesses"] = zs
    extras = {
        "epsilons": list(z.epsilons),
        "unary empirical loss / eps": ratios,
        "randomised response empirical loss / eps": rr,
        "samples": z.samples,
    }
    return Outcome(values, extras)
