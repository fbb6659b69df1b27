"""Measurements behind each P05 experiment (one shared pipeline run) and the plot."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.rapo import grpo_loss, rapo_loss
from jaxpapers.rapo.experiments._pipeline import RAPO, Config, Pipeline, run_pipeline

CURVES = ("reward", "fidelity", "role_fraction", "generic_fraction")


def _pipeline(ctx: Context, config: Config) -> Pipeline:
    return ctx.cached("pipeline", lambda: run_pipeline(config, ctx.seed_list))


def _select(out: Pipeline, key: str, field: str, *, hackable: bool, method: str) -> list[float]:
    values = np.asarray(getattr(getattr(out, key), field))
    return [
        float(values[i]) for i, (h, m, _) in enumerate(out.cells) if h == hackable and m == method
    ]


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
        f"{m} (exact judge)": _select(out, "final_unseen", "fidelity", hackable=False, method=m)
        for m in ("GRPO", "RAPO")
    }
    identity = unit_weights_identity(key=jax.random.key(0))
    return Outcome(rows, {"max_abs_rapo_unit_weights_minus_grpo_loss": identity, "rapo": RAPO})


def hacking(ctx: Context, config: Config) -> Outcome:
    out = _pipeline(ctx, config)
    rows = {
        m: _select(out, "final_unseen", "fidelity", hackable=True, method=m)
        for m in ("GRPO", "RAPO")
    }
    rows["warm-up (before RL)"] = _select(
        out, "start_unseen", "fidelity", hackable=True, method="GRPO"
    )
    curves = {}
    for m in ("GRPO", "RAPO"):
        pick = [i for i, (h, mm, _) in enumerate(out.cells) if h and mm == m]
        curves[m] = {
            c: np.asarray(getattr(out.curves, c), np.float64)[pick].mean(axis=0).tolist()
            for c in CURVES
        }
    final = {
        m: {
            f: float(np.mean(_select(out, "final_unseen", f, hackable=True, method=m)))
            for f in (*CURVES[1:], "hackable_reward")
        }
        for m in ("GRPO", "RAPO")
    }
    return Outcome(rows, {"curves": curves, "final_unseen_means": final, "finite": out.finite})


def grpo_hacks(ctx: Context, config: Config) -> Outcome:
    """Held-out fidelity and hackable reward of the warm-up and of GRPO trained on the hackable
    judge (same seeds); the reward rows carry the ``": hackable reward"`` suffix."""
    out = _pipeline(ctx, config)
    rows = {}
    for field, suffix in (("fidelity", ""), ("hackable_reward", ": hackable reward")):
        rows[f"warm-up (before RL){suffix}"] = _select(
            out, "start_unseen", field, hackable=True, method="GRPO"
        )
        rows[f"GRPO{suffix}"] = _select(out, "final_unseen", field, hackable=True, method="GRPO")
    return Outcome(rows)


def hacking_phrases(ctx: Context, config: Config) -> Outcome:
    out = _pipeline(ctx, config)
    rows = {
        m: _select(out, "final_unseen", "generic_fraction", hackable=True, method=m)
        for m in ("GRPO", "RAPO")
    }
    rows["warm-up (before RL)"] = _select(
        out, "start_unseen", "generic_fraction", hackable=True, method="GRPO"
    )
    role = {
        m: _select(out, "final_unseen", "role_fraction", hackable=True, method=m)
        for m in ("GRPO", "RAPO")
    }
    return Outcome(rows, {"role_specific_fraction": role})


def ood_profiles(ctx: Context, config: Config) -> Outcome:
    out = _pipeline(ctx, config)
    n = len(ctx.seed_list)
    unseen = np.asarray(out.warmup_unseen.fidelity)
    seen = np.asarray(out.warmup_seen.fidelity)
    return Outcome(
        {"Psy-CoT warm-up": unseen[:n].tolist(), "plain warm-up": unseen[n:].tolist()},
        {
            "seen_profiles_fidelity": {"Psy-CoT": seen[:n].tolist(), "plain": seen[n:].tolist()},
            "sft_final_loss": out.sft_loss_last.tolist(),
        },
    )


def ood_shift(ctx: Context, config: Config) -> Outcome:
    """The plain warm-up's greedy fidelity on unseen profiles (the rows of ``ood_profiles``)."""
    out = _pipeline(ctx, config)
    n = len(ctx.seed_list)
    unseen = np.asarray(out.warmup_unseen.fidelity)
    seen = np.asarray(out.warmup_seen.fidelity)
    return Outcome(
        {"plain warm-up": unseen[n:].tolist()},
        {"seen_profiles_fidelity": {"plain": seen[n:].tolist()}},
    )


def plot_hacking(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    curves = outcome.extras["curves"]
    fig, axes = plt.subplots(1, len(CURVES), figsize=(12, 2.8))
    for ax, name in zip(axes, CURVES, strict=True):
        for method, c in curves.items():
            ax.plot(c[name], label=method)
        ax.set_title(name.replace("_", " "), fontsize=9)
        ax.set_xlabel("RL step")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
