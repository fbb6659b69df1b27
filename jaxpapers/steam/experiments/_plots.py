"""Forgetting plot: each task's mIoU after each stage, one line per method."""

from __future__ import annotations

from pathlib import Path

from jaxpapers.core.experiment import Outcome


def plot_forgetting(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    mats = outcome.extras["miou_matrix [stage][task] (seed mean)"]
    tasks = outcome.extras["tasks"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(4 * len(tasks), 3.4), sharey=True)
    stages = range(1, len(tasks) + 1)
    for j, ax in enumerate(axes):
        for name, mat in mats.items():
            ys = [mat[i][j] if i >= j else float("nan") for i in range(len(tasks))]
            ax.plot(stages, ys, marker="o", label=name, lw=2.2 if name == "STEAM" else 1.2)
        ax.set_title(tasks[j], fontsize=9)
        ax.set_xlabel("after learning task")
        ax.set_xticks(list(stages))
    axes[0].set_ylabel("mIoU")
    axes[-1].legend(fontsize=7, loc="lower left")
    fig.suptitle("P08 STEAM: per-task mIoU through the task sequence")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
