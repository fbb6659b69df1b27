"""P03 experiments: registrations and the table of sizes (the work is in ``_run``).

Quick budget (session 9, 2026-12-01, ``/usr/bin/time jaxpapers reproduce P03 --quick`` on 2 quiet
cores): 94.7 s wall on a day when this machine ran 10-17% slower than before; a compile log put
35 of 96 s in XLA compiles (the five heads' grid programs 17 s). The heads', probes', LoRA and
synthetic programs now compile at LLVM level 1 at the quick size (``core.pytrees.QUICK_COMPILE``):
89.4 and 93.0 s in two runs, every row identical per seed; at the budget's edge on such a day.
The Bayes limits' normal CDF is ``math.erfc`` instead of ``scipy.stats`` (the same floats; its
import cost ~0.8 s): 93.9 s in a third run.

Session 10 (same command, base = the previous commit, runs alternated, quiet cores checked by
``/proc/stat``; an even slower day: the base took 104.2 and 98.8 s): 81.0 s wall, 130.5 CPU-s
against the base's 98.8 s, 157.4 CPU-s (an intermediate state without the attention change:
88.9 s / 144 CPU-s against 104.2 s / 166 CPU-s). Every quick row is identical per seed to the
base's, the attention-aggregation row apart, which quick mode no longer runs. What changed:

* one compiled program per group of heads that differ only in data (``_train._programs``): the
  zero-virtual-node Cayley head is the Cayley head with a traced switch zeroing its virtual
  nodes' starting states, the truncated-graph head the complete-graph head with a traced edge
  mask (``message_passing(edge_mask=...)``; same nodes and initial weights for a key); both give
  the very same floats (zeros added, exact), so 3 grid programs compile instead of 5 (~3 s each);
* no eager op compiles around the grid: the cells' keys are folded inside the programs from
  integer seeds, the training weights built there from the cell's size, the inputs indexed
  there from one copy of the largest training sets (no tiling), the parameter counts taken from
  ``jax.eval_shape`` (the eager inits compiled ~15 small programs, ~2.5 s) and the results
  sliced as NumPy arrays; the LoRA inits are stacked on the host and the synthetic keys made in
  its program (75 compiles in a run before, 41 after the first two changes);
* ``probe_accuracy``'s "attention aggregation" row (no verdict reads it) runs at smoke and full
  sizes only (``row_sizes``; its parameter fraction stays in ``param_budget``): its program was
  a compile and 18 cells, ~8 s.

Tried and not kept: (1) message passing by gathers alone (a custom VJP adding each node's in-
and out-neighbours in edge order): bit-identical to ``segment_sum`` but no faster; (2) message
passing as a dense adjacency product: ~35% less run time of the GNN programs but not
bit-identical (dot-product sums reorder; every GNN row would shift at float level); (3)
overlapping each program's compile with the previous one's run (async dispatch): 30.3 vs 31-33 s
on three programs, within noise, as the runs already use both cores. Left as they are: the two
LoRA programs (16 and 64 examples: different shapes; padding would change the loss's sums), the
eager LoRA initialisation (~1 s of small compiles; it goes through ``core.nn.lora``), the Cayley
program's run (~21 s: 24 cells of 256 examples, the 16- and 64-example cells padded), and the
heads' sizes.
"""

from __future__ import annotations

from functools import partial

from jaxpapers.cayley.experiments import _run
from jaxpapers.cayley.experiments._run import Sizes
from jaxpapers.core.experiment import (
    AllOf,
    Better,
    Context,
    Experiment,
    Threshold,
    register,
)

SIZES = {
    "smoke": Sizes(
        pool=256,
        val=16,
        test=32,
        shots=(16, 64, 256),
        steps=10,
        hidden=8,
        synthetic_train=32,
        synthetic_test=64,
        lora_tasks=("vader_sentiment",),
        lora_shots=(16, 64),
        lora_steps=5,
        lora_adapted=1,
    ),
    "quick": Sizes(
        pool=320,
        val=128,
        test=512,
        shots=(16, 64, 256),
        steps=150,
        hidden=16,
        # 512 training examples keep the probe within 0.02 of Phi(s) (1024 cost 2x the run)
        synthetic_train=512,
        synthetic_test=4096,
        # one task, the top layer adapted: the quick run's budget (every adapted layer is a
        # transformer layer's forward and backward per step, none of it cacheable)
        lora_tasks=("vader_sentiment",),
        lora_shots=(16, 64),
        lora_steps=50,
        lora_adapted=1,
    ),
    "full": Sizes(
        pool=1024,
        val=512,
        test=1500,
        shots=(16, 64, 256),
        steps=600,
        hidden=32,
        synthetic_train=4096,
        synthetic_test=16384,
        lora_tasks=("vader_sentiment", "afinn_valence"),
        lora_shots=(16, 64, 256),
        lora_steps=300,
        lora_adapted=6,
    ),
}


def _sized(fn, ctx: Context):
    return fn(ctx, ctx.pick(**SIZES))


GNN = _run.GNN
LORA = _run.LORA
SHOTS = SIZES["quick"].shots
#: rows of ``vs_lora`` (every size trains these; --full adds 256 examples, in the extras)
LORA_SHOTS = (16, 64)
assert all(set(LORA_SHOTS) <= set(s.lora_shots) for s in SIZES.values())

register(
    Experiment(
        paper="P03",
        id="bayes_limit",
        claim="Sanity: on synthetic layers holding independent noisy copies of the class signal, "
        "the Cayley-Encoder beats the one-layer Bayes accuracy Phi(s) by > 0.1 without exceeding "
        "the all-layer one Phi(s sqrt L); a last-layer probe lands within 0.03 of Phi(s)",
        metric="test accuracy",
        lower_is_better=False,
        baselines=("last-layer probe",),
        methods=(GNN,),
        rule=AllOf(
            (
                Threshold(GNN, _run.BAYES_ONE + 0.1, below=False),
                Threshold(GNN, _run.BAYES_ALL + 0.01),
                Threshold("last-layer probe", _run.BAYES_ONE + 0.01),
                Threshold("last-layer probe", _run.BAYES_ONE - 0.03, below=False),
            )
        ),
        run=partial(_sized, _run.bayes_limit),
    )
)
register(
    Experiment(
        paper="P03",
        id="probe_accuracy",
        claim="Over frozen MiniLM layers, Cayley-Encoder > fully connected layer GNN > best single "
        "layer > last-layer probe",
        metric="test accuracy (mean over tasks; largest training set)",
        lower_is_better=False,
        baselines=(
            "fully connected GNN",
            "attention aggregation",
            "best single layer",
            "mean over layers",
            "last-layer probe",
        ),
        methods=(GNN, "Cayley (zero virtual nodes)", "Cayley (truncated graph)"),
        rule=AllOf(
            (
                Better(GNN, "fully connected GNN"),
                Better("fully connected GNN", "best single layer"),
                Better("best single layer", "last-layer probe"),
            )
        ),
        run=partial(_sized, _run.probe_accuracy),
        row_sizes={_run.ATTENTION: _run.ATTENTION_SIZES},
    )
)
register(
    Experiment(
        paper="P03",
        id="few_shot",
        claim="The Cayley-Encoder beats the best single layer with 16, 64 and 256 labelled "
        "examples",
        metric="test accuracy (mean over tasks)",
        lower_is_better=False,
        baselines=tuple(
            f"{b} @{s}"
            for s in SHOTS
            for b in ("fully connected GNN", "best single layer", "last-layer probe")
        ),
        methods=tuple(f"{GNN} @{s}" for s in SHOTS),
        rule=AllOf(tuple(Better(f"{GNN} @{s}", f"best single layer @{s}") for s in SHOTS)),
        run=partial(_sized, _run.few_shot),
        plot=_run.plot_few_shot,
    )
)
register(
    Experiment(
        paper="P03",
        id="param_budget",
        claim="The Cayley-Encoder adds at most 0.1% of the LM's parameters",
        metric="added parameters / all-MiniLM-L6-v2 parameters",
        lower_is_better=True,
        baselines=("fully connected GNN", "attention aggregation", "linear probe"),
        methods=(GNN,),
        rule=Threshold(GNN, 0.001),
        run=partial(_sized, _run.param_budget),
    )
)
register(
    Experiment(
        paper="P03",
        id="layer_contributions",
        claim="Several layers contribute to the Cayley-Encoder's prediction (occlusion drop of at "
        "least a quarter of the largest)",
        metric="number of contributing layers (mean over tasks)",
        lower_is_better=False,
        baselines=(),
        methods=("layers contributing",),
        rule=Threshold("layers contributing", 1.5, below=False),
        run=partial(_sized, _run.layer_contributions),
        plot=_run.plot_contributions,
    )
)
register(
    Experiment(
        paper="P03",
        id="lora_baseline",
        claim="Precondition of vs_lora: LoRA fine-tuning is trained, i.e. better than the "
        "frozen last-layer linear probe it starts from (its adapters start at zero, so an "
        "untrained LoRA is that probe) on the same texts",
        metric="test accuracy (mean over the LoRA tasks)",
        lower_is_better=False,
        baselines=tuple(f"last-layer probe @{s}" for s in LORA_SHOTS),
        methods=tuple(f"{LORA} @{s}" for s in LORA_SHOTS),
        # strictly better: LoRA's head reads the probe's features, so a LoRA whose adapters did
        # not learn ties the probe and must not pass
        rule=AllOf(tuple(Better(f"{LORA} @{s}", f"last-layer probe @{s}") for s in LORA_SHOTS)),
        run=partial(_sized, _run.lora_baseline),
    )
)
register(
    Experiment(
        paper="P03",
        id="vs_lora",
        claim="With MiniLM frozen, the Cayley-Encoder outperforms LoRA (rank 8) fine-tuning of "
        "MiniLM trained on the same texts (judged when lora_baseline holds)",
        metric="test accuracy (mean over the LoRA tasks)",
        lower_is_better=False,
        baselines=tuple(f"{LORA} @{s}" for s in LORA_SHOTS),
        methods=tuple(f"{GNN} @{s}" for s in LORA_SHOTS),
        rule=AllOf(tuple(Better(f"{GNN} @{s}", f"{LORA} @{s}") for s in LORA_SHOTS)),
        run=partial(_sized, _run.vs_lora),
        requires=("lora_baseline",),
    )
)
