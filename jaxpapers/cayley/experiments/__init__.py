"""P03 experiments: the claims, their rules and the configuration of each run size.

Bed: the frozen all-MiniLM-L6-v2 (embeddings and six layers, mean-pooled per layer and
standardised) on two offline valence lexicons (VADER words and phrases, binary; AFINN words, four
classes), in a few-shot regime: every head trains by full-batch AdamW on the first 16, 64 or 256
examples of a seeded order of each task's training pool (one (task, seed) cell per seed and task)
and is tested on the same test texts (``_train``, ``_data``).

* ``bayes_limit`` (sanity): synthetic layers holding independent noisy copies of the class signal,
  whose Bayes accuracies are known in closed form (``Phi(s)`` from one layer, ``Phi(s sqrt L)``
  from all); the Cayley-Encoder must beat the one-layer limit clearly without exceeding the
  all-layer one, and a last-layer probe must land near ``Phi(s)``.
* ``probe_accuracy``: at the largest training set, Cayley-Encoder > fully connected layer GNN >
  best single layer (chosen on validation) > last-layer probe, each a paired one-sided test. The
  zero-virtual-node and truncated-graph variants, the mean over layers and (at the smoke and full
  sizes) attention aggregation are reported rows no verdict reads.
* ``few_shot``: the Cayley-Encoder beats the best single layer at 16, 64 and 256 examples.
* ``param_budget``: the head adds at most 0.1% of MiniLM's parameters (exact counts).
* ``layer_contributions``: occlusion of one layer at a time; a layer contributes when hiding it
  costs at least a quarter of the largest drop and one test example; several must.
* ``lora_baseline`` (precondition of ``vs_lora``): LoRA (rank 8 on query and value of the top
  MiniLM layers, plus a linear head, on the very training texts of the cells) is better than the
  frozen last-layer probe it starts from (its adapters start at zero).
* ``vs_lora``: the abstract's "outperforms LoRA fine-tuning", a strict paired test at 16 and 64
  examples, judged only when ``lora_baseline`` holds.
"""

from __future__ import annotations

from jaxpapers.cayley.experiments import _run
from jaxpapers.cayley.experiments._run import ATTENTION, GNN, LORA, Config
from jaxpapers.core.experiment import AllOf, Better, Experiment, Threshold

SIZES = {
    "smoke": Config(
        pool=256,
        val=16,
        test=32,
        shots=(16, 64, 256),
        steps=10,
        hidden=8,
        synthetic_train=32,
        synthetic_test=64,
        attention=True,
        lora_tasks=("vader_sentiment",),
        lora_shots=(16, 64),
        lora_steps=5,
        lora_adapted=1,
    ),
    "quick": Config(
        pool=320,
        val=128,
        test=512,
        shots=(16, 64, 256),
        steps=150,
        hidden=16,
        # 512 training examples keep the probe within 0.02 of Phi(s) (1024 cost 2x the run)
        synthetic_train=512,
        synthetic_test=4096,
        # the attention-aggregation row (no verdict reads it) is left out of the quick budget
        attention=False,
        # one task, the top layer adapted: the quick run's budget (every adapted layer is a
        # transformer layer's forward and backward per step, none of it cacheable)
        lora_tasks=("vader_sentiment",),
        lora_shots=(16, 64),
        lora_steps=50,
        lora_adapted=1,
    ),
    "full": Config(
        pool=1024,
        val=512,
        test=1500,
        shots=(16, 64, 256),
        steps=600,
        hidden=32,
        synthetic_train=4096,
        synthetic_test=16384,
        attention=True,
        lora_tasks=("vader_sentiment", "afinn_valence"),
        lora_shots=(16, 64, 256),
        lora_steps=300,
        lora_adapted=6,
    ),
}

SHOTS = SIZES["quick"].shots
#: rows of ``vs_lora`` (every size trains these; --full adds 256 examples, in the extras)
LORA_SHOTS = (16, 64)
assert all(set(LORA_SHOTS) <= set(c.lora_shots) for c in SIZES.values())
assert all(c.shots == SHOTS for c in SIZES.values())

EXPERIMENTS = (
    Experiment(
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
        run=_run.bayes_limit,
    ),
    Experiment(
        id="probe_accuracy",
        claim="Over frozen MiniLM layers, Cayley-Encoder > fully connected layer GNN > best single "
        "layer > last-layer probe",
        metric="test accuracy (mean over tasks; largest training set)",
        lower_is_better=False,
        baselines=(
            "fully connected GNN",
            ATTENTION,
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
        run=_run.probe_accuracy,
        row_sizes={ATTENTION: tuple(size for size, c in SIZES.items() if c.attention)},
    ),
    Experiment(
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
        run=_run.few_shot,
        plot=_run.plot_few_shot,
    ),
    Experiment(
        id="param_budget",
        claim="The Cayley-Encoder adds at most 0.1% of the LM's parameters",
        metric="added parameters / all-MiniLM-L6-v2 parameters",
        lower_is_better=True,
        baselines=("fully connected GNN", ATTENTION, "linear probe"),
        methods=(GNN,),
        rule=Threshold(GNN, 0.001),
        run=_run.param_budget,
    ),
    Experiment(
        id="layer_contributions",
        claim="Several layers contribute to the Cayley-Encoder's prediction (occlusion drop of at "
        "least a quarter of the largest)",
        metric="number of contributing layers (mean over tasks)",
        lower_is_better=False,
        baselines=(),
        methods=("layers contributing",),
        rule=Threshold("layers contributing", 1.5, below=False),
        run=_run.layer_contributions,
        plot=_run.plot_contributions,
    ),
    Experiment(
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
        run=_run.lora_baseline,
    ),
    Experiment(
        id="vs_lora",
        claim="With MiniLM frozen, the Cayley-Encoder outperforms LoRA (rank 8) fine-tuning of "
        "MiniLM trained on the same texts (judged when lora_baseline holds)",
        metric="test accuracy (mean over the LoRA tasks)",
        lower_is_better=False,
        baselines=tuple(f"{LORA} @{s}" for s in LORA_SHOTS),
        methods=tuple(f"{GNN} @{s}" for s in LORA_SHOTS),
        rule=AllOf(tuple(Better(f"{GNN} @{s}", f"{LORA} @{s}") for s in LORA_SHOTS)),
        run=_run.vs_lora,
        requires=("lora_baseline",),
    ),
)
