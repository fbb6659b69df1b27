"""Measurements behind each P05 experiment (one shared pipeline run) and the plot."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.verdicts import one_sample
from jaxpapers.rapo import grpo_loss, rapo_loss
from jaxpapers.rapo.experiments._pipeline import (
    PMI_CLASSES,
    RAPO,
    TUNING,
    Config,
    Pipeline,
    cell_indices,
    chosen,
    run_pipeline,
)

CURVES = ("reward", "fidelity", "role_fraction", "generic_fraction")
#: ``ood_shift_exists``'s reference row: the plain warm-up on held-out characters of the training
#: distribution (stereotyped, never trained on), not on its memorised training characters
IN_DISTRIBUTION = "plain warm-up (held-out stereotyped profiles)"
#: the gold-vs-proxy frontier's window: one point per this many RL steps (their mean)
FRONTIER_EVERY = 5


def _pipeline(ctx: Context, config: Config) -> Pipeline:
    return ctx.cached("pipeline", lambda: run_pipeline(config, ctx.seed_list))


def _select(out: Pipeline, field: str, *, hackable: bool, method: str) -> list[float]:
    """Per-seed test ``field`` after RL of ``method`` under the judge, at its tuned grid point."""
    values = np.asarray(getattr(out.final_unseen, field))
    return [float(values[i]) for i in cell_indices(out, hackable=hackable, method=method)]


def _start(out: Pipeline, field: str) -> list[float]:
    """Per-seed test ``field`` of the starting policy (the Psy-CoT warm-up, sampled replies)."""
    return [float(v) for v in np.asarray(getattr(out.start_unseen, field))]


def _tuning(out: Pipeline, *, hackable: bool) -> dict:
    """Each method's chosen grid point and the validation means (and worst seeds) of every grid
    point: the tuning signal (the reward of the judge trained on) and, for the hackable judge,
    the fidelity and generic-phrase rate."""
    fields = ("hackable_reward", "fidelity", "generic_fraction") if hackable else ("fidelity",)
    info = {"criterion": TUNING[hackable]}
    for m in ("GRPO", "RAPO"):
        lr, b = chosen(out, hackable=hackable, method=m)
        info[m] = {"chosen": {"learning_rate": lr, "beta": b}}
        for f in fields:
            grid: dict[str, list[float]] = {}
            values = np.asarray(getattr(out.val, f))
            for (h, mm, lr_, b_, _), v in zip(out.cells, values, strict=True):
                if h == hackable and mm == m:
                    grid.setdefault(f"lr={lr_:g}, beta={b_:g}", []).append(float(v))
            info[m][f"validation_{f}_mean"] = {k: float(np.mean(v)) for k, v in grid.items()}
            info[m][f"validation_{f}_min_seed"] = {k: float(np.min(v)) for k, v in grid.items()}
    return info


def _at_each_point(out: Pipeline) -> dict:
    """Test fidelity and generic-phrase rate of each method under the hackable judge at every
    grid point, both methods at the same point (whether a verdict hinges on the tuned points):
    the means, and the per-seed paired differences RAPO - GRPO with their 90% interval (the
    verdict engine's one-sided 95% Student-t bounds)."""
    info: dict[str, dict] = {}
    for (h, m, lr, b, seed), i in zip(out.cells, range(len(out.cells)), strict=True):
        if h:
            point = info.setdefault(f"lr={lr:g}, beta={b:g}", {})
            for f in ("fidelity", "generic_fraction"):
                value = float(np.asarray(getattr(out.final_unseen, f))[i])
                point.setdefault(m, {}).setdefault(f, {})[seed] = value
    result = {}
    for p, ms in info.items():
        result[p] = {m: {f: float(np.mean(list(v.values()))) for f, v in d.items()}
                     for m, d in ms.items()}  # fmt: skip
        for f, claim in (("fidelity", ">"), ("generic_fraction", "<")):
            g, r = ms["GRPO"][f], ms["RAPO"][f]
            diffs = [r[s] - g[s] for s in sorted(g)]
            c = one_sample(diffs, 0.0, claim, rule="paired", quantity=f"RAPO - GRPO {f}",
                           test="paired t")  # fmt: skip
            result[p][f"RAPO - GRPO {f} (paired)"] = {
                "per_seed": diffs,
                "mean": c.estimate,
                "interval_90": [c.low, c.high],
                "seeds_agreeing": c.agree,
                "verdict_if_judged": c.verdict,
            }
    return result


def _frontier(out: Pipeline) -> dict:
    """The gold-vs-proxy frontier along training under the hackable judge: per method and grid
    point, the means over seeds and over windows of :data:`FRONTIER_EVERY` RL steps of the
    proxy reward (the hackable judge's, on each step's rollouts of training characters) and of
    the exact fidelity of the same rollouts; ``steps`` holds each window's first step."""
    reward = np.asarray(out.curves.reward, np.float64)
    fidelity = np.asarray(out.curves.fidelity, np.float64)
    starts = list(range(0, reward.shape[1], FRONTIER_EVERY))

    def windows(x):
        return [float(x[k : k + FRONTIER_EVERY].mean()) for k in starts]

    info: dict[str, dict] = {"steps": starts}
    for m in ("GRPO", "RAPO"):
        for lr, b in dict.fromkeys((c[2], c[3]) for c in out.cells):
            pick = [i for i, c in enumerate(out.cells) if c[:4] == (True, m, lr, b)]
            info.setdefault(m, {})[f"lr={lr:g}, beta={b:g}"] = {
                "proxy_reward": windows(reward[pick].mean(axis=0)),
                "fidelity": windows(fidelity[pick].mean(axis=0)),
            }
    return info


def _by_fidelity(out: Pipeline) -> dict:
    """Sensitivity check of the tuning criterion: the hackable-judge cells selected by validation
    fidelity (the exact judge, which the setting does not have) instead of the hackable reward;
    per-seed test fidelity and generic-phrase rate of each method at that point."""
    info = {}
    for m in ("GRPO", "RAPO"):
        lr, b = chosen(out, hackable=True, method=m, criterion="fidelity")
        pick = cell_indices(out, hackable=True, method=m, criterion="fidelity")
        info[m] = {
            "chosen": {"learning_rate": lr, "beta": b},
            **{
                f: [float(np.asarray(getattr(out.final_unseen, f))[i]) for i in pick]
                for f in ("fidelity", "generic_fraction")
            },
        }
    return info


def unit_weights_identity(*, key: jax.Array) -> float:
    """``max |RAPO(alpha = gamma = 0) - GRPO|`` over losses of random inputs (0 expected)."""
    k = jax.random.split(key, 5)
    lp = -jax.random.uniform(k[0], (8, 6))
    old = lp + 0.3 * jax.random.normal(k[1], (8, 6))
    adv = jax.random.normal(k[2], (8,))
    mask = jax.random.bernoulli(k[3], 0.8, (8, 6)).astype(jnp.float32)
    pmi = 3.0 * jax.random.normal(k[4], (8, 6))
    diffs = []
    for agg in ("token_mean", "sequence_mean"):
        g = grpo_loss(lp, old, adv, mask, ref_log_probs=lp - 0.1, beta=0.05, aggregation=agg)
        r = rapo_loss(
            lp,
            old,
            adv,
            mask,
            pmi,
            alpha=0.0,
            gamma=0.0,
            ref_log_probs=lp - 0.1,
            beta=0.05,
            aggregation=agg,
        )
        diffs.append(float(jnp.abs(g.loss - r.loss)))
    return max(diffs)


def exact_judge(ctx: Context, config: Config) -> Outcome:
    out = _pipeline(ctx, config)
    rows = {
        f"{m} (exact judge)": _select(out, "fidelity", hackable=False, method=m)
        for m in ("GRPO", "RAPO")
    }
    identity = unit_weights_identity(key=jax.random.key(0))
    return Outcome(
        rows,
        {
            "max_abs_rapo_unit_weights_minus_grpo_loss": identity,
            "rapo": RAPO,
            "tuning": _tuning(out, hackable=False),
        },
    )


def hacking(ctx: Context, config: Config) -> Outcome:
    out = _pipeline(ctx, config)
    rows = {m: _select(out, "fidelity", hackable=True, method=m) for m in ("GRPO", "RAPO")}
    rows["warm-up (before RL)"] = _start(out, "fidelity")
    curves = {}
    for m in ("GRPO", "RAPO"):
        pick = cell_indices(out, hackable=True, method=m)
        curves[m] = {
            c: np.asarray(getattr(out.curves, c), np.float64)[pick].mean(axis=0).tolist()
            for c in CURVES
        }
    final = {
        m: {
            f: float(np.mean(_select(out, f, hackable=True, method=m)))
            for f in (*CURVES[1:], "hackable_reward")
        }
        for m in ("GRPO", "RAPO")
    }
    pmi = np.asarray(out.pmi, np.float64)
    return Outcome(
        rows,
        {
            "curves": curves,
            "final_unseen_means": final,
            "finite": bool(np.asarray(out.finite).all()),
            "tuning": _tuning(out, hackable=True),
            "tuned_by_validation_fidelity": _by_fidelity(out),
            "test_at_each_grid_point": _at_each_point(out),
            "gold_vs_proxy_along_training": _frontier(out),
            # mean PMI per token class of the warm-ups' rollouts under RAPO's reference (means
            # over seeds; closed forms under the warm-up distribution: log 4, log 8, log 8 or
            # log 4, 0)
            "warmup_pmi_by_token_class": dict(
                zip(PMI_CLASSES, np.nanmean(pmi, axis=0).tolist(), strict=True)
            ),
        },
    )


def grpo_hacks(ctx: Context, config: Config) -> Outcome:
    """Held-out fidelity and hackable reward of the warm-up and of GRPO trained on the hackable
    judge (same seeds); the reward rows carry the ``": hackable reward"`` suffix."""
    out = _pipeline(ctx, config)
    rows = {}
    for field, suffix in (("fidelity", ""), ("hackable_reward", ": hackable reward")):
        rows[f"warm-up (before RL){suffix}"] = _start(out, field)
        rows[f"GRPO{suffix}"] = _select(out, field, hackable=True, method="GRPO")
    return Outcome(rows)


def hacking_phrases(ctx: Context, config: Config) -> Outcome:
    out = _pipeline(ctx, config)
    rows = {m: _select(out, "generic_fraction", hackable=True, method=m) for m in ("GRPO", "RAPO")}
    rows["warm-up (before RL)"] = _start(out, "generic_fraction")
    role = {m: _select(out, "role_fraction", hackable=True, method=m) for m in ("GRPO", "RAPO")}
    return Outcome(rows, {"role_specific_fraction": role})


def ood_profiles(ctx: Context, config: Config) -> Outcome:
    """Greedy fidelity of both warm-ups on the profiles that break the training stereotype."""
    out = _pipeline(ctx, config)
    n = len(ctx.seed_list)
    ood = np.asarray(out.warmup_ood.fidelity)
    held = np.asarray(out.warmup_test.fidelity)
    seen = np.asarray(out.warmup_seen.fidelity)
    return Outcome(
        {"Psy-CoT warm-up": ood[:n].tolist(), "plain warm-up": ood[n:].tolist()},
        {
            "held_out_stereotyped_profiles_fidelity": {
                "Psy-CoT": held[:n].tolist(),
                "plain": held[n:].tolist(),
            },
            "seen_profiles_fidelity": {"Psy-CoT": seen[:n].tolist(), "plain": seen[n:].tolist()},
            "sft_final_loss": out.sft_loss_last.tolist(),
        },
    )


def ood_shift(ctx: Context, config: Config) -> Outcome:
    """The plain warm-up's greedy fidelity on held-out characters of its training distribution
    (stereotyped, never trained on: the reference) and on the profiles that break the training
    stereotype (``ood_profiles``'s row); on its training characters in the extras (memorised,
    so not the reference: a drop from them is partly memorisation, not a shift)."""
    out = _pipeline(ctx, config)
    n = len(ctx.seed_list)
    ood = np.asarray(out.warmup_ood.fidelity)
    held = np.asarray(out.warmup_test.fidelity)
    seen = np.asarray(out.warmup_seen.fidelity)
    return Outcome(
        {"plain warm-up": ood[n:].tolist(), IN_DISTRIBUTION: held[n:].tolist()},
        {"training_profiles_fidelity": seen[n:].tolist()},
    )


def plot_hacking(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    curves = outcome.extras["curves"]
    fig, axes = plt.subplots(1, len(CURVES) + 1, figsize=(15, 2.8))
    for ax, name in zip(axes[: len(CURVES)], CURVES, strict=True):
        for method, c in curves.items():
            ax.plot(c[name], label=method)
        ax.set_title(name.replace("_", " "), fontsize=9)
        ax.set_xlabel("RL step")
    axes[0].legend(fontsize=7)
    # the gold-vs-proxy frontier of every method (its colour) and grid point (line style), a
    # marker at the last window
    ax = axes[-1]
    frontier = outcome.extras["gold_vs_proxy_along_training"]
    for colour, method in zip(("C0", "C1"), ("GRPO", "RAPO"), strict=True):
        for style, (point, f) in zip(("--", "-", ":"), frontier[method].items(), strict=False):
            x, y = f["proxy_reward"], f["fidelity"]
            ax.plot(x, y, style, color=colour, lw=1, label=f"{method} {point}")
            ax.plot(x[-1], y[-1], "o", ms=3, color=colour)
    ax.set_title("fidelity vs proxy reward (training)", fontsize=9)
    ax.set_xlabel("hackable judge's reward")
    ax.legend(fontsize=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
