"""Figures of the P18 experiments."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_sweep(outcome: Outcome, path: Path) -> None:
    plt = _plt()
    ex = outcome.extras
    levels = ex["levels"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name, row in ex["by_level"].items():
        rho = np.asarray(row["spearman"])
        axes[0].errorbar(levels, rho.mean(1), yerr=rho.std(1), marker="o", label=name, capsize=3)
        acc = np.asarray(row["acceptability"])
        axes[1].plot(levels, acc.mean(1), marker="o", label=name)
    axes[0].set_xlabel("persona concealment level")
    axes[0].set_ylabel("Spearman(recovered, true profile)")
    axes[1].set_xlabel("persona concealment level")
    axes[1].set_ylabel("social acceptability")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_contexts(outcome: Outcome, path: Path) -> None:
    plt = _plt()
    ex = outcome.extras
    names = list(ex["per_context_spearman"])
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar(x - 0.2, [ex["per_context_spearman"][n] for n in names], 0.4, label="per-context")
    ax.bar(x + 0.2, [ex["context_blind_spearman"][n] for n in names], 0.4, label="context-blind")
    ax.set_xticks(x, names)
    ax.set_ylabel("Spearman with the context's true profile")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_distilled(outcome: Outcome, path: Path) -> None:
    plt = _plt()
    ex = outcome.extras
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    axes[0].plot(ex["student_loss"])
    axes[0].set_xlabel("training step")
    axes[0].set_ylabel("question cross-entropy (nats)")
    for name, rho in ex["spearman_by_level"].items():
        axes[1].plot(ex["levels"], rho, marker="o", label=name)
    axes[1].set_xlabel("persona concealment level")
    axes[1].set_ylabel("Spearman")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
