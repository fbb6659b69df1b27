"""P12 RO-PMB: memory bank EMA, PRDC equivariance and objective, one-hot sanity, seeds, metrics,
tuning and segmenter of the pipeline, bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import tolerance

from jaxpapers.core.segmentation_metrics import (
    boundary_f1,
    confusion_matrix,
    label_boundary,
    mean_iou,
)
from jaxpapers.ropmb import (
    METHODS,
    PRDC,
    MemoryBank,
    RefineConfig,
    class_activation_maps,
    colour_affinity,
    label_evidence,
    labels_from_sets,
    masked_average_pool,
    prdc_loss,
    pseudo_masks,
    refined_scores,
    seed_masks,
)
from jaxpapers.ropmb._multilabel import check_groups, cooccurring_classes


def _one_hot_scene(key, b=3, size=8, classes=4):
    """Random region masks with every image labelled by the classes it shows; features one-hot
    per region (feature 0 = background, feature c + 1 = class c)."""
    coarse = jax.random.randint(key, (b, size // 2, size // 2), 0, classes + 1)
    masks = jnp.repeat(jnp.repeat(coarse, 2, axis=1), 2, axis=2)
    labels = jnp.stack([jnp.any(masks == c + 1, axis=(1, 2)) for c in range(classes)], -1)
    feats = jax.nn.one_hot(masks, classes + 1)
    return feats, labels.astype(jnp.float32), masks


def test_ema_error_decays_as_m_power_t_on_stationary_input(key):
    k1, k2 = jax.random.split(key)
    feats = jax.nn.relu(jax.random.normal(k1, (2, 4, 4, 5)))
    seeds = jax.nn.one_hot(jax.random.randint(k2, (2, 4, 4), 0, 3), 3)
    m = 0.8
    bank = MemoryBank(num_classes=2, k=1, momentum=m, init_iterations=0)
    state = jax.jit(bank.init)(feats, seeds, key=key)
    # K = 1: the class mean over the batch is the masked average pooled over both images.
    w = np.asarray(seeds, np.float64).reshape(-1, 3)
    f = np.asarray(feats, np.float64).reshape(-1, 5)
    p_star = (w.T @ f) / w.sum(0)[:, None]
    err0 = np.linalg.norm(np.asarray(state.prototypes[:, 0], np.float64) - p_star, axis=-1)
    update = jax.jit(bank.update)
    errs = []
    for _ in range(6):
        state = update(state, feats, seeds)
        errs.append(
            np.linalg.norm(np.asarray(state.prototypes[:, 0], np.float64) - p_star, axis=-1)
        )
    expected = err0[None] * m ** np.arange(1, 7)[:, None]
    np.testing.assert_allclose(np.stack(errs), expected, rtol=1e-4, atol=1e-6)
    assert int(state.steps) == 6 and bool(state.filled.all())


def test_bank_update_moves_only_the_slots_that_receive_pixels(key):
    # Two classes of one slot each; the update batch seeds class 1 only: its prototype moves by
    # the EMA, the background's stays (it receives no pixel).
    bank = MemoryBank(num_classes=1, k=1, momentum=0.25, init_iterations=0)
    feats = jnp.concatenate([jnp.ones((1, 2, 2, 1)), jnp.zeros((1, 2, 2, 1))], axis=1)
    seeds = jnp.stack([jnp.ones((1, 4, 2)), jnp.zeros((1, 4, 2))], -1)
    seeds = seeds.at[0, 2:, :, 0].set(0.0).at[0, 2:, :, 1].set(1.0)
    state = bank.init(feats, seeds, key=key)  # background prototype 1, class prototype 0
    only_class = jnp.stack([jnp.zeros((1, 4, 2)), jnp.ones((1, 4, 2))], -1)
    new = bank.update(state, jnp.full((1, 4, 2, 1), 4.0), only_class)
    np.testing.assert_allclose(new.prototypes[:, 0, 0], [1.0, 0.25 * 0.0 + 0.75 * 4.0])


def test_bank_k_prototypes_find_two_modes(key):
    # One class whose seed pixels come from two feature modes: with K = 2 the prototypes
    # converge to the two mode means (Lloyd steps); with K = 1 to their average.
    a, b = jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 1.0, 0.0])
    pix = jnp.where((jnp.arange(16) % 2 == 0)[:, None], a, b).reshape(1, 4, 4, 3)
    seeds = jnp.stack([jnp.zeros((1, 4, 4)), jnp.ones((1, 4, 4))], -1)

    def init_both(pix, seeds, key):
        return MemoryBank(1, 2).init(pix, seeds, key=key), MemoryBank(1, 1).init(
            pix, seeds, key=key
        )

    st2, st1 = jax.jit(init_both)(pix, seeds, key)
    got = np.sort(np.asarray(st2.prototypes[1]), axis=0)
    np.testing.assert_allclose(got, np.sort(np.stack([a, b]), axis=0), atol=1e-6)
    np.testing.assert_allclose(st1.prototypes[1, 0], (a + b) / 2, atol=1e-6)
    assert not bool(st1.filled[0, 0])  # no background seed: slot stays empty


def test_message_passing_is_permutation_equivariant(key):
    k1, k2, k3 = jax.random.split(key, 3)
    nodes = jax.random.normal(k1, (12, 6))
    valid = jnp.arange(12) != 5
    prdc = PRDC(6, key=k2, proj=4, hidden=8, layers=2, out_scale=1.0)
    perm = jax.random.permutation(k3, 12)

    def both(prdc, nodes, valid, perm):
        return prdc(nodes, valid), prdc(nodes[perm], valid[perm]), prdc.adjacency(nodes, valid)

    out, out_p, e = jax.jit(both)(prdc, nodes, valid, perm)
    np.testing.assert_allclose(out_p, out[perm], **tolerance(np.float32, 10.0))
    np.testing.assert_allclose(e.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(e[:, 5], 0.0)
    # Enrichment is not the identity: messages change the prototypes.
    assert float(jnp.abs(out - nodes / jnp.linalg.norm(nodes, axis=-1, keepdims=True)).max()) > 1e-2


def test_prdc_matches_numpy_float64_reference(key, x64):
    k1, k2 = jax.random.split(key)
    nodes = jax.random.normal(k1, (5, 4), jnp.float64)
    valid = jnp.array([True, True, False, True, True])
    prdc = PRDC(4, key=k2, proj=3, hidden=6, layers=2, out_scale=1.0)
    x = np.asarray(nodes)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    wq, wk, u, v = (np.asarray(a, np.float64) for a in (prdc.w_q, prdc.w_k, prdc.u, prdc.v))
    logits = (x @ wq) @ (x @ wk).T / np.sqrt(3)
    logits[:, ~np.asarray(valid)] = -np.inf
    e = np.exp(logits - logits.max(1, keepdims=True))
    e /= e.sum(1, keepdims=True)
    h = x
    for layer in range(2):
        h = h + np.maximum(e @ h @ u[layer], 0) @ v[layer]
    got = jax.jit(PRDC.__call__)(prdc, nodes, valid)
    np.testing.assert_allclose(got, h, rtol=1e-10, atol=1e-12)


def test_one_hot_features_recover_the_mask_exactly(key):
    feats, labels, masks = _one_hot_scene(key)
    classes = labels.shape[1]
    weights = jnp.eye(classes + 1)[:, 1:]
    config = RefineConfig()
    bank = MemoryBank(classes, 2)

    def all_methods(feats, labels, key):
        cams = class_activation_maps(feats, weights, labels)
        state = bank.init(feats, seed_masks(cams, labels, config=config), key=key)
        prdc = PRDC(classes + 1, key=key)
        return [
            pseudo_masks(
                refined_scores(m, feats, weights, labels, config=config, bank=state, prdc=prdc),
                labels,
                feats.shape[1],
            )
            for m in METHODS
        ]

    preds = jax.jit(all_methods)(feats, labels, key)
    for method, pred in zip(METHODS, preds, strict=True):
        np.testing.assert_array_equal(pred, masks, err_msg=method)


def test_cams_and_seeds_against_numpy(rng):
    feats = np.maximum(rng.normal(size=(2, 3, 3, 4)), 0).astype(np.float32)
    w = rng.normal(size=(4, 3)).astype(np.float32)
    labels = np.array([[1, 0, 1], [0, 1, 0]], np.float32)
    cams = np.asarray(class_activation_maps(jnp.asarray(feats), jnp.asarray(w), labels))
    ref = np.maximum(np.einsum("bhwd,dc->bhwc", feats, w), 0)
    ref = ref / np.maximum(ref.max(axis=(1, 2), keepdims=True), 1e-6) * labels[:, None, None]
    np.testing.assert_allclose(cams, ref, **tolerance(np.float32))
    config = RefineConfig(fg_threshold=0.5, bg_threshold=0.2)
    seeds = np.asarray(seed_masks(jnp.asarray(cams), labels, config=config))
    for b, i, j in np.ndindex(2, 3, 3):
        present = np.flatnonzero(labels[b])
        top = cams[b, i, j, present].max()
        want = np.zeros(4)
        if top >= 0.5:
            want[1 + present[np.argmax(cams[b, i, j, present])]] = 1
        if top < 0.2:
            want[0] = 1
        np.testing.assert_array_equal(seeds[b, i, j], want)


def test_masked_average_pool_matches_loop(rng):
    feats = rng.normal(size=(2, 3, 3, 4)).astype(np.float32)
    w = rng.uniform(size=(2, 3, 3, 2)).astype(np.float32)
    w[1, ..., 1] = 0
    out = masked_average_pool(jnp.asarray(feats), jnp.asarray(w))
    for b, n in np.ndindex(2, 2):
        mass = w[b, ..., n].sum()
        want = (w[b, ..., n, None] * feats[b]).sum((0, 1)) / mass if mass else np.zeros(4)
        np.testing.assert_allclose(out.prototypes[b, n], want, **tolerance(np.float32, 10))
        np.testing.assert_allclose(out.mass[b, n], mass, rtol=1e-6)


def _boundary_f1_loop(pred, target, tol):
    def boundary(lab):
        h, w = lab.shape
        out = np.zeros(lab.shape, bool)
        for i, j in np.ndindex(h, w):
            for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                ii, jj = i + di, j + dj
                if 0 <= ii < h and 0 <= jj < w and lab[ii, jj] != lab[i, j]:
                    out[i, j] = True
        return out

    def hits(a, b):
        return sum(
            b[max(i - tol, 0) : i + tol + 1, max(j - tol, 0) : j + tol + 1].any()
            for i, j in zip(*np.nonzero(a), strict=True)
        )

    bp = np.stack([boundary(p) for p in pred])
    bt = np.stack([boundary(t) for t in target])
    hp = sum(hits(a, b) for a, b in zip(bp, bt, strict=True))
    ht = sum(hits(b, a) for a, b in zip(bp, bt, strict=True))
    p, r = hp / bp.sum(), ht / bt.sum()
    return 2 * p * r / (p + r)


def test_segmentation_metrics_against_loops(rng):
    target = rng.integers(0, 3, size=(2, 6, 6))
    pred = np.where(rng.uniform(size=target.shape) < 0.3, rng.integers(0, 3, target.shape), target)
    conf = np.zeros((3, 3))
    for t, p in zip(target.ravel(), pred.ravel(), strict=True):
        conf[t, p] += 1
    np.testing.assert_array_equal(confusion_matrix(jnp.asarray(pred), jnp.asarray(target), 3), conf)
    iou = np.diag(conf) / (conf.sum(0) + conf.sum(1) - np.diag(conf))
    np.testing.assert_allclose(
        mean_iou(jnp.asarray(pred), jnp.asarray(target), 3), iou.mean(), 1e-6
    )
    for tol in (0, 1):
        np.testing.assert_allclose(
            boundary_f1(jnp.asarray(pred), jnp.asarray(target), tol),
            _boundary_f1_loop(pred, target, tol),
            rtol=1e-6,
        )
    assert not bool(label_boundary(jnp.zeros((4, 4), jnp.int32)).any())


def test_cooccurring_classes_follow_the_groups(key):
    groups = ((0, 1, 2, 3), (2, 3, 4, 5))
    cls = np.asarray(cooccurring_classes(groups, 64, 3, key=key))
    assert cls.shape == (64, 3)
    for row in cls:
        assert len(set(row)) == 3
        assert set(row) <= set(groups[0]) or set(row) <= set(groups[1])


def test_bad_input_raises_value_errors_naming_the_argument():
    with pytest.raises(ValueError, match="label_sets"):
        labels_from_sets([[0, 1], [2, 7]], 4)
    with pytest.raises(ValueError, match="k="):
        MemoryBank(num_classes=3, k=0)
    with pytest.raises(ValueError, match="labels"):
        class_activation_maps(jnp.ones((1, 2, 2, 3)), jnp.ones((3, 4)), jnp.ones((1, 5)))
    with pytest.raises(ValueError, match="groups"):
        check_groups(((0, 1), (2, 9)), 6, 2)
    with pytest.raises(ValueError, match="alpha"):
        RefineConfig(alpha=1.5)
    with pytest.raises(ValueError, match="method"):
        refined_scores(
            "gnn",
            jnp.ones((1, 2, 2, 3)),
            jnp.ones((3, 2)),
            jnp.ones((1, 2)),
            config=RefineConfig(),
        )
    np.testing.assert_array_equal(labels_from_sets([[1], [0, 2]], 3), [[0, 1, 0], [1, 0, 1]])


def _affinity_loop(images, size, sigma):
    b, hh, _, ch = images.shape
    f = hh // size
    small = images.reshape(b, size, f, size, f, ch).mean(axis=(2, 4))
    out = np.zeros((b, size, size, 2))
    for n, i, j in np.ndindex(b, size, size):
        if j + 1 < size:
            out[n, i, j, 0] = np.exp(
                -((small[n, i, j] - small[n, i, j + 1]) ** 2).sum() / 2 / sigma**2
            )
        if i + 1 < size:
            out[n, i, j, 1] = np.exp(
                -((small[n, i, j] - small[n, i + 1, j]) ** 2).sum() / 2 / sigma**2
            )
    return out


def test_colour_affinity_and_label_evidence_against_loops(rng):
    images = rng.uniform(size=(2, 8, 8, 3)).astype(np.float32)
    got = colour_affinity(jnp.asarray(images), 4, sigma=0.3)
    np.testing.assert_allclose(got, _affinity_loop(images, 4, 0.3), **tolerance(np.float32, 10))
    probs = rng.uniform(size=(2, 3, 3, 4)).astype(np.float32)
    want = np.sort(probs.reshape(2, 9, 4), axis=1)[:, -2:].mean(1)
    np.testing.assert_allclose(label_evidence(jnp.asarray(probs), 2), want, rtol=1e-6)


def _prdc_objective_case(key, noise=0.0):
    _, _, masks = _one_hot_scene(key, b=4, size=8, classes=3)
    masks = masks.at[:2].set(jnp.where(masks[:2] == 1, 0, masks[:2]))  # class 0 absent in two
    labels = jnp.stack([jnp.any(masks == c + 1, axis=(1, 2)) for c in range(3)], -1) * 1.0
    feats = jax.nn.one_hot(masks, 4)
    feats = jax.nn.relu(feats + noise * jax.random.normal(key, feats.shape))
    weights = jnp.eye(4)[:, 1:]
    seeds = seed_masks(class_activation_maps(feats, weights, labels), labels, config=RefineConfig())
    bank = MemoryBank(3, 1).init(feats, seeds, key=key)
    return feats, labels, masks, weights, bank


def test_prdc_objective_is_not_tied_to_the_seeds(key):
    """With the refined prototypes made of the global part alone (alpha = 1) the seeds enter
    nowhere: the objective is the same for any seed thresholds (a loss on the seed pixels, as the
    graph's first objective was, changes with them), and it is lower for the exact prototypes
    than for a graph that swaps two classes (labels and colour decide, not the seeds)."""
    feats, labels, _, weights, bank = _prdc_objective_case(key, noise=0.3)
    affinity = colour_affinity(feats, feats.shape[1])
    prdc = PRDC(4, key=key, out_scale=0.0)  # zero messages: enrichment = normalisation
    # The two threshold settings below seed different pixels.
    cams = class_activation_maps(feats, weights, labels)
    loose = seed_masks(cams, labels, config=RefineConfig(fg_threshold=0.5, bg_threshold=0.2))
    tight = seed_masks(cams, labels, config=RefineConfig(fg_threshold=0.95, bg_threshold=0.01))
    assert float(jnp.abs(loose - tight).sum()) > 10

    def loss(config, bank=bank):
        return float(
            prdc_loss(prdc, bank, feats, weights, labels, config=config, affinity=affinity)
        )

    a = loss(RefineConfig(alpha=1.0, fg_threshold=0.5, bg_threshold=0.2))
    b = loss(RefineConfig(alpha=1.0, fg_threshold=0.95, bg_threshold=0.01))
    assert a == pytest.approx(b, rel=1e-6)
    swapped = bank._replace(prototypes=bank.prototypes[jnp.array([0, 2, 1, 3])])
    assert loss(RefineConfig(alpha=1.0), swapped) > a + 0.1
    # The label term: telling the objective that a shown class is absent raises it.
    wrong = labels.at[:, 0].set(1.0 - labels[:, 0])
    got = prdc_loss(prdc, bank, feats, weights, wrong, config=RefineConfig(alpha=1.0))
    assert float(got) > a


def test_prdc_objective_affinity_term_penalises_label_changes_inside_a_colour_region(key):
    feats, labels, _, weights, bank = _prdc_objective_case(key)
    prdc = PRDC(4, key=key, out_scale=0.0)
    config = RefineConfig(alpha=1.0)
    plain = prdc_loss(prdc, bank, feats, weights, labels, config=config)
    # Uniform colour everywhere: every region boundary is inside one colour region.
    flat = jnp.ones((*feats.shape[:3], 2))
    smooth = prdc_loss(prdc, bank, feats, weights, labels, config=config, affinity=flat)
    edges = colour_affinity(feats, feats.shape[1])  # the regions are the colours: ~no penalty
    aligned = prdc_loss(prdc, bank, feats, weights, labels, config=config, affinity=edges)
    assert float(smooth) > float(aligned) + 1e-3
    assert float(aligned) == pytest.approx(float(plain), abs=1e-4)


def test_tuning_picks_each_methods_best_validation_offset():
    """The pipeline tunes every row's setting and background offset on the validation split
    (the chosen pair is the arg-max of that row's validation mIoU over its grid; the bank's
    alpha grid and RO-PMB's PRDC grid have the same size) and trains one segmenter per method
    on its pseudo-masks."""
    import dataclasses

    from jaxpapers.ropmb.experiments import SIZES
    from jaxpapers.ropmb.experiments._pipeline import INIT, OFFSETS
    from jaxpapers.ropmb.experiments._runs import pipeline

    cfg = dataclasses.replace(SIZES["smoke"], train_n=32, val_n=16, test_n=16)
    res = pipeline([0, 1], cfg, RefineConfig())
    sizes = {"bank": len(cfg.bank_alphas), "ropmb": 2 * len(cfg.prdc_smooth_weights)}
    assert sizes["bank"] == sizes["ropmb"]
    for m in (*METHODS, INIT):
        for s in range(2):
            grid = np.asarray(res.val_miou[m][s])
            assert grid.shape == (sizes.get(m, 1), len(OFFSETS))
            best = int(np.argmax(grid))
            assert res.offsets[m][s] == pytest.approx(OFFSETS[best % len(OFFSETS)])
            assert res.setting[m][s] == best // len(OFFSETS)
    assert set(res.segmenter_miou) == set(METHODS)
    assert all(0.0 <= v <= 1.0 for row in res.segmenter_miou.values() for v in row)
    # Boundary F1 is judged at tolerance 0, never above its tolerance-1 value.
    for m in (*METHODS, INIT):
        assert all(a <= b + 1e-6 for a, b in zip(res.bf1[m], res.bf1_t1[m], strict=True))
    assert all(0.0 <= v <= 1.0 for v in res.ceiling_val_miou + res.cam_val_miou)


def test_true_seeds_are_the_majority_class_of_each_cell():
    """The prototype ceiling's seeds: a hard one-hot of the true mask at feature resolution."""
    from jaxpapers.ropmb.experiments._pipeline import true_seeds

    coarse = jnp.array([[[0, 1], [2, 0]]])
    masks = jnp.repeat(jnp.repeat(coarse, 4, axis=1), 4, axis=2)  # [1, 8, 8]
    seeds = true_seeds(masks, 3, 4)
    assert seeds.shape == (1, 4, 4, 3)
    assert jnp.all(jnp.sum(seeds, -1) == 1)
    expect = jnp.repeat(jnp.repeat(coarse, 2, axis=1), 2, axis=2)
    assert jnp.array_equal(jnp.argmax(seeds, -1), expect)


def test_segmenter_learns_the_true_masks(key):
    """The segmenter every method's pseudo-masks train: trained on the true masks it segments
    held-out scenes far above chance (so differences between pseudo-masks can show)."""
    from jaxpapers.ropmb.experiments._data import make_splits
    from jaxpapers.ropmb.experiments._pipeline import segmenter_stage

    keys = jax.random.split(key, 2)
    train, test = make_splits(128, keys[:1]), make_splits(64, keys[1:])
    miou = segmenter_stage(
        train.images,
        train.masks[:, None],
        test.images,
        test.masks,
        keys[:1],
        classes=7,
        steps=150,
        batch=16,
        width=16,
    )
    assert miou.shape == (1, 1)
    assert float(miou[0, 0]) > 0.4, miou
