"""Figures of the P12 experiments: mIoU / boundary-F1 bars per method and example pseudo-masks."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome
from jaxpapers.ropmb.experiments._runs import decode_masks


def plot_masks(outcome: Outcome, path: Path) -> None:
    """Bars of the measured rows (mean and seed std) and, below, the true masks and the four
    methods' pseudo-masks of a few test scenes (seed 0) where the outcome carries them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ex = outcome.extras
    rows = outcome.values
    masks = {k: decode_masks(v) for k, v in ex.get("example_masks", {}).items()}
    truth = decode_masks(ex.get("example_truth", []))
    n_ex = len(truth)
    fig = plt.figure(figsize=(9, 3 + 1.6 * n_ex))
    ax = fig.add_axes((0.1, 1 - 2.4 / (3 + 1.6 * n_ex), 0.85, 2.0 / (3 + 1.6 * n_ex)))
    names = list(rows)
    means = [np.mean(rows[n]) for n in names]
    stds = [np.std(rows[n], ddof=1) if len(rows[n]) > 1 else 0.0 for n in names]
    ax.bar(range(len(names)), means, yerr=stds, color="C0", capsize=4)
    for i, (m, s) in enumerate(zip(means, stds, strict=True)):
        ax.text(i, m + s + 0.01, f"{m:.3f}", ha="center", fontsize=8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=8)
    ax.set_title(ex.get("metric_label", ""), fontsize=9)
    ax.set_ylabel("mean ± std over seeds", fontsize=8)
    cols = 1 + len(masks)
    for r in range(n_ex):
        panels = [("truth", truth[r])] + [(k, v[r]) for k, v in masks.items()]
        for c, (title, img) in enumerate(panels):
            a = fig.add_axes(
                (
                    c / cols + 0.005,
                    (n_ex - 1 - r) * 1.6 / (3 + 1.6 * n_ex) + 0.01,
                    0.95 / cols,
                    1.5 / (3 + 1.6 * n_ex),
                )
            )
            a.imshow(img, cmap="tab10", vmin=0, vmax=9, interpolation="nearest")
            a.set_xticks([])
            a.set_yticks([])
            if r == 0:
                a.set_title(title, fontsize=8)
    fig.savefig(path, dpi=90)
    plt.close(fig)
