"""State-tracking data against independent references, the stdlib corpus, and the smoke run."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from jaxpapers.core.experiment import run_paper
from jaxpapers.lrnn import TASKS, evaluate_expression, load_corpus, make_batch, task_spec

_SYMBOLS = "01234+-()"


def test_parity_and_mod5_labels_match_python_loops():
    for task, mod in (("parity", 2), ("mod5", 5)):
        b = make_batch(task, 3, 30, seed=0)
        assert b.tokens.shape == (3, 31) and np.all(b.tokens[:, 0] == task_spec(task).vocab - 2)
        for row in range(3):
            acc = 0
            for t in range(1, 31):
                acc = (acc + int(b.tokens[row, t])) % mod
                assert b.labels[row, t] == acc
        assert np.all(b.mask[:, 0] == 0) and np.all(b.mask[:, 1:] == 1)


def test_s5_labels_are_compositions_of_permutations():
    perms = list(itertools.permutations(range(5)))
    b = make_batch("s5", 2, 25, seed=1, min_length=10)
    for row in range(2):
        state = tuple(range(5))
        for t in range(1, 26):
            g = perms[b.tokens[row, t]]
            state = tuple(g[state[i]] for i in range(5))  # apply the prefix, then g
            assert perms[b.labels[row, t]] == state
    assert np.all(b.mask[:, :10] == 0) and np.all(b.mask[:, 10:] == 1)


def test_bracket_expressions_evaluate_like_python():
    b = make_batch("mod5_brackets", 40, 41, seed=2, min_length=3)
    bos, pad = task_spec("mod5_brackets").vocab - 2, task_spec("mod5_brackets").vocab - 1
    assert np.all(b.mask[:, :-1] == 0) and np.all(b.mask[:, -1] == 1)
    lengths = set()
    for row in range(40):
        start = int(np.argmax(b.tokens[row] == bos))
        assert np.all(b.tokens[row, :start] == pad)
        expr = "".join(_SYMBOLS[t] for t in b.tokens[row, start + 1 :])
        lengths.add(len(expr))
        assert len(expr) % 2 == 1 and 3 <= len(expr) <= 41
        assert b.labels[row, -1] == eval(expr) % 5  # Python reads +, - left to right
    assert len(lengths) > 5
    assert evaluate_expression([2, 6, 7, 1, 5, 3, 8]) == (2 - (1 + 3)) % 5


def test_task_bad_input_raises():
    with pytest.raises(ValueError, match="task='dyck'"):
        make_batch("dyck", 2, 10, seed=0)
    with pytest.raises(ValueError, match="min_length"):
        make_batch("parity", 2, 10, seed=0, min_length=11)
    with pytest.raises(ValueError, match="seed=-1"):
        make_batch("parity", 2, 10, seed=-1)


def test_make_batch_seed_is_the_numpy_stream():
    """``seed`` (an integer or a sequence of them) names one NumPy stream: the same batch as the
    experiments' earlier ``np.random.default_rng(seed)`` generators."""
    a = make_batch("parity", 4, 12, seed=[3, 1, 7])
    b = make_batch("parity", 4, 12, seed=[3, 1, 7])
    symbols = np.random.default_rng([3, 1, 7]).integers(2, size=(4, 12))
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.tokens[:, 1:], symbols)


def test_stdlib_corpus_is_real_text():
    corpus = load_corpus(max_chars=50_000)
    assert corpus.train.size == 45_000 and corpus.valid.size == 5_000
    text = bytes(corpus.train[:5000]).decode("ascii")
    assert text.count(" ") > 500 and "the" in text
    counts = np.bincount(corpus.train, minlength=128) / corpus.train.size
    entropy = -np.sum(counts[counts > 0] * np.log2(counts[counts > 0]))
    assert 3.5 < entropy < 5.5  # unigram entropy of English prose, bits per character


def test_smoke_run_writes_finite_rows_and_verdicts(tmp_path):
    run_paper("P13", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    record = json.loads((tmp_path / "P13" / "result.json").read_text())
    ids = {e["id"] for e in record["experiments"]}
    tracking = {f"{kind}_{t}" for t in TASKS for kind in ("tracking", "generalisation")}
    assert ids == tracking | {"handset_bdlru8", "char_lm"}
    for exp in record["experiments"]:
        assert exp["verdict"] in {"holds", "does not hold", "inconclusive"}
        assert len(exp["rows"]) >= (2 if exp["id"] == "handset_bdlru8" else 3)
        for row in exp["rows"]:
            assert len(row["seeds"]) == 2
            assert all(math.isfinite(v) for v in row["seeds"])


def test_handset_bdlru8_tracks_z5_and_s5_exactly():
    """The hand-set permutation transitions (inside the L1 ball) give the task labels at every
    position up to 128 through the associative scan."""
    from jaxpapers.lrnn.experiments._handset import handset_accuracy, handset_gates

    for task in ("mod5", "s5"):
        acc = handset_accuracy(task, batch=8, length=128, split=40, seed=3)
        assert acc["train_lengths"] == 1.0 and acc["longer"] == 1.0
        assert acc["max_deviation_from_one_hot"] == 0.0
    gates = handset_gates("s5")
    rows = np.abs(gates[..., :-1]).sum(-1)
    assert set(np.unique(rows)) <= {0.0, 1.0}  # every row on (or inside) the unit L1 sphere
    with pytest.raises(ValueError, match="task='parity'"):
        handset_gates("parity")


def test_s5_recipe_curriculum_masks_labels_beyond_the_current_length():
    from jaxpapers.lrnn.experiments import RECIPE
    from jaxpapers.lrnn.experiments._recipe import _batches, curriculum_length

    sizes = RECIPE._replace(steps=100, start_len=4, train_len=40, ramp=0.5, batch=3)
    assert [curriculum_length(s, sizes) for s in (0, 25, 50, 99)] == [4, 22, 40, 40]
    b = _batches([(False, 0), (True, 0)], 25, sizes)
    # Flat: every position 1..40 labelled; curriculum: positions 1..22 only, same tokens shape.
    assert b["mask"].shape == (2, 3, 41)
    np.testing.assert_array_equal(b["mask"][0].sum(-1), np.full(3, 40.0))
    np.testing.assert_array_equal(b["mask"][1].sum(-1), np.full(3, 22.0))
    assert b["mask"][1][:, 23:].sum() == 0.0 and b["mask"][1][:, 1:23].min() == 1.0
    with pytest.raises(ValueError, match="ramp=0.0"):
        curriculum_length(0, sizes._replace(ramp=0.0))


def test_masked_xent_and_accuracy_match_python_loops(rng):
    from jaxpapers.lrnn import masked_accuracy, masked_xent

    logits = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)  # [S, B, T, C]
    labels = rng.integers(5, size=(2, 3, 4))
    mask = (rng.random((2, 3, 4)) < 0.6).astype(np.float32)
    mask[1] = 0.0  # an empty mask: accuracy NaN, loss 0
    mask[0, 0, 0] = 1.0
    xent, acc = np.asarray(masked_xent(logits, labels, mask)), masked_accuracy(logits, labels, mask)
    sel = [(b, t) for b in range(3) for t in range(4) if mask[0, b, t]]
    z = logits[0].astype(np.float64)
    ref_xent = np.mean([math.log(np.exp(z[b, t]).sum()) - z[b, t, labels[0, b, t]] for b, t in sel])
    ref_acc = np.mean([int(np.argmax(logits[0, b, t]) == labels[0, b, t]) for b, t in sel])
    np.testing.assert_allclose(xent, [ref_xent, 0.0], rtol=1e-5, atol=1e-6)  # float32 log-sum-exp
    assert acc[0] == ref_acc and math.isnan(acc[1])
    with pytest.raises(ValueError, match=r"labels \(2, 3\)"):
        masked_accuracy(logits, labels[:, :, 0], mask)


def test_tracking_replicas_keep_their_index_and_batches_when_tasks_are_left_out():
    """Quick mode trains a subset of the tasks; a task's models (seed 1000 * index + seed) and
    batches (rng [seed, index, step]) must not depend on which other tasks are stacked with it."""
    from jaxpapers.lrnn.experiments import SIZES
    from jaxpapers.lrnn.experiments._tracking import _replicas, _train_batches

    every = _replicas([0, 1])
    assert every == [(i, t, s) for i, (t, s) in enumerate(itertools.product(TASKS, [0, 1]))]
    some = _replicas([0, 1], ("parity", "s5"))
    s5 = 2 * TASKS.index("s5")
    assert some == [(0, "parity", 0), (1, "parity", 1), (s5, "s5", 0), (s5 + 1, "s5", 1)]
    sizes = SIZES["smoke"].tracking
    full, sub = _train_batches(every, 3, sizes), _train_batches(some, 3, sizes)
    for k in ("tokens", "labels", "mask"):
        np.testing.assert_array_equal(sub[k][:2], full[k][:2])
        np.testing.assert_array_equal(sub[k][2:], full[k][s5 : s5 + 2])
