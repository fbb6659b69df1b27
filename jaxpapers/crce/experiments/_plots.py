"""Figures of the P09 experiments: attribution maps and deletion curves; group accuracies."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome
from jaxpapers.crce.experiments._runs import GROUPS


def plot_faithfulness(outcome: Outcome, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ex = outcome.extras
    names = list(ex["examples"])
    images = np.asarray(ex["images"])
    fig, axes = plt.subplots(len(images), len(names) + 2, figsize=(2.2 * (len(names) + 2), 8))
    for r, img in enumerate(images):
        axes[r, 0].imshow(np.clip(img, 0, 1))
        for c, n in enumerate(names):
            m = np.asarray(ex["examples"][n])[r]
            lim = np.abs(m).max() + 1e-12
            axes[r, c + 1].imshow(m, cmap="RdBu_r", vmin=-lim, vmax=lim)
            if r == 0:
                axes[r, c + 1].set_title(n, fontsize=8)
        axes[r, -1].axis("off")
    for a in axes.ravel()[:-1]:
        a.set_xticks([])
        a.set_yticks([])
    ax = fig.add_axes((0.80, 0.1, 0.18, 0.8))
    for n, curve in ex["deletion_curves"].items():
        ax.plot(np.linspace(0, 1, len(curve)), curve, label=f"{n} (deletion)")
    ax.set_xlabel("fraction of cells removed")
    ax.set_ylabel("p(explained class)")
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_groups(outcome: Outcome, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = outcome.extras["group_accuracy " + str(GROUPS)]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / len(groups)
    for i, (n, accs) in enumerate(groups.items()):
        mean = np.mean(np.asarray(accs), 0)
        ax.bar(np.arange(4) + i * width, mean, width, label=n)
    ax.set_xticks(np.arange(4) + 0.4 - width / 2)
    ax.set_xticklabels(list(GROUPS))
    ax.set_ylabel("accuracy (balanced test)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
