"""P06 plots: sample paths or fields beside MMD bars, MMD against Euler steps."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome


def mmd_bars(ax, values: dict[str, list[float]], title: str) -> None:
    names = list(values)
    means = [np.mean(values[n]) for n in names]
    stds = [np.std(values[n], ddof=1) if len(values[n]) > 1 else 0.0 for n in names]
    ax.bar(range(len(means)), means, yerr=stds, color="C0")
    ax.set_xticks(range(len(means)), names, rotation=60, fontsize=7)
    ax.set_title(title, fontsize=9)


def plot_samples(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    samples = outcome.extras["samples"]
    names = ["data", *(n for n in outcome.values if n in samples)]
    fig, axes = plt.subplots(1, len(names) + 1, figsize=(3.0 * (len(names) + 1), 2.6))
    for ax, name in zip(axes, names, strict=False):
        for f in samples[name]:
            ax.plot(np.linspace(0, 1, len(f)), f, lw=0.8)
        ax.set_title(name, fontsize=9)
    mmd_bars(axes[-1], dict(outcome.values), "MMD-RBF (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def plot_fields(outcome: Outcome, path: Path) -> None:
    """2-D sample fields: one row per source (data, then each pairing), MMD bars on the right."""
    import matplotlib.pyplot as plt

    samples = outcome.extras["samples"]
    names = ["data", *(n for n in outcome.values if n in samples)]
    n_cols = len(samples["data"])
    lim = float(np.max(np.abs(np.asarray(samples["data"]))))
    fig = plt.figure(figsize=(1.6 * n_cols + 3.2, 1.5 * len(names)))
    gs = fig.add_gridspec(len(names), n_cols + 2)
    for r, name in enumerate(names):
        for c, field in enumerate(samples[name]):
            ax = fig.add_subplot(gs[r, c])
            ax.imshow(np.asarray(field), cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(name, fontsize=8)
    mmd_bars(fig.add_subplot(gs[:, n_cols:]), dict(outcome.values), "MMD-RBF (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def plot_evals(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    ks = outcome.extras["euler_steps"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, per_seed in outcome.extras["mmd_curves"].items():
        arr = np.asarray(per_seed)
        ax.errorbar(ks, arr.mean(0), yerr=arr.std(0), label=name, capsize=2)
    ax.set_xscale("log", base=2)
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_xlabel("Euler steps (field evaluations)")
    ax.set_ylabel("MMD-RBF to held-out data")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def plot_kernels_pde(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    per_dataset = outcome.extras["mmd"]
    fig, axes = plt.subplots(1, len(per_dataset), figsize=(3.4 * len(per_dataset), 3.0))
    for ax, (d, values) in zip(np.atleast_1d(axes), per_dataset.items(), strict=True):
        mmd_bars(ax, values, f"{d}: MMD-RBF")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
