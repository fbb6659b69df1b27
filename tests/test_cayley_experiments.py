"""P03 issue 36: the nonlinear single-layer baseline, Shapley values over layers and their sanity
beds, the tuned LoRA protocol, and the deep synthetic bed of the topology comparison."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import tolerance

from jaxpapers.cayley import (
    LayerGNN,
    LayerProbe,
    coalition_accuracy,
    fit_head,
    layer_attribution,
    layer_graph,
    layer_shapley,
    shapley_values,
)
from jaxpapers.core.pytrees import count_params
from jaxpapers.core.verdicts import RowStats


def _rows(values: dict[str, list[float]]):
    return {k: RowStats.from_values(k, "row", v) for k, v in values.items()}


def _experiments():
    from jaxpapers.core.experiment import experiments_for

    return {e.id: e for e in experiments_for("P03")}


# ------------------------------------------------------------------------------------------------
# Shapley values over layers
# ------------------------------------------------------------------------------------------------


def _brute_force_shapley(v: np.ndarray) -> np.ndarray:
    """Average marginal contribution over every order of the players (float64)."""
    players = int(np.log2(len(v)))
    phi = np.zeros(players)
    orders = list(itertools.permutations(range(players)))
    for order in orders:
        coalition = 0
        for p in order:
            phi[p] += v[coalition | (1 << p)] - v[coalition]
            coalition |= 1 << p
    return phi / len(orders)


def test_shapley_values_against_every_order():
    v = np.random.default_rng(0).normal(size=2**4)
    got = np.asarray(shapley_values(jnp.asarray(v, jnp.float32)))
    np.testing.assert_allclose(got, _brute_force_shapley(v), **tolerance(np.float32, 10))
    np.testing.assert_allclose(got.sum(), v[-1] - v[0], **tolerance(np.float32, 10))  # efficiency
    batched = np.asarray(shapley_values(jnp.stack([jnp.asarray(v), -jnp.asarray(v)])))
    np.testing.assert_allclose(batched[1], -got, **tolerance(np.float32, 10))
    with pytest.raises(ValueError, match="expected 2\\^L"):
        shapley_values(jnp.ones(6))


def test_coalition_accuracy_against_numpy():
    x = jax.random.normal(jax.random.key(0), (40, 3, 2))
    y = (x[:, 2, 1] + x[:, 0, 0] > 0).astype(jnp.int32)
    head = LayerProbe(3, 2, 2, layer=None, key=jax.random.key(1))
    got = np.asarray(coalition_accuracy(head, x, y))
    w = np.asarray(head.linear.weight[...], np.float64)
    b = np.asarray(head.linear.bias[...], np.float64)
    xn, yn = np.asarray(x, np.float64), np.asarray(y)
    want = []
    for c in range(8):
        kept = xn.copy()
        for layer in range(3):
            if not (c >> layer) & 1:
                kept[:, layer] = xn[:, layer].mean(0)
        want.append(np.mean(np.argmax(kept.mean(1) @ w.T + b, -1) == yn))
    np.testing.assert_allclose(got, want, atol=1e-6)
    res = layer_shapley(head, x, y)
    np.testing.assert_allclose(np.asarray(res.values), _brute_force_shapley(got), atol=1e-5)
    # the one-at-a-time occlusion is the coalitions of all layers but one
    np.testing.assert_allclose(
        np.asarray(res.occlusion()), np.asarray(layer_attribution(head, x, y)), atol=1e-6
    )


def _redundant_pair():
    """Layers 0 and 1 hold the same copy of the label signal, layer 2 nothing; a head reading
    the mean of the layers (so both copies at once). Symmetric data: the layer means are 0."""
    z = jax.random.normal(jax.random.key(0), (200, 2))
    z = jnp.concatenate([z, -z])
    x = jnp.stack([z, z, jnp.zeros_like(z)], axis=1)
    y = (z[:, 0] > 0).astype(jnp.int32)
    head = LayerProbe(3, 2, 2, layer=None, key=jax.random.key(1))
    head.linear.weight.set_value(jnp.array([[0.0, 0.0], [1.0, 0.0]]))
    head.linear.bias.set_value(jnp.zeros(2))
    return head, x, y


def test_shapley_credits_redundant_layers_that_occlusion_misses():
    """Issue 36: occluding one layer at a time (the former ``layer_contributions`` measure) sees
    nothing in two layers holding the same information; their Shapley values split the gain."""
    from jaxpapers.cayley.experiments._run import MEANINGFUL_SHARE

    head, x, y = _redundant_pair()
    occlusion = np.asarray(layer_attribution(head, x, y))
    assert occlusion.max() <= 1.0 / len(y)  # the former measure: no layer contributes
    res = layer_shapley(head, x, y)
    gain = float(res.coalitions[-1] - res.coalitions[0])
    assert gain > 0.4
    shares = np.asarray(res.values) / gain
    assert shares[0] >= MEANINGFUL_SHARE and shares[1] >= MEANINGFUL_SHARE
    np.testing.assert_allclose(shares, [0.5, 0.5, 0.0], atol=0.02)


def test_layer_shapley_rejects_too_many_layers():
    head = LayerProbe(13, 1, 2, layer=0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="at most 12 layers"):
        layer_shapley(head, jnp.ones((4, 13, 1)), jnp.zeros(4, jnp.int32))


def test_contribution_bed_carriers_hold_one_copy():
    from jaxpapers.cayley.experiments._beds import COPY_LAYERS, contribution_bed

    x, y = contribution_bed(jax.random.key(0), 64, carriers=COPY_LAYERS)
    a, b = COPY_LAYERS
    np.testing.assert_array_equal(np.asarray(x[:, a]), np.asarray(x[:, b]))
    assert not np.allclose(np.asarray(x[:, 0]), np.asarray(x[:, 1]))
    assert x.shape == (64, 7, 16) and set(np.asarray(y).tolist()) == {0, 1}


def test_contribution_rules_can_fail():
    """The sanity must fail when the measure does not rank the carrier first or leaves a copy
    without a share; layer_contributions needs two layers with a meaningful share each."""
    exps = _experiments()
    sanity = exps["contributions_sanity"]
    assert exps["layer_contributions"].requires == ("contributions_sanity",)
    good = {
        "carrier's lead (one carrier)": [0.15, 0.2, 0.18, 0.22, 0.17],
        "mean noise-layer share (one carrier)": [0.01, -0.02, 0.0, 0.02, -0.01],
        "copy in layer 2": [0.14, 0.15, 0.13, 0.16, 0.15],
        "copy in layer 5": [0.15, 0.14, 0.16, 0.13, 0.14],
        "gain (two copies)": [0.3, 0.3, 0.3, 0.3, 0.3],
        "copies' occlusion share (two copies)": [0.0, 0.01, -0.01, 0.0, 0.005],
    }
    assert sanity.rule.decide(_rows(good), False) == "holds"
    # a bed on which occlusion also credits the copies does not separate the measures
    blurred = good | {"copies' occlusion share (two copies)": [0.27, 0.28, 0.26, 0.27, 0.29]}
    assert sanity.rule.decide(_rows(blurred), False) == "does not hold"
    behind = good | {"carrier's lead (one carrier)": [-0.05, -0.02, -0.04, -0.03, -0.06]}
    assert sanity.rule.decide(_rows(behind), False) == "does not hold"
    occluded = good | {"copy in layer 2": [0.0, 0.002, -0.002, 0.0, 0.001]}  # occlusion's answer
    assert sanity.rule.decide(_rows(occluded), False) == "does not hold"
    uniform = good | {"mean noise-layer share (one carrier)": [1 / 7] * 5}  # credit spread evenly
    assert sanity.rule.decide(_rows(uniform), False) == "does not hold"

    rule = exps["layer_contributions"].rule
    even = {f"layer {i}": [0.04 + 0.002 * s for s in range(5)] for i in range(7)}
    even["all layers"] = [0.28 + 0.014 * s for s in range(5)]
    accuracy = {
        "Cayley-Encoder (test accuracy)": [0.80, 0.81, 0.79, 0.82, 0.80],
        "best single layer (1-node GNN) (test accuracy)": [0.76, 0.78, 0.75, 0.77, 0.77],
        "best single layer (test accuracy)": [0.77, 0.77, 0.76, 0.78, 0.76],
    }
    even |= accuracy
    assert rule.decide(_rows(even), False) == "holds"
    # shares spread over redundant layers, but one tuned layer does as well: not "multiple layers
    # contribute" (the complementarity part)
    redundant = even | {"best single layer (test accuracy)": [0.81, 0.82, 0.80, 0.83, 0.81]}
    assert rule.decide(_rows(redundant), False) == "does not hold"
    one = {
        k: ([0.001, -0.001, 0.0, 0.002, 0.0] if k != "all layers" else v) for k, v in even.items()
    }
    one["layer 3"] = even["all layers"]
    assert rule.decide(_rows(one), False) == "does not hold"


def test_at_least_rule():
    from jaxpapers.cayley.experiments._rules import AtLeast
    from jaxpapers.core.verdicts import Threshold

    rows = _rows({"a": [1.0, 1.1, 0.9], "b": [0.0, 2.0, -1.0], "c": [-1.0, -1.1, -0.9]})
    parts = tuple(Threshold(n, 0.0, below=False) for n in "abc")
    assert AtLeast(1, parts).decide(rows, False) == "holds"
    assert AtLeast(2, parts).decide(rows, False) == "inconclusive"  # b undecided
    assert AtLeast(3, parts).decide(rows, False) == "does not hold"  # c fails
    assert AtLeast(2, parts).evaluate(rows, False).comparisons[0].rule.startswith("a > 0")
    with pytest.raises(ValueError, match="k=4"):
        AtLeast(4, parts)


# ------------------------------------------------------------------------------------------------
# The nonlinear single-layer baseline
# ------------------------------------------------------------------------------------------------


def test_single_node_gnn_is_the_heads_mlp_on_one_layer():
    """The one-node layer GNN has no messages: each round is ``h + gelu(W_u h + b_u)`` from
    ``h = P x + b_P + e``, then the read-out; the Cayley head's width, rounds and initialiser."""
    from jaxpapers.cayley.experiments._train import _single_node

    head = _single_node(jax.random.key(0), layers=7, features=5, hidden=4)
    x = jax.random.normal(jax.random.key(1), (1, 5))
    got = np.asarray(head(x))

    def lin(layer, v):
        out = np.asarray(layer.weight[...], np.float64) @ v
        return out if layer.bias is None else out + np.asarray(layer.bias[...], np.float64)

    def gelu(v):  # jax.nn.gelu's default tanh approximation
        return 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)))

    h = lin(head.proj, np.asarray(x[0], np.float64)) + np.asarray(head.node_embedding[...][0])
    for upd in head.update:
        h = h + gelu(lin(upd, h))
    np.testing.assert_allclose(got, lin(head.readout, h), **tolerance(np.float32, 10))
    cayley = LayerGNN(layer_graph(7), 5, 4, key=jax.random.key(0), hidden=4)
    assert count_params(head) == count_params(cayley) - 23 * 4  # 23 fewer node embeddings


def test_best_single_layer_is_chosen_on_validation_not_test():
    """The one-node GNN trains on the layer the tuned linear probes choose on validation (input
    0) and on the last layer (input 1); the layer is the probes' validation argmax."""
    from jaxpapers.cayley.experiments._train import (
        SINGLE,
        SINGLE_LAST,
        HeadRun,
        probe_rows,
        single_rows,
    )

    probe_val = np.array([[0.5, 0.9, 0.6, 0.0], [0.7, 0.6, 0.8, 0.0]])  # 3 layers + the mean
    probe_test = np.array([[0.9, 0.55, 0.6, 0.0], [0.95, 0.9, 0.5, 0.0]])
    chosen = probe_rows(HeadRun(probe_val, probe_test, np.ones(2, bool)), 3)["best layer index"]
    np.testing.assert_array_equal(chosen, [1, 2])
    val, test = np.array([[0.6, 0.1], [0.7, 0.2]]), np.array([[0.55, 0.4], [0.5, 0.3]])
    rows = single_rows(HeadRun(val, test, np.ones(2, bool), layer=chosen))
    np.testing.assert_array_equal(rows[SINGLE], [0.55, 0.5])
    np.testing.assert_array_equal(rows[SINGLE_LAST], [0.4, 0.3])
    np.testing.assert_array_equal(rows["best layer index (1-node GNN)"], [1, 2])


def test_layer_rules_compare_with_the_nonlinear_single_layer():
    """A Cayley-Encoder ahead of the linear best single layer but not of the one-node GNN on it
    (same width and training) does not pass few_shot or probe_accuracy."""
    from jaxpapers.cayley.experiments import SHOTS
    from jaxpapers.cayley.experiments._run import GNN, SINGLE

    exps = _experiments()
    base = [0.70, 0.74, 0.68, 0.72, 0.71]
    up = [v + 0.05 for v in base]
    rows = {}
    for s in SHOTS:
        rows |= {f"{GNN} @{s}": up, f"{SINGLE} @{s}": up, f"best single layer @{s}": base}
        rows |= {f"fully connected GNN @{s}": base, f"last-layer probe @{s}": base}
    assert exps["few_shot"].rule.decide(_rows(rows), False) != "holds"
    rows |= {f"{SINGLE} @{s}": base for s in SHOTS}
    assert exps["few_shot"].rule.decide(_rows(rows), False) == "holds"

    ahead = [v + 0.1 for v in base]
    probe = {GNN: ahead, "fully connected GNN": [v + 0.08 for v in base], SINGLE: ahead}
    probe |= {"best single layer": [v + 0.02 for v in base], "last-layer probe": base}
    assert exps["probe_accuracy"].rule.decide(_rows(probe), False) == "does not hold"
    probe[SINGLE] = [v + 0.03 for v in base]
    assert exps["probe_accuracy"].rule.decide(_rows(probe), False) == "holds"


# ------------------------------------------------------------------------------------------------
# Tuned LoRA and the tuned Cayley-Encoder of vs_lora
# ------------------------------------------------------------------------------------------------


def test_fit_head_takes_a_traced_learning_rate():
    """One program trains a grid of learning rates (vmap), the same as separate runs."""
    x = jax.random.normal(jax.random.key(0), (32, 3, 4))
    y = (x[:, 1, 0] > 0).astype(jnp.int32)
    rates = jnp.array([1e-3, 3e-2])

    def run(lr):
        probe = LayerProbe(3, 4, 2, layer=1, key=jax.random.key(1))
        return fit_head(probe, x, y, steps=20, learning_rate=lr).losses

    together = np.asarray(jax.jit(jax.vmap(run))(rates))
    for i, lr in enumerate((1e-3, 3e-2)):
        np.testing.assert_allclose(together[i], np.asarray(run(lr)), **tolerance(np.float32, 10))
    assert together[1, -1] < together[0, -1]


def test_lora_cells_use_the_heads_steps_and_validation_texts(monkeypatch):
    """LoRA trains the heads' steps; it is tuned on the validation split (never the test texts)
    with one learning rate per cell of the grid, on the cells' own training texts."""
    from jaxpapers.cayley.experiments import SIZES, _run

    config = SIZES["quick"]
    seen = {}
    monkeypatch.setattr(_run, "train_lora", lambda *a, **k: seen.update(args=a, kwargs=k))
    total = config.pool + config.val + config.test
    h = np.arange(total, dtype=np.float32)[:, None]  # each text's state is its index
    mask, labels = np.ones((total, 1), np.int32), np.zeros(total, np.int32)
    _run._lora_cells(
        None, h, mask, labels, config=config, task=0, n=16, adapted=2, seeds=[3, 4],
        rates=(1e-3, 1e-2),
    )  # fmt: skip
    args, kwargs = seen["args"], seen["kwargs"]
    assert kwargs["steps"] == config.steps and kwargs["adapted"] == 2
    np.testing.assert_array_equal(kwargs["learning_rate"], [1e-3, 1e-2, 1e-3, 1e-2])
    h_val = kwargs["validation"][0][:, 0]
    np.testing.assert_array_equal(h_val, np.arange(config.pool, config.pool + config.val))
    np.testing.assert_array_equal(args[5][:, 0], np.arange(config.pool + config.val, total))
    train = args[2][..., 0]
    from jaxpapers.cayley.experiments._train import cell_order

    np.testing.assert_array_equal(train[0], cell_order(0, 3, config.pool)[:16])
    np.testing.assert_array_equal(train[1], train[0])  # same cell, the other learning rate
    assert len(args[1]) == 4


def test_tuning_grids_and_choice():
    from jaxpapers.cayley.experiments import SIZES
    from jaxpapers.cayley.experiments._run import _choose

    for size in ("quick", "full"):
        c = SIZES[size]
        assert len(c.lora_learning_rates) >= 3 and len(c.lora_adapted) >= 2
        assert 1 <= c.lora_tuning_seeds
    assert _choose({(1, 1e-3): 0.7, (2, 1e-3): 0.8, (2, 1e-2): 0.8}) == (2, 1e-3)


# ------------------------------------------------------------------------------------------------
# The deep bed: Cayley graph against the complete graph at equal parameters
# ------------------------------------------------------------------------------------------------


def test_deep_bed_heads_differ_only_in_edges():
    """Four heads, one module: same parameters and initial weights, only the adjacency differs;
    the dense aggregation is message passing over the kept edges (Cayley graph, no edges)."""
    from jaxpapers.cayley.experiments._beds import DEEP_LAYERS, DenseGNN, adjacency, deep_graphs
    from jaxpapers.cayley.experiments._train import _Switched

    graphs = deep_graphs()
    assert {h: int(m.sum()) for h, m in graphs.items()} == {
        "Cayley-Encoder": 96,
        "fully connected GNN": DEEP_LAYERS * (DEEP_LAYERS - 1),
        "ring GNN": 96,
        "no-edge GNN": 0,
    }
    complete = layer_graph(DEEP_LAYERS, topology="complete")
    x = jax.random.normal(jax.random.key(0), (DEEP_LAYERS, 3))
    heads = {
        h: DenseGNN(adjacency(m), 3, 2, key=jax.random.key(1), hidden=4) for h, m in graphs.items()
    }
    assert len({count_params(h) for h in heads.values()}) == 1
    for h in ("Cayley-Encoder", "ring GNN", "no-edge GNN", "fully connected GNN"):
        sparse = _Switched(complete, 3, 2, key=jax.random.key(1), hidden=4, edge_mask=graphs[h])
        np.testing.assert_allclose(
            np.asarray(heads[h](x)), np.asarray(sparse(x)), **tolerance(np.float32, 10)
        )
    cayley = LayerGNN(layer_graph(DEEP_LAYERS), 3, 2, key=jax.random.key(1), hidden=4)
    np.testing.assert_allclose(
        np.asarray(heads["Cayley-Encoder"](x)), np.asarray(cayley(x)), **tolerance(np.float32, 10)
    )


def test_deep_bed_reach_and_bayes_accuracy():
    """The pair sits at the ring's diameter (6 hops > 2 rounds x 2), within the Cayley graph's
    reach (diameter 4); the closed-form Bayes accuracy is the sign rule's on samples, and no
    single layer carries information about the label."""
    from jaxpapers.cayley.experiments._beds import (
        DEEP_BAYES,
        DEEP_ROUNDS,
        deep_graphs,
        deep_layers,
        deep_pair,
        graph_distance,
    )

    graphs = deep_graphs()
    for seed in range(2000, 2010):
        a, b = deep_pair(seed)
        assert graph_distance(graphs["ring GNN"], a, b) == 6 > 2 * DEEP_ROUNDS
        assert graph_distance(graphs["Cayley-Encoder"], a, b) <= 2 * DEEP_ROUNDS
        assert graph_distance(graphs["fully connected GNN"], a, b) == 1
        assert graph_distance(graphs["no-edge GNN"], a, b) == math.inf
    x, y = deep_layers(jax.random.key(0), 200_000, pair=jnp.array([3, 15]))
    x, y = np.asarray(x)[..., 0], np.asarray(y)  # one feature: u = [1]
    assert abs(np.mean((x[:, 3] * x[:, 15] > 0) == y) - DEEP_BAYES) < 0.005
    assert abs(np.mean(y[x[:, 3] > 0]) - 0.5) < 0.01  # one layer alone: no information
    assert math.isclose(DEEP_BAYES, 0.8161, abs_tol=1e-4)


def test_deep_bed_no_edge_at_chance_complete_graph_solves_it():
    """Known answer at smoke size: the head without edges (a sum of single-layer functions) is
    at chance; the complete graph, one hop between the pair, learns the interaction. (On the
    former bed, label = sum over layers, the no-edge head was the best one.)"""
    from jaxpapers.cayley.experiments._beds import adjacency, deep_graphs, deep_pair, deep_runs

    graphs = deep_graphs()
    heads = ("fully connected GNN", "no-edge GNN")
    _, test, finite = deep_runs(
        np.full(2, 2000, np.int32),
        np.array([deep_pair(2000)] * 2, np.int32),
        np.stack([adjacency(graphs[h]) for h in heads]),
        np.full(2, 0.1, np.float32),
        train=512,
        val=64,
        test=2048,
        hp=(("steps", 150), ("weight_decay", 1e-2)),
        hidden=8,
    )
    test = np.asarray(test)
    assert np.all(np.asarray(finite))
    assert test[0] > 0.68, test  # Bayes 0.816
    assert abs(test[1] - 0.5) < 0.05, test


def test_deep_topology_rule():
    from jaxpapers.cayley.experiments._beds import DEEP_BAYES

    rule = _experiments()["deep_topology"].rule
    base = [0.70, 0.72, 0.71, 0.70, 0.73]
    chance = [0.50, 0.51, 0.49, 0.50, 0.50]
    rows = {"fully connected GNN": base, "ring GNN": chance, "no-edge GNN": chance}
    better = [v + 0.02 for v in base]
    assert rule.decide(_rows(rows | {"Cayley-Encoder": better}), False) == "holds"
    assert rule.decide(_rows(rows | {"Cayley-Encoder": [v - 0.02 for v in base]}), False) == (
        "does not hold"
    )
    ring_solves = rows | {"ring GNN": [v + 0.05 for v in base], "Cayley-Encoder": better}
    assert rule.decide(_rows(ring_solves), False) == "does not hold"
    above_bayes = [DEEP_BAYES + 0.05] * 5  # a leak: above the Bayes accuracy
    assert rule.decide(_rows(rows | {"Cayley-Encoder": above_bayes}), False) == "does not hold"


def test_retrained_coalitions_on_two_copies():
    """Known answer of coalition retraining on the two-copies bed (the same noise-free copy in
    layers 2 and 5, noise elsewhere): the head retrained without either copy loses nothing (the
    other copy suffices: leave-one-out drop ~0), either copy alone reaches the whole gain, a
    noise layer alone gains nothing. One program over (coalition, cell)."""
    from jaxpapers.cayley.experiments._beds import CONTRIBUTION_LAYERS, contribution_bed
    from jaxpapers.cayley.experiments._data import Splits
    from jaxpapers.cayley.experiments._train import coalition_masks, retrain_coalitions

    parts = [
        contribution_bed(jax.random.key(k), n, carriers=(2, 5))
        for k, n in ((0, 64), (1, 64), (2, 256))
    ]
    arrays = [np.asarray(a)[None] for p in parts for a in p]
    splits = Splits(*arrays, lm_params=0)
    acc = retrain_coalitions(
        splits,
        cells=((0, 0),),
        n=64,
        learning_rates=np.array([5e-3]),
        steps=100,
        weight_decay=1e-2,
        hidden=8,
    )[0]
    L = CONTRIBUTION_LAYERS
    assert acc.shape == (len(coalition_masks(L)),) == (2 + 2 * L,)
    none, full = acc[0], acc[1]
    alone, without = acc[2 : 2 + L], acc[2 + L :]
    assert full > 0.97 and abs(none - 0.5) < 0.1
    for copy in (2, 5):
        assert full - without[copy] < 0.02  # leave-one-out: nothing lost
        assert alone[copy] > full - 0.02  # alone: the whole gain
    assert alone[0] - none < 0.1  # a noise layer alone


# ------------------------------------------------------------------------------------------------
# Tuned heads: the probes' C and the layer heads' learning rate chosen on validation
# ------------------------------------------------------------------------------------------------


def test_ridge_probe_is_scikit_learns_ridge_classifier():
    """The tuned probe is fitted exactly: scikit-learn's RidgeClassifier at every alpha, the
    padded examples (weight 0) ignored, absent classes never predicted."""
    sklearn = pytest.importorskip("sklearn.linear_model")
    from jaxpapers.cayley import ridge_probe

    rng = np.random.default_rng(0)
    n, d = 48, 64  # n < d: the dual form
    x = rng.normal(size=(n + 16, d))
    y = rng.integers(0, 3, n + 16)  # three of four classes
    x[:, 0] += y
    w = np.r_[np.ones(n), np.zeros(16)]
    alphas = np.array([0.1, 10.0, 1000.0])
    W, b = ridge_probe(x, y, w, alphas=alphas, num_classes=4)
    for a, alpha in enumerate(alphas):
        ref = sklearn.RidgeClassifier(alpha=alpha).fit(x[:n], y[:n])
        scores = x @ np.asarray(W[a]) + np.asarray(b[a])
        # RidgeClassifier fits targets in {-1, 1}: twice the one-hot fit, minus one
        np.testing.assert_allclose(2 * scores[:, :3] - 1, ref.decision_function(x), atol=1e-8)
        assert np.isneginf(np.asarray(b[a])[3])


def test_probe_grid_tunes_alpha_and_layer_on_validation():
    """Known answer: one layer holds the class signal, the others noise; the probe grid (every
    size, input and C in one program) finds that layer on validation and reaches the accuracy of
    a linear rule on it; the setting is chosen by validation accuracy, never by test."""
    from jaxpapers.cayley.experiments._train import (
        PROBE_ALPHAS,
        _ridge_grid,
        _tuned_on_validation,
        probe_rows,
    )

    rng = np.random.default_rng(1)
    layers, d, top, nv, nt = 3, 8, 64, 64, 256

    def data(n):
        y = rng.integers(0, 2, n)
        x = rng.normal(size=(n, layers, d)).astype(np.float32)
        x[:, 1, 0] += 3.0 * (2 * y - 1)  # layer 1 separates the classes (Bayes Phi(3))
        return x, y.astype(np.int32)

    (xtr, ytr), (xv, yv), (xt, yt) = data(top), data(nv), data(nt)
    out = _ridge_grid(
        (16, 64),
        np.asarray(PROBE_ALPHAS),
        np.zeros(1, np.int32),
        np.zeros(1, np.int32),
        xtr[None], ytr[None], xv[None], yv[None], xt[None], yt[None],
    )  # fmt: skip
    val, test, finite = (np.asarray(a, np.float64) for a in out)
    assert val.shape == (1, 2, layers + 1, len(PROBE_ALPHAS)) and finite.all()
    v, t, _ = _tuned_on_validation(val[:, 1], test[:, 1], axis=-1)
    rows = probe_rows(type("R", (), {"val": v, "test": t})(), layers)
    assert rows["best layer index"][0] == 1
    assert rows["best single layer"][0] >= 0.97  # Phi(3) = 0.9987 on 256 test examples
    assert rows["last-layer probe"][0] < 0.7  # noise

    val = np.array([[0.6, 0.8, 0.7]])
    test = np.array([[0.9, 0.5, 0.95]])
    assert _tuned_on_validation(val, test, axis=1)[1].tolist() == [0.5]


def test_vs_lora_grids_equal_bracketing_and_tuned_on_two_seeds():
    """vs_lora: as many settings for the Cayley-Encoder as for LoRA, its rates reaching past the
    optimum the 2026-12-05 quick run found (val still rising at 1e-1 on the old 3-rate grid),
    tuned on at least two seeds' validation texts (with one, 128 texts, the head's rate was
    chosen at the grid's upper edge); the layer heads tune on a shared grid."""
    from jaxpapers.cayley.experiments import SIZES

    for size in ("quick", "full"):
        c = SIZES[size]
        assert len(c.lora_head_learning_rates) == len(c.lora_learning_rates) * len(c.lora_adapted)
        assert c.lora_tuning_seeds >= 2
        assert max(c.lora_head_learning_rates) >= 3e-1 and min(c.lora_head_learning_rates) <= 1e-3
        assert len(c.learning_rates) >= 3


def test_contribution_bed_separates_shapley_from_occlusion():
    """On the two-copies bed (nearly noise-free copies), the trained head's one-at-a-time
    occlusion gives the copies less than a meaningful share of the gain while their Shapley
    values each get one (with the copy at s = 1 occlusion gave each ~0.27 of the gain, at
    s = 3 still ~0.2)."""
    from functools import partial

    from jaxpapers.cayley.experiments._beds import (
        CONTRIBUTION_LAYERS,
        COPY_LAYERS,
        FEATURES,
        contribution_runs,
    )
    from jaxpapers.cayley.experiments._run import (
        GNN,
        LEARNING_RATE,
        MEANINGFUL_SHARE,
        WEIGHT_DECAY,
        _occlusion,
    )
    from jaxpapers.cayley.experiments._train import GRAPH_HEADS

    make = partial(GRAPH_HEADS[GNN], layers=CONTRIBUTION_LAYERS, features=FEATURES, hidden=8)
    hp = (("steps", 100), ("learning_rate", LEARNING_RATE), ("weight_decay", WEIGHT_DECAY))
    values, finite = contribution_runs(
        np.array([3000, 3001], np.int32), make=make, train=128, test=256, hp=hp
    )
    values = np.asarray(values, np.float64)[:, 1]  # the two-copies bed: [seeds, 2^L]
    gain = values[:, -1] - values[:, 0]
    assert np.all(np.asarray(finite)) and np.all(gain > 0.3)
    occlusion = _occlusion(values)[:, list(COPY_LAYERS)] / gain[:, None]
    assert np.all(occlusion < MEANINGFUL_SHARE)
    phi = np.asarray(shapley_values(jnp.asarray(values)))[:, list(COPY_LAYERS)] / gain[:, None]
    assert np.all(phi > MEANINGFUL_SHARE)


# ------------------------------------------------------------------------------------------------
# The layer heads' grid: one learning rate per head and seed; small sizes share a program
# ------------------------------------------------------------------------------------------------


def test_pooled_choice_one_rate_per_seed():
    """The rate is chosen per seed on the mean validation accuracy over the seed's cells (tasks)
    and every size (and trailing axes, e.g. a head's inputs), not per cell: known answer where
    the per-cell argmax differs between a seed's cells."""
    from jaxpapers.cayley.experiments._train import pooled_choice

    seed = np.array([0, 1, 0, 1])  # cells (task 0, seeds 0, 1), (task 1, seeds 0, 1)
    small = np.array([[0.9, 0.5, 0.6], [0.5, 0.6, 0.7], [0.5, 0.8, 0.6], [0.5, 0.6, 0.7]])
    large = np.array([[0.6, 0.7, 0.5], [0.5, 0.5, 0.9], [0.6, 0.8, 0.5], [0.5, 0.6, 0.6]])
    # per cell and size the argmax would be 0, 2, 1, 2 (small) and 1, 2, 1, 2 (large)
    assert pooled_choice([small, large], seed).tolist() == [1, 2, 1, 2]
    # trailing axes are averaged; ties go to the first setting
    two_inputs = np.stack([small, small[:, ::-1]], -1)
    assert pooled_choice([two_inputs], seed).tolist() == [0, 0, 0, 0]


def test_run_grid_pools_rates_and_shares_the_small_sizes_program():
    """run_grid: every layer head's learning rate is one per seed (the same at every size and
    task), and the sizes below PAD_FLOOR train in one program with the PAD_FLOOR one (one
    compile of the Cayley program for three sizes)."""
    from types import SimpleNamespace

    from jaxpapers.cayley.experiments import _train

    rng = np.random.default_rng(0)
    tasks, pool, layers, d = 2, _train.PAD_FLOOR, 3, 4

    def split(n):
        y = rng.integers(0, 2, (tasks, n)).astype(np.int32)
        x = rng.normal(size=(tasks, n, layers, d)).astype(np.float32)
        x[..., 1, 0] += 2.0 * (2 * y - 1)
        return x, y

    (xtr, ytr), (xv, yv), (xt, yt) = split(pool), split(16), split(32)
    splits = SimpleNamespace(x_train=xtr, y_train=ytr, x_val=xv, y_val=yv, x_test=xt, y_test=yt)
    before = _train._graph_grid._cache_size()
    grid = _train.run_grid(
        splits,
        shots=(8, 32, pool),
        seeds=(0, 1),
        steps=3,
        learning_rates=(1e-3, 1e-2, 1e-1),
        weight_decay=1e-2,
        hidden=4,
        heads=("Cayley-Encoder",),
        few_shot_heads=("Cayley-Encoder",),
    )
    assert _train._graph_grid._cache_size() - before == 1  # one program for the three sizes
    seeds = np.array([r for _, r in grid.cells])
    for runs in (grid.heads["Cayley-Encoder"], grid.single):
        settings = np.stack([np.asarray(run.setting) for run in runs.values()])  # [sizes, cells]
        assert (settings == settings[:1]).all()  # the same rate at every size
        for r in (0, 1):
            assert len(set(settings[0, seeds == r].tolist())) == 1  # ... and task


def test_probe_accuracy_reports_one_node_rate_per_seed():
    """probe_accuracy's extras: the one-node GNN's tuned learning rate is one per cell, the same
    for a seed's tasks (one rate per seed, shared by both its inputs), and its label says so (it
    read "(probe-chosen layer, last layer)", as if there were a rate per input)."""
    import dataclasses
    from types import SimpleNamespace

    from jaxpapers.cayley.experiments import SIZES, _run, _train

    rng = np.random.default_rng(1)
    tasks, pool, layers, d = 2, _train.PAD_FLOOR, _run.LAYERS, 4

    def split(n):
        y = rng.integers(0, 2, (tasks, n)).astype(np.int32)
        x = rng.normal(size=(tasks, n, layers, d)).astype(np.float32)
        x[..., 3, 0] += 2.0 * (2 * y - 1)
        return x, y

    (xtr, ytr), (xv, yv), (xt, yt) = split(pool), split(16), split(32)
    splits = SimpleNamespace(x_train=xtr, y_train=ytr, x_val=xv, y_val=yv, x_test=xt, y_test=yt)
    grid = _train.run_grid(
        splits,
        shots=(pool,),
        seeds=(0, 1),
        steps=2,
        learning_rates=(1e-3, 1e-1),
        weight_decay=1e-2,
        hidden=4,
        heads=("Cayley-Encoder",),
        few_shot_heads=("Cayley-Encoder",),
    )
    ctx = SimpleNamespace(seed_list=[0, 1], cached=lambda name, compute: grid)
    config = dataclasses.replace(SIZES["smoke"], shots=(pool,))
    tuned = _run.probe_accuracy(ctx, config).extras["tuned_settings_per_cell"]
    rates = tuned["one-node GNN learning rate (one per seed, shared by both its inputs)"]
    assert np.shape(rates) == (len(grid.cells),)
    by_seed = {}
    for (_, r), lr in zip(grid.cells, rates, strict=True):
        by_seed.setdefault(r, set()).add(lr)
    assert all(len(v) == 1 for v in by_seed.values())
    assert not any("(probe-chosen layer, last layer)" in k for k in tuned)
