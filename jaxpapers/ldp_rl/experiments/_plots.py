"""Log-log regret plots of the P15 experiments."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome


def plot_curves(outcome: Outcome, path: Path) -> None:
    """Mean cumulative regret (band: min..max over seeds) per curve in ``extras["curves"]``,
    and reference rate curves in ``extras["references"]`` (dashed), on log-log axes."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    fig, ax = plt.subplots(figsize=(5.5, 4))
    ks = np.asarray(outcome.extras["ks"], float)
    for name, c in outcome.extras["curves"].items():
        c = np.asarray(c, float)
        (line,) = ax.plot(ks, c.mean(0), marker="o", label=name)
        ax.fill_between(ks, c.min(0), c.max(0), color=line.get_color(), alpha=0.2)
    for name, ref in outcome.extras.get("references", {}).items():
        ax.plot(ks, ref, ls="--", label=name)
    ax.set(xscale="log", yscale="log", xlabel="K (episodes)", ylabel="cumulative regret")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
