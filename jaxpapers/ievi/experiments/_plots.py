"""Figures of the P17 experiments: queries against the horizon, error curves of the Dyna runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome
from jaxpapers.ievi.experiments._dyna import DYNA_TARGET
from jaxpapers.ievi.experiments._queries import TOL


def plot_queries(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    per = outcome.extras["per_gamma"]
    gammas = sorted(per, key=float)
    horizon = [1.0 / (1.0 - float(g)) for g in gammas]
    fig, ax = plt.subplots(figsize=(5, 4))
    for name, marker in (("VI", "o"), ("IE-VI", "s"), ("A-IE-VI", "^")):
        means = [np.mean(per[g][name]) for g in gammas]
        ax.loglog(horizon, means, marker=marker, label=name)
    ax.set_xlabel("effective horizon 1 / (1 - gamma)")
    ax.set_ylabel(f"true-model queries to sup error {TOL:g}")
    ax.set_title(f"{outcome.extras['problem']}, model L1 error {outcome.extras['model_l1_error']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_dyna(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    raw = outcome.extras["raw"]
    samples = np.asarray(raw["curve_rounds"]) * raw["samples_per_round"]
    fig, ax = plt.subplots(figsize=(5, 4))
    for name, curve in raw["curve_relative_error"].items():
        ax.loglog(samples, curve, label=name)
    ax.axhline(DYNA_TARGET, color="k", lw=0.8, ls="--", label="target")
    ax.set_xlabel("real transitions sampled")
    ax.set_ylabel("|V - V*|_inf / |V*|_inf (mean over seeds)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
