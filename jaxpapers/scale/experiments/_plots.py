"""Plots of the P04 experiments: per-method metric bars and 2-D sample scatters for the
mixtures, digit sample grids."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome


def plot_mixture_table(outcome: Outcome, path: Path) -> None:
    """Bars (mean and seed spread) of log-likelihood, precision and recall for every row."""
    import matplotlib.pyplot as plt

    rows = outcome.extras["rows"]
    names = list(rows)
    metrics = ("log_lik", "precision", "recall")
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.4))
    for ax, metric in zip(axes, metrics, strict=True):
        vals = [np.asarray(rows[n][metric]) for n in names]
        ax.bar(range(len(names)), [v.mean() for v in vals], yerr=[v.std() for v in vals])
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
        ax.set_title(metric)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_mixture_samples(outcome: Outcome, path: Path) -> None:
    """Scatter of the first seed's 2-D samples, one panel per row (exact samples first),
    coloured by their label, over the same axes."""
    import matplotlib.pyplot as plt

    shown = outcome.extras["samples"]
    labels = np.asarray(shown["labels"])
    first = ("exact", "conditional (no guidance)", "CFG", "GFT", "MG", "SCALE", "SCALE+DPO")
    names = [n for n in first if n in shown["x"]] + [n for n in shown["x"] if n not in first]
    fig, axes = plt.subplots(1, len(names), figsize=(2.3 * len(names), 2.6))
    for ax, name in zip(np.atleast_1d(axes), names, strict=True):
        x = np.asarray(shown["x"][name])
        ax.scatter(x[:, 0], x[:, 1], c=labels, s=3, cmap="tab10", vmin=0, vmax=9)
        ax.set(xlim=(-2.5, 2.5), ylim=(-2.5, 2.5), aspect="equal", xticks=[], yticks=[])
        ax.set_title(name, fontsize=8)
    fig.suptitle(f"2-D mixture samples (seed {shown['seed']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_digits_grid(outcome: Outcome, path: Path) -> None:
    """Sample grids of generated digits (rows: labels 0-9 repeated), one panel per method."""
    import matplotlib.pyplot as plt

    grids = outcome.extras["grids"]
    fig, axes = plt.subplots(1, len(grids), figsize=(3.0 * len(grids), 3.4))
    for ax, (name, imgs) in zip(np.atleast_1d(axes), grids.items(), strict=True):
        imgs = np.asarray(imgs)  # [40, 8, 8], labels i % 10
        tiles = imgs.reshape(4, 10, 8, 8).transpose(1, 2, 0, 3).reshape(80, 32)
        ax.imshow(tiles, cmap="gray_r", vmin=-1, vmax=1)
        ax.set_title(name, fontsize=9)
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
