"""Tests of jaxpapers.steam: DASH folding, routing, SCOA, the VIS model's matching and metrics."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import tolerance

from jaxpapers.core.data.scenes import SceneConfig
from jaxpapers.core.segmentation_metrics import confusion_matrix
from jaxpapers.steam import (
    ScaleShift,
    VISConfig,
    assignments,
    associate,
    check_video,
    dash_init,
    decode,
    encode,
    fold_scale_shift,
    forgetting,
    identity_projectors,
    identity_switches,
    init_adapters,
    init_experts,
    init_vis,
    input_subspace,
    make_videos,
    matching_loss,
    mixture_adapter,
    orthogonal_projector,
    route,
    scale_shift,
)
from jaxpapers.steam.experiments._protocol import _task_miou

# ---------------------------------------------------------------------------------------------
# DASH
# ---------------------------------------------------------------------------------------------


def test_fold_scale_shift_matches_float64_reference(key):
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    kernel = jax.random.normal(k1, (6, 5))
    bias = jax.random.normal(k2, (5,))
    ss = ScaleShift(jax.random.uniform(k3, (5,), minval=0.5, maxval=2), jax.random.normal(k4, (5,)))
    h = jax.random.normal(k5, (7, 6))
    kf, bf = fold_scale_shift(kernel, bias, ss)
    ref = (np.asarray(h, np.float64) @ np.asarray(kernel, np.float64) + np.asarray(bias)) * (
        np.asarray(ss.gamma)
    ) + np.asarray(ss.beta)
    np.testing.assert_allclose(h @ kf + bf[None], ref, **tolerance(jnp.float32, 10))
    np.testing.assert_allclose(
        scale_shift(h @ kernel + bias[None], ss), ref, **tolerance(jnp.float32, 10)
    )


def test_folded_neck_gives_identical_features(key):
    cfg = VISConfig(size=8, width=4, dim=4, queries=2, max_objects=1, experts=1, rank=1)
    graphdef, params = init_vis(config=cfg, key=key)
    video = jax.random.uniform(jax.random.fold_in(key, 1), (2, 8, 8, 3))
    ss = ScaleShift(jnp.array([0.5, 2.0, 1.0, 3.0]), jnp.array([1.0, -1.0, 0.0, 0.2]))
    applied = scale_shift(encode(graphdef, params, video), ss)
    kernel, bias = fold_scale_shift(params["neck"]["kernel"], params["neck"]["bias"], ss)
    folded = encode(graphdef, {**params, "neck": {"kernel": kernel, "bias": bias}}, video)
    np.testing.assert_allclose(folded, applied, **tolerance(jnp.float32, 10))


def test_dash_init_maps_moments_onto_reference(key):
    x = 3.0 + 2.0 * jax.random.normal(key, (400, 3))
    ref_mean, ref_std = jnp.array([0.0, 1.0, -1.0]), jnp.array([1.0, 0.5, 2.0])
    y = scale_shift(x, dash_init(x, ref_mean, ref_std, eps=1e-8))
    np.testing.assert_allclose(y.mean(0), ref_mean, atol=1e-4)
    np.testing.assert_allclose(y.std(0), ref_std, rtol=1e-4)


# ---------------------------------------------------------------------------------------------
# TASTE routing and experts
# ---------------------------------------------------------------------------------------------


def test_router_weights_sum_to_one_and_follow_distances(key):
    summary = jax.random.normal(key, (5, 4))
    keys = jax.random.normal(jax.random.fold_in(key, 1), (3, 4))
    w = route(summary, keys, temperature=0.3)
    np.testing.assert_allclose(w.sum(-1), np.ones(5), rtol=1e-6)
    s = np.asarray(summary, np.float64)
    k = np.asarray(keys, np.float64)
    scale = np.mean([np.sum((k[i] - k[j]) ** 2) for i in range(3) for j in range(3) if i != j])
    logits = -np.array([[np.sum((a - b) ** 2) for b in k] for a in s]) / (0.3 * scale)
    ref = np.exp(logits - logits.max(1, keepdims=True))
    np.testing.assert_allclose(w, ref / ref.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    masked = route(summary, keys, temperature=0.3, active=jnp.array([1.0, 1.0, 0.0]))
    np.testing.assert_allclose(masked[:, 2], 0.0)
    np.testing.assert_allclose(masked.sum(-1), np.ones(5), rtol=1e-6)
    # An input at a key is routed to that key's expert.
    at_key = route(keys, keys, temperature=0.05)
    np.testing.assert_allclose(np.diag(at_key), 1.0, atol=1e-3)


def test_mixture_adapter_matches_loop(key):
    experts = init_experts(3, 4, 2, key=key)
    experts = experts._replace(up=jax.random.normal(jax.random.fold_in(key, 1), (3, 2, 4)))
    x = jax.random.normal(jax.random.fold_in(key, 2), (2, 5, 4))
    w = jax.nn.softmax(jax.random.normal(jax.random.fold_in(key, 3), (2, 3)))
    proj = jax.random.normal(jax.random.fold_in(key, 4), (3, 4, 4))
    out = mixture_adapter(x, w, experts, proj)
    ref = np.zeros((2, 5, 4))
    for b, e in itertools.product(range(2), range(3)):
        ref[b] += float(w[b, e]) * np.asarray(x[b] @ proj[e] @ experts.down[e] @ experts.up[e])
    np.testing.assert_allclose(out, ref, **tolerance(jnp.float32, 10))


# ---------------------------------------------------------------------------------------------
# SCOA
# ---------------------------------------------------------------------------------------------


def test_input_subspace_matches_numpy_svd(key):
    basis = jnp.linalg.qr(jax.random.normal(key, (6, 2)))[0]
    x = jax.random.normal(jax.random.fold_in(key, 1), (50, 2)) @ basis.T
    u = input_subspace(x, energy=0.999)
    assert int(jnp.sum(jnp.linalg.norm(u, axis=0) > 0.5)) == 2
    np.testing.assert_allclose(u @ u.T, basis @ basis.T, atol=1e-5)
    p = orthogonal_projector(u)
    np.testing.assert_allclose(p @ p, p, atol=1e-5)


def test_scoa_update_leaves_earlier_subspace_outputs_unchanged(key):
    """Train a new expert behind the SCOA projector on new-task data: the mixture's output on
    inputs from the earlier task's subspace does not move; without the projector it does."""
    d, r = 6, 2
    k_old, k_new, k_e = jax.random.split(key, 3)
    old_basis = jnp.linalg.qr(jax.random.normal(k_old, (d, 3)))[0]
    old = jax.random.normal(jax.random.fold_in(k_old, 1), (64, 3)) @ old_basis.T
    new = jax.random.normal(k_new, (64, d))
    target = jax.random.normal(jax.random.fold_in(k_new, 1), (64, d))
    experts = init_experts(2, d, r, key=k_e)
    experts = experts._replace(up=experts.up.at[0].set(jax.random.normal(k_e, (r, d))))
    weights = jnp.array([0.5, 0.5])
    scoa = jnp.stack([jnp.eye(d), orthogonal_projector(input_subspace(old, energy=0.9999))])

    @jax.jit
    def train(projectors):
        def loss(up):
            e = experts._replace(up=experts.up.at[1].set(up))
            return jnp.mean((mixture_adapter(new, weights, e, projectors) - target) ** 2)

        opt = optax.adam(0.05)

        def step(carry, _):
            up, state = carry
            u, state = opt.update(jax.grad(loss)(up), state)
            return (optax.apply_updates(up, u), state), None

        up = experts.up[1]
        (up, _), _ = jax.lax.scan(step, (up, opt.init(up)), None, length=30)
        return experts._replace(up=experts.up.at[1].set(up))

    before = mixture_adapter(old, weights, experts, scoa)
    after = mixture_adapter(old, weights, train(scoa), scoa)
    np.testing.assert_allclose(after, before, atol=1e-5)
    free = jnp.stack([jnp.eye(d)] * 2)
    moved = mixture_adapter(old, weights, train(free), free) - mixture_adapter(
        old, weights, experts, free
    )
    assert float(jnp.max(jnp.abs(moved))) > 1e-2


# ---------------------------------------------------------------------------------------------
# VIS model: matching loss, association, metrics
# ---------------------------------------------------------------------------------------------


def _bce(m, y):
    return np.mean(np.maximum(m, 0) - m * y + np.log1p(np.exp(-np.abs(m))))


def test_matching_loss_equals_brute_force_minimum(key):
    q, c, h = 3, 2, 4
    logits = jax.random.normal(key, (q, c + 1))
    masks = jax.random.normal(jax.random.fold_in(key, 1), (q, h, h))
    inst = jnp.zeros((h, h), jnp.int32).at[:2, :2].set(1).at[2:, 1:].set(2)
    cls = jnp.where(inst == 1, 2, jnp.where(inst == 2, 1, 0))  # slot 0 class 1, slot 1 class 0
    allowed = jnp.ones(c)
    got = matching_loss(logits, masks, inst, cls, allowed, jnp.asarray(assignments(q, 2)))
    lp = np.asarray(jax.nn.log_softmax(logits, -1), np.float64)
    m = np.asarray(masks, np.float64).reshape(q, -1)
    gts = [(np.asarray(inst) == k + 1).reshape(-1).astype(float) for k in range(2)]
    classes = [1, 0]
    best = np.inf
    for perm in itertools.permutations(range(q), 2):
        total = 0.0
        for k, qi in enumerate(perm):
            p = 1 / (1 + np.exp(-m[qi]))
            dice = 1 - (2 * p @ gts[k] + 1) / (p.sum() + gts[k].sum() + 1)
            total += -lp[qi, classes[k]] + _bce(m[qi], gts[k]) + dice
        total += sum(-0.5 * lp[qi, -1] for qi in range(q) if qi not in perm)
        best = min(best, total)
    np.testing.assert_allclose(got, best, rtol=1e-5)


def test_associate_recovers_permuted_queries(key):
    base = jax.random.normal(key, (4, 8))
    perms = [np.arange(4), np.array([2, 0, 3, 1]), np.array([1, 3, 0, 2])]
    frames = jnp.stack([base[p] for p in perms]) + 0.01 * jax.random.normal(key, (3, 4, 8))
    order = associate(frames)
    for t, p in enumerate(perms):
        # order[t, track] is the query of frame t showing the object of track `track`.
        np.testing.assert_array_equal(np.asarray(p)[np.asarray(order[t])], np.arange(4))


def test_identity_switches_counts_a_constructed_switch():
    inst = np.zeros((3, 4, 4), np.int32)
    inst[:, :2, :2] = 1
    inst[:, 2:, 2:] = 2
    tracks = np.full((3, 4, 4), -1)
    tracks[:, :2, :2] = 0
    tracks[:2, 2:, 2:] = 1
    tracks[2, 2:, 2:] = 2  # object 2 changes track in the last frame
    got = identity_switches(jnp.asarray(tracks), jnp.asarray(inst), 2, 3)
    assert float(got.switches) == 1.0 and float(got.pairs) == 4.0


def test_task_miou_and_forgetting_match_hand_values():
    """A task's mIoU averages the IoU of its own labels (here 0 and 2) from the core confusion
    matrix: label 0 has 1 hit of 2, label 2 has 2 of 3; label 1 is not the task's."""
    pred = jnp.array([[0, 1, 1, 2, 2, 0]])
    target = jnp.array([[0, 1, 2, 2, 2, 1]])
    confusion = confusion_matrix(pred, target, 3)
    np.testing.assert_allclose(
        _task_miou(confusion, jnp.array([0, 2])), (0.5 + 2 / 3) / 2, rtol=1e-6
    )
    # A label absent from truth and prediction counts 0 (as the protocol has always scored it).
    np.testing.assert_allclose(
        _task_miou(confusion_matrix(pred, target, 4), jnp.array([0, 3])), 0.25, rtol=1e-6
    )
    acc = np.array([[0.9, 0.0, 0.0], [0.7, 0.8, 0.0], [0.6, 0.5, 0.9]])
    assert forgetting(acc) == pytest.approx(((0.9 - 0.6) + (0.8 - 0.5)) / 2)


def test_identity_adapters_give_base_model_and_jit_vmap(key):
    cfg = VISConfig(size=8, width=4, dim=4, queries=2, max_objects=1, experts=2, rank=1)
    graphdef, params = init_vis(config=cfg, key=key)
    adapters = init_adapters(config=cfg, key=key)
    videos = jax.random.uniform(jax.random.fold_in(key, 2), (2, 3, 8, 8, 3))

    @jax.jit
    def run(a, v):
        feats = encode(graphdef, params, v)
        proj = identity_projectors(config=cfg)
        return decode(params, a, proj, feats, config=cfg, active=jnp.ones(2))

    out = jax.vmap(run, in_axes=(None, 0))(adapters, videos)
    assert out.class_logits.shape == (2, 3, 2, 5) and out.mask_logits.shape == (2, 3, 2, 8, 8)
    np.testing.assert_allclose(out.video_weights.sum(-1), 1.0, rtol=1e-6)
    # Zero prompts and zero experts: shifting the routing keys changes nothing.
    moved = jax.vmap(run, in_axes=(None, 0))(adapters._replace(keys=adapters.keys + 1.0), videos)
    np.testing.assert_allclose(moved.class_logits, out.class_logits, **tolerance(jnp.float32, 10))


# ---------------------------------------------------------------------------------------------
# Data and bad input
# ---------------------------------------------------------------------------------------------


def test_make_videos_respects_pool_and_keeps_identities(key):
    cfg = SceneConfig(size=16, num_objects=2, num_classes=4, min_radius=2.5, max_radius=4.0)
    v = make_videos(2, 2, config=cfg, key=key, pool=jnp.array([2, 3]), background=1)
    assert v.image.shape == (2, 2, 16, 16, 3)
    assert set(np.unique(np.asarray(v.classes))) <= {0, 3, 4}
    # Each instance id keeps one class in every frame.
    for n in range(2):
        for k in (1, 2):
            cls = np.unique(np.asarray(v.classes[n])[np.asarray(v.instances[n]) == k])
            assert cls.size <= 1


def test_bad_input_raises_naming_the_argument():
    with pytest.raises(ValueError, match="experts"):
        VISConfig(experts=0)
    with pytest.raises(ValueError, match="num_experts"):
        init_experts(0, 4, 2, key=jax.random.key(0))
    with pytest.raises(ValueError, match="video"):
        check_video("video", jnp.zeros((2, 8, 6, 3)), config=VISConfig(size=8))
    with pytest.raises(ValueError, match="keys"):
        route(jnp.ones(3), jnp.ones((0, 3)), temperature=1.0)
    with pytest.raises(ValueError, match="pool"):
        make_videos(2, 2, config=SceneConfig(size=16), key=jax.random.key(0), pool=jnp.array([7]))


# ---------------------------------------------------------------------------------------------
# Trainable subsets of the protocol's adapter training
# ---------------------------------------------------------------------------------------------


def test_set_to_zero_equals_adam_on_zero_gradients(key):
    """A part frozen with ``optax.set_to_zero`` ends bit for bit where Adam on a zero-multiplied
    gradient leaves it (zero moments give a zero update: its initial value), and the trained part
    agrees to float32 rounding (eager dispatch, op by op)."""
    k1, k2 = jax.random.split(key)
    params = {"a": jax.random.normal(k1, (5,)), "b": jax.random.normal(k2, (5,))}
    grads = [jax.tree.map(lambda x, i=i: jnp.sin(x * (i + 1.0)), params) for i in range(6)]
    masked, mt = (
        optax.adam(0.1),
        optax.multi_transform(
            {"train": optax.adam(0.1), "frozen": optax.set_to_zero()}, {"a": "train", "b": "frozen"}
        ),
    )
    p1, s1, p2, s2 = params, masked.init(params), params, mt.init(params)
    for g in grads:
        u, s1 = masked.update({"a": g["a"], "b": g["b"] * 0.0}, s1, p1)
        p1 = optax.apply_updates(p1, u)
        u, s2 = mt.update(g, s2, p2)
        p2 = optax.apply_updates(p2, u)
    np.testing.assert_array_equal(p1["b"], params["b"])
    np.testing.assert_array_equal(p2["b"], params["b"])
    np.testing.assert_allclose(p1["a"], p2["a"], rtol=1e-6)


def test_adapt_trains_only_the_new_row_of_the_methods_parts(key):
    """``adapt`` changes only task ``t``'s row of the parts its method names (and the classifier
    columns of the task's new classes); every other row, part and column keeps its value."""
    from jaxpapers.steam.experiments._protocol import Method, adapt

    cfg = VISConfig(size=8, width=4, dim=4, queries=2, max_objects=1, experts=3, rank=1)
    _, params = init_vis(config=cfg, key=key)
    k = jax.random.split(jax.random.fold_in(key, 1), 4)
    adapters = init_adapters(config=cfg, key=k[0])
    adapters = adapters._replace(prompts=jax.random.normal(k[1], adapters.prompts.shape))
    proj = identity_projectors(config=cfg)
    feats = jax.random.normal(k[2], (3, 2, cfg.grid, cfg.grid, cfg.dim))
    inst = jnp.zeros((3, 2, 8, 8), jnp.int32).at[:, :, 2:5, 2:5].set(1)
    cls = inst * 3  # class 2 (stored as 3) in task 2's videos
    earlier = jax.random.normal(k[3], (3, 1, 2, cfg.grid, cfg.grid, cfg.dim))
    one = lambda tree: jax.tree.map(lambda x: x[None], tree)
    method = Method(dash=True, frame=True)  # trains DASH and the frame experts, not the rest
    out = adapt(
        one(params),
        one(adapters),
        one(proj),
        feats[None],
        inst[None],
        cls[None],
        earlier[None],
        jnp.array([0.0, 0.0, 1.0, 1.0]),
        jnp.ones((3, 4)),
        jax.random.key(3)[None],
        cfg=cfg,
        method=method,
        t=1,
        new=(2, 3),
        steps=3,
        batch=2,
        lr=1e-2,
        energy=0.99,
    )
    new = jax.tree.map(lambda x: x[0], out.adapters)
    assert bool(out.finite[0])
    for part in (adapters.video, adapters.prompts):  # parts the method does not train
        got = new.video if part is adapters.video else new.prompts
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(part), strict=True):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(jax.tree.leaves(new.frame), jax.tree.leaves(adapters.frame), strict=True):
        np.testing.assert_array_equal(np.asarray(a)[[0, 2]], np.asarray(b)[[0, 2]])  # other rows
    assert not np.array_equal(new.frame.up[1], adapters.frame.up[1])  # row t trained
    for a, b in zip(jax.tree.leaves(new.dash), jax.tree.leaves(adapters.dash), strict=True):
        np.testing.assert_array_equal(np.asarray(a)[[0, 2]], np.asarray(b)[[0, 2]])
    kernel = out.params["cls"]["kernel"][0]
    np.testing.assert_array_equal(kernel[:, [0, 1, 4]], params["cls"]["kernel"][:, [0, 1, 4]])
    assert not np.array_equal(kernel[:, 2], params["cls"]["kernel"][:, 2])
    for name in params:
        if name != "cls":
            for a, b in zip(
                jax.tree.leaves(out.params[name]), jax.tree.leaves(params[name]), strict=True
            ):
                np.testing.assert_array_equal(a[0], b)
