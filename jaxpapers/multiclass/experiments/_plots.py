"""Plots of the P16 experiments."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome


def plot_mistake_curves(outcome: Outcome, path: Path) -> None:
    """Cumulative expected mistakes per learner (mean over seeds, band min..max)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for name, c in outcome.extras["curves"].items():
        c = np.asarray(c, float)
        t = np.linspace(1, c.shape[1], c.shape[1])
        (line,) = ax.plot(t, c.mean(0), label=name)
        ax.fill_between(t, c.min(0), c.max(0), color=line.get_color(), alpha=0.2)
    ax.set(xlabel="round (subsampled)", ylabel="cumulative expected mistakes")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_delays(outcome: Outcome, path: Path) -> None:
    """Surrogate regret against the delay for each learner."""
    import matplotlib.pyplot as plt

    ds = outcome.extras["delays"]
    names = sorted({k.rsplit(" d=", 1)[0] for k in outcome.values if "penalty" not in k})
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for n in names:
        ax.plot(ds, [np.mean(outcome.values[f"{n} d={d}"]) for d in ds], marker="o", label=n)
    ax.set(xscale="symlog", xlabel="delay d", ylabel="surrogate regret")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
