"""Figure of the P01 experiments: dense error of the foreground patches binned by [CLS] attention
mass."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome


def plot_bins(outcome: Outcome, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, bins in outcome.extras["binned_error"].items():
        b = np.asarray(bins)
        ax.errorbar(np.arange(1, b.shape[1] + 1), b.mean(0), b.std(0), marker="o", label=name)
    ax.set_xlabel("bin of the iBOT teacher's [CLS] attention mass (1 = lowest)")
    ax.set_ylabel("dense probe error, foreground patches")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
