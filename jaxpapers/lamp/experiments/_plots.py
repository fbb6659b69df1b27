"""Plots of the P07 experiments."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome
from jaxpapers.lamp.experiments._common import BACKBONES, LEVELS


def plot_levels(outcome: Outcome, path: Path) -> None:
    """Distance of the backbone and of LAMP over it at the two NFE levels."""
    import matplotlib.pyplot as plt

    kind, levels = outcome.extras["backbone"], outcome.extras["levels"]
    nfes = [levels[lv] for lv in LEVELS]
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    for label, fmt in ((kind, "o--"), (f"{kind}+LAMP", "s-")):
        m = [np.mean(outcome.values[f"{label} @{lv}"]) for lv in LEVELS]
        s = [np.std(outcome.values[f"{label} @{lv}"]) for lv in LEVELS]
        ax.errorbar(nfes, m, yerr=s, fmt=fmt, label=label, capsize=3)
    ax.set_xlabel("NFE")
    what = outcome.extras["metric_kind"]
    ax.set_ylabel("SW2 to exact posterior" if what == "posterior" else "SW2 to own high-NFE output")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_examples(outcome: Outcome, path: Path) -> None:
    """Truth, measurement and every sampler's reconstruction of four test digits."""
    import matplotlib.pyplot as plt

    ex = outcome.extras["examples"]
    cols = ["truth", "measurement", *[k for b in BACKBONES for k in (b, f"{b}+LAMP")]]
    rows = len(ex["truth"])
    fig, axes = plt.subplots(rows, len(cols), figsize=(1.1 * len(cols), 1.15 * rows))
    for j, name in enumerate(cols):
        for i in range(rows):
            axes[i, j].imshow(np.asarray(ex[name][i]), cmap="gray", vmin=-1, vmax=1)
            axes[i, j].axis("off")
        axes[0, j].set_title(name, fontsize=6)
    fig.suptitle(f"digits {outcome.extras['task']} (NFE {outcome.extras['nfe']})", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
