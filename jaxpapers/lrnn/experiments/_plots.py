"""Bar plot of an outcome's rows (mean and seed spread)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome


def bar_plot(outcome: Outcome, path: Path, ylabel: str, title: str) -> None:
    """Bars of each row's mean with its seed standard deviation; the first row (baseline) grey."""
    import matplotlib.pyplot as plt

    names = list(outcome.values)
    means = [float(np.mean(outcome.values[n])) for n in names]
    stds = [float(np.std(outcome.values[n])) for n in names]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.bar(names, means, yerr=stds, color=["0.6", *["C0"] * (len(names) - 1)], capsize=3)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
