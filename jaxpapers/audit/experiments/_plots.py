"""Figure of the P11 headline: realism win rate and verbalised awareness against depth."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxpapers.core.experiment import Outcome


def plot_depth(outcome: Outcome, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    depths = outcome.extras["depths"]
    win = [np.asarray(outcome.values[f"win rate, depth {d}"]) for d in depths]
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    ax.errorbar(
        depths,
        [w.mean() for w in win],
        yerr=[w.std() for w in win],
        marker="o",
        label="realism win rate",
    )
    for i, kind in enumerate(("rule", "decoder-LM scored")):
        aware = [
            outcome.extras[f"awareness depth {d} (rule, decoder-LM scored)"][i] for d in depths
        ]
        ax.plot(depths, aware, marker="s", ls="--", label=f"verbalised awareness ({kind})")
    ax.set_xlabel("critique-refinement depth")
    ax.set_ylabel("rate")
    ax.set_xticks(depths)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_coding(outcome: Outcome, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    added = "both gains added (refinement + DISH - neither)"
    names = [n for n in outcome.values if n != added]
    wins = [np.asarray(outcome.values[n]) for n in names]
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    ax.bar(range(len(names)), [w.mean() for w in wins], yerr=[w.std() for w in wins], capsize=4)
    if added in outcome.values:
        level = float(np.mean(outcome.values[added]))
        ax.axhline(level, ls="--", color="gray", label="gains added (additive prediction)")
        ax.legend(fontsize=7)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("realism win rate (coding)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
