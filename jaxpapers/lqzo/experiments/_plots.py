"""Plots of the P02 experiments."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome


def plot_rows(outcome: Outcome, path: Path, *, ylabel: str = "test accuracy (%)") -> None:
    """Bar chart of every row's mean with its seed spread."""
    import matplotlib.pyplot as plt

    names = list(outcome.values)
    means = [float(np.mean(outcome.values[k])) for k in names]
    stds = [float(np.std(outcome.values[k])) for k in names]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.bar(range(len(names)), means, yerr=stds, color="tab:blue", alpha=0.8)
    ax.set_xticks(range(len(names)), names, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    if "accuracy" in ylabel:
        lo = min(means) - 3 * max([*stds, 1.0])
        ax.set_ylim(max(lo, 0), 100)
    else:
        ax.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_accuracy(outcome: Outcome, path: Path) -> None:
    """:func:`plot_rows` for test accuracies."""
    plot_rows(outcome, path)


def plot_estimator(outcome: Outcome, path: Path) -> None:
    """:func:`plot_rows` for the estimators' normalised second moments (log scale)."""
    plot_rows(outcome, path, ylabel="E||g_hat - g||^2 / ||g||^2")


__all__ = ["plot_accuracy", "plot_estimator", "plot_rows"]
