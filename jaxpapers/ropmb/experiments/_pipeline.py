"""The P12 pipeline, seeds stacked on a leading axis: multi-label CNNs, memory banks, PRDC
training, per-method tuning of the pseudo-masks on a validation split, and segmenters trained on
each method's pseudo-masks."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxpapers.core.fit import fit
from jaxpapers.core.segmentation_metrics import boundary_f1, mean_iou
from jaxpapers.ropmb import (
    METHODS,
    PRDC,
    MemoryBank,
    RefineConfig,
    class_activation_maps,
    colour_affinity,
    masked_average_pool,
    prdc_loss,
    prototype_scores,
    pseudo_masks,
    refine_prototypes,
    refined_scores,
    seed_masks,
)

#: Test images whose pseudo-masks are kept for the figure.
EXAMPLES = 3
#: The grid every method is tuned on: an offset added to its background score before the
#: arg-max (for CAM: to its constant background score). Chosen per method and seed by the
#: pseudo-mask mIoU on the validation split.
OFFSETS: tuple[float, ...] = (-0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3)
#: The extra pseudo-mask row: RO-PMB with its graph at initialisation (what training adds).
INIT = "init"
#: Mixing weights of the prototype ceiling (true-seed bank and local prototypes).
CEILING_ALPHAS: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)


def _conv(x, w, stride):
    dn = ("NHWC", "HWIO", "NHWC")
    return jax.lax.conv_general_dilated(x, w, stride, "SAME", dimension_numbers=dn)


def _add(x, b):
    """``x + b`` for a bias ``b [D]`` over the last axis of ``x`` (ranks made explicit)."""
    return x + b.reshape((1,) * (x.ndim - 1) + b.shape)


def _he(key, shape):
    return jax.random.normal(key, shape) * jnp.sqrt(2.0 / math.prod(shape[:-1]))


#: A fixed factor on the classifier's pooled features: an object covers a few percent of the
#: feature map, so its evidence in the average is small; the factor lets Adam reach confident
#: logits in a few hundred steps. CAMs are normalised by their maximum, so it does not change them.
HEAD_SCALE = 16.0


def init_classifier(key: jax.Array, *, width: int, classes: int, channels: int = 3) -> dict:
    """Parameters of the multi-label classifier: a stride-2 3x3 stem and two 1x1 layers (ReLU;
    the feature map ``A``), then global average pooling and a linear head (``head_w [D, C]``),
    so that its CAMs are exact decompositions of the logits (:mod:`jaxpapers.core.nn.cnn`'s
    design, with 1x1 layers after the stem: a small receptive field keeps CAMs local)."""
    k1, k2, k3, k4 = jax.random.split(key, 4)
    return {
        "w1": _he(k1, (3, 3, channels, width)),
        "b1": jnp.zeros(width),
        "w2": _he(k2, (width, width)),
        "b2": jnp.zeros(width),
        "w3": _he(k3, (width, width)),
        "b3": jnp.zeros(width),
        "head_w": jax.random.normal(k4, (width, classes)) / jnp.sqrt(width),
        "head_b": jnp.zeros(classes),
    }


def classifier_forward(params: dict, images: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(logits [B, C], features [B, H/2, W/2, D])`` of images ``[B, H, W, 3]`` in ``[0, 1]``."""
    h = jax.nn.relu(_add(_conv(images - 0.5, params["w1"], (2, 2)), params["b1"]))
    h = jax.nn.relu(_add(h @ params["w2"], params["b2"]))
    a = jax.nn.relu(_add(h @ params["w3"], params["b3"]))
    return _add(HEAD_SCALE * jnp.mean(a, axis=(1, 2)) @ params["head_w"], params["head_b"]), a


def init_classifiers(keys: jax.Array, *, width: int, classes: int) -> dict:
    """Classifier parameters stacked over seeds (``keys [S]``)."""
    return jax.vmap(lambda k: init_classifier(k, width=width, classes=classes))(keys)


@functools.partial(jax.jit, static_argnames=("steps", "batch", "lr"))
def train_classifiers(params, images, labels, keys, *, steps: int, batch: int, lr: float = 1e-2):
    """Adam on the multi-label (sigmoid cross-entropy) loss of each seed's classifier
    (:func:`fit`).

    ``images [S, N, H, W, 3]``, ``labels [S, N, C]``, ``keys [S]``. Returns ``(params, losses
    [S, steps])``. Seeds run one after the other (``lax.map``): vmapped convolutions over weights
    become grouped convolutions, which XLA:CPU runs several times slower.
    """
    opt = optax.adam(optax.cosine_decay_schedule(lr, steps, alpha=0.1))

    def loss_fn(p, b, _key):
        logits, _ = classifier_forward(p, b[0])
        return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, b[1]))

    def one(args):
        p, x, y, k = args

        def batch_fn(_t, kk):
            idx = jax.random.randint(kk, (batch,), 0, x.shape[0])
            return x[idx], y[idx]

        res = fit(loss_fn, p, opt, steps=steps, key=k, batch_fn=batch_fn)
        return res.params, res.losses

    return jax.lax.map(one, (params, images, labels, keys))


class Features(NamedTuple):
    """Frozen classifier outputs per seed: ``features [S, N, h, w, D]``, ``logits [S, N, C]`` and
    the head kernel ``weights [S, D, C]``."""

    features: jax.Array
    logits: jax.Array
    weights: jax.Array


@jax.jit
def extract(params, images) -> Features:
    """Feature maps and logits of each seed's classifier on its own ``images [S, N, H, W, 3]``."""

    def one(args):
        return classifier_forward(*args)

    logits, feats = jax.lax.map(one, (params, images))
    return Features(feats, logits, params["head_w"])


class Masks(NamedTuple):
    """Per-seed output of the prototype stage (rows: ``METHODS`` then ``INIT``).

    Attributes:
      train_masks: ``[S, methods, N, H, W]`` each of ``METHODS``' pseudo-masks of the training
        images (with its chosen setting and offset): what its segmenter trains on.
      miou, bf1, bf1_t1: ``[S, rows]`` mIoU and boundary F1 (tolerance 0 and 1) of those
        pseudo-masks (training images).
      offsets: ``[S, rows]`` the background offset each row chose on the validation split.
      setting: ``[S, rows]`` the index of the setting each row chose (bank: ``bank_alphas``;
        RO-PMB: ``prdc_grid(...)``; others: 0).
      val_miou: ``{row: [S, settings, offsets]}`` the validation mIoU of every grid point.
      prdc_losses: ``[S, smoothness weights, 2]`` PRDC's objective at its first and last step.
      ceiling_val_miou: ``[S]`` the prototype ceiling's best validation mIoU.
      cam_val_miou: ``[S]`` CAM's best validation mIoU.
      seed_precision: ``[S]`` share of foreground seed pixels of the right class (test split).
      label_accuracy: ``[S]`` the classifier's per-label accuracy on the test split.
      examples: ``[S, methods, EXAMPLES, H, W]`` pseudo-masks of the first training images.
    """

    train_masks: jax.Array
    miou: jax.Array
    bf1: jax.Array
    bf1_t1: jax.Array
    offsets: jax.Array
    setting: jax.Array
    val_miou: dict
    prdc_losses: jax.Array
    ceiling_val_miou: jax.Array
    cam_val_miou: jax.Array
    seed_precision: jax.Array
    label_accuracy: jax.Array
    examples: jax.Array


class Split(NamedTuple):
    """One split as the prototype stage sees it: CNN outputs, image labels, the images (for the
    colour affinities) and the true masks (evaluation and tuning only)."""

    feats: Features
    labels: jax.Array
    images: jax.Array
    masks: jax.Array


def fill_bank(bank: MemoryBank, feats, seeds, *, batch: int, key: jax.Array):
    """Initialise the bank on the first ``batch`` images, then one EMA update per batch over all
    (whole batches only)."""
    n = feats.shape[0] // batch * batch
    state = bank.init(feats[:batch], seeds[:batch], key=key)
    shape = (n // batch, batch)

    def fill(st, b):
        return bank.update(st, *b), None

    stacked = (
        feats[:n].reshape(*shape, *feats.shape[1:]),
        seeds[:n].reshape(*shape, *seeds.shape[1:]),
    )
    return jax.lax.scan(fill, state, stacked)[0]


def train_prdc(
    prdc,
    state,
    feats,
    weights,
    labels,
    affinity,
    *,
    config,
    steps,
    batch,
    lr,
    key,
    smooth_weights=(1.0,),
    top_fraction=1 / 32,
):
    """Adam on :func:`~jaxpapers.ropmb.prdc_loss` (label and affinity consistency, no seed
    targets) over minibatches of the training split; the bank and the CNN stay frozen.

    One graph per entry of ``smooth_weights`` (vmapped: same initialisation and minibatches),
    each also kept after ``steps // 2`` steps. Returns ``(graphs, losses)``: the graphs stacked
    on a leading ``[2 * len(smooth_weights)]`` axis (order: every weight at ``steps // 2``, then
    every weight at ``steps``) and the objectives ``[len(smooth_weights), steps]``."""
    half = max(1, steps // 2)

    def one(smooth):
        def loss_fn(g, b, _key, _kept):
            f, y, a = b
            return prdc_loss(
                g,
                state,
                f,
                weights,
                y,
                config=config,
                affinity=a,
                smooth_weight=smooth,
                top_fraction=top_fraction,
            )

        def batch_fn(_t, kk):
            idx = jax.random.randint(kk, (batch,), 0, feats.shape[0])
            return feats[idx], labels[idx], affinity[idx]

        def keep(kept, new, t, _key):
            return jax.tree.map(lambda k, p: jnp.where(t == half - 1, p, k), kept, new)

        res = fit(
            loss_fn,
            prdc,
            optax.adam(lr),
            steps=steps,
            key=key,
            batch_fn=batch_fn,
            state=prdc,
            after_step=keep,
        )
        return res.state, res.params, res.losses

    kept, final, losses = jax.vmap(one)(jnp.asarray(smooth_weights))
    graphs = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), kept, final)
    return graphs, losses


def prdc_grid(steps: int, smooth_weights: tuple[float, ...]) -> list[tuple[int, float]]:
    """PRDC's validation grid ``(steps, smooth_weight)`` in the order of :func:`train_prdc`'s
    graphs."""
    return [(max(1, steps // 2), w) for w in smooth_weights] + [(steps, w) for w in smooth_weights]


def _offset_masks(scores, labels, size, offset):
    return pseudo_masks(scores.at[..., 0].add(offset), labels, size)


def true_seeds(masks: jax.Array, classes: int, size: int) -> jax.Array:
    """Hard one-hot seeds ``[B, size, size, classes]`` from the true masks ``[B, H, W]``: the
    majority class of each feature cell (the ceiling's seeds; evaluation data only)."""
    soft = jax.image.resize(
        jax.nn.one_hot(masks, classes), (masks.shape[0], size, size, classes), "linear"
    )
    return jax.nn.one_hot(jnp.argmax(soft, -1), classes)


def _best_on_grid(val_scores, val: Split, size: int, classes: int):
    """Validation mIoU ``[settings, offsets]`` of each setting's scores (a list), and the arg-max
    (setting index, offset). The scores are upsampled once per setting: bilinear weights sum to
    one, so adding the offset after upsampling equals adding it before (:func:`pseudo_masks`)."""
    b = val.labels.shape[0]
    allowed = jnp.concatenate([jnp.ones((b, 1)), val.labels], axis=1) > 0

    def grid_row(s):
        up = jax.image.resize(s, (b, size, size, s.shape[-1]), "linear")
        up = jnp.where(allowed[:, None, None, :], up, -jnp.inf)
        return jnp.stack(
            [
                mean_iou(jnp.argmax(up.at[..., 0].add(o), axis=-1), val.masks, classes)
                for o in OFFSETS
            ]
        )

    grid = jnp.stack([grid_row(s) for s in val_scores])
    flat = jnp.argmax(grid.reshape(-1))
    return grid, flat // len(OFFSETS), jnp.asarray(OFFSETS)[flat % len(OFFSETS)]


def _prototype_stage(
    train: Split,
    val: Split,
    test: Split,
    key,
    *,
    bank: MemoryBank,
    config: RefineConfig,
    bank_batch: int,
    prdc_steps: int,
    prdc_smooth_weights: tuple[float, ...],
    bank_alphas: tuple[float, ...],
    prdc_batch: int,
    prdc_lr: float,
    top_fraction: float,
) -> Masks:
    """One seed: fill the bank and train PRDC on the training split (one graph per smoothness
    weight, each kept after half and all of ``prdc_steps``); choose each row's setting and
    offset on the validation split; make its pseudo-masks of the training images. Also the
    prototype ceiling (true-seed bank and local prototypes) and CAM's best validation mIoU."""
    feats, weights = train.feats.features, train.feats.weights
    seeds = seed_masks(
        class_activation_maps(feats, weights, train.labels), train.labels, config=config
    )
    kb, kp, kt = jax.random.split(key, 3)
    state = fill_bank(bank, feats, seeds, batch=bank_batch, key=kb)
    affinity = colour_affinity(train.images, feats.shape[1])
    init = PRDC(feats.shape[-1], key=kp)
    stacked, prdc_losses = train_prdc(
        init,
        state,
        feats,
        weights,
        train.labels,
        affinity,
        config=config,
        steps=prdc_steps,
        batch=prdc_batch,
        lr=prdc_lr,
        key=kt,
        smooth_weights=prdc_smooth_weights,
        top_fraction=top_fraction,
    )
    n_graphs = 2 * len(prdc_smooth_weights)
    graphs = [jax.tree.map(lambda x, i=i: x[i], stacked) for i in range(n_graphs)]
    size = train.masks.shape[-1]
    classes = train.labels.shape[1] + 1

    def scores(method, split, conf=config, prdc=init, bank_state=state):
        return refined_scores(
            method,
            split.feats.features,
            split.feats.weights,
            split.labels,
            config=conf,
            bank=bank_state,
            prdc=prdc,
        )

    alphas = [dataclasses.replace(config, alpha=a) for a in bank_alphas]
    # Each row: its settings (functions of the split), all tuned on the same offset grid.
    settings = {
        "cam": [lambda s: scores("cam", s)],
        "sipe": [lambda s: scores("sipe", s)],
        "bank": [lambda s, c=c: scores("bank", s, conf=c) for c in alphas],
        "ropmb": [lambda s, g=g: scores("ropmb", s, prdc=g) for g in graphs],
        INIT: [lambda s: scores("ropmb", s, prdc=init)],
    }
    masks, miou, bf1, bf1_t1, chosen, which, grids = [], [], [], [], [], [], {}
    for method, fns in settings.items():
        grid, idx, best = _best_on_grid([f(val) for f in fns], val, size, classes)
        train_scores = jnp.stack([f(train) for f in fns])[idx]
        pred = _offset_masks(train_scores, train.labels, size, best)
        masks.append(pred)
        miou.append(mean_iou(pred, train.masks, classes))
        bf1.append(boundary_f1(pred, train.masks, tolerance=0))
        bf1_t1.append(boundary_f1(pred, train.masks, tolerance=1))
        chosen.append(best)
        which.append(idx)
        grids[method] = grid

    # The ceiling of the prototype family on this bed (precondition of the vs-CAM claims): the
    # bank filled under the TRUE masks of the training split, local prototypes pooled under the
    # true masks of the validation images, best of CEILING_ALPHAS x OFFSETS on validation.
    h = feats.shape[1]
    oracle = fill_bank(bank, feats, true_seeds(train.masks, classes, h), batch=bank_batch, key=kb)
    local = masked_average_pool(val.feats.features, true_seeds(val.masks, classes, h))
    ceiling_scores = [
        prototype_scores(
            val.feats.features,
            refine_prototypes(
                local.prototypes, local.mass, oracle, config=dataclasses.replace(config, alpha=a)
            ),
        )
        for a in CEILING_ALPHAS
    ]
    ceiling_grid = _best_on_grid(ceiling_scores, val, size, classes)[0]

    tf = test.feats
    test_seeds = seed_masks(
        class_activation_maps(tf.features, tf.weights, test.labels), test.labels, config=config
    )
    small = jax.image.resize(jax.nn.one_hot(test.masks, classes), test_seeds.shape, "linear")
    fg = test_seeds[..., 1:]
    precision = jnp.sum(fg * small[..., 1:]) / jnp.maximum(jnp.sum(fg), 1.0)
    acc = jnp.mean((tf.logits > 0) == (test.labels > 0))
    masks = jnp.stack(masks[: len(METHODS)])
    return Masks(
        masks.astype(jnp.int8),
        jnp.stack(miou),
        jnp.stack(bf1),
        jnp.stack(bf1_t1),
        jnp.stack(chosen),
        jnp.stack(which),
        grids,
        prdc_losses[:, jnp.asarray([0, -1])],
        jnp.max(ceiling_grid),
        jnp.max(grids["cam"]),
        precision,
        acc,
        masks[:, :EXAMPLES],
    )


@functools.partial(
    jax.jit,
    static_argnames=(
        "bank",
        "config",
        "bank_batch",
        "prdc_steps",
        "prdc_smooth_weights",
        "bank_alphas",
        "prdc_batch",
        "prdc_lr",
        "top_fraction",
    ),
)
def prototype_stage(
    train: Split,
    val: Split,
    test: Split,
    keys,
    *,
    bank: MemoryBank,
    config: RefineConfig,
    bank_batch: int,
    prdc_steps: int,
    prdc_smooth_weights: tuple[float, ...],
    bank_alphas: tuple[float, ...],
    prdc_batch: int,
    prdc_lr: float,
    top_fraction: float,
) -> Masks:
    """:func:`_prototype_stage` vmapped over seeds (no convolutions here, so vmap is cheap)."""
    if 2 * len(prdc_smooth_weights) != len(bank_alphas):
        raise ValueError(
            f"PRDC has {2 * len(prdc_smooth_weights)} settings (two step counts per smoothness "
            f"weight) and bank_alphas {len(bank_alphas)}; expected the same number (equal "
            "tuning budgets)"
        )
    run = functools.partial(
        _prototype_stage,
        bank=bank,
        config=config,
        bank_batch=bank_batch,
        prdc_steps=prdc_steps,
        prdc_smooth_weights=prdc_smooth_weights,
        bank_alphas=bank_alphas,
        prdc_batch=prdc_batch,
        prdc_lr=prdc_lr,
        top_fraction=top_fraction,
    )
    return jax.vmap(run)(train, val, test, keys)


# --------------------------------------------------------------------------------------------
# The segmenter every method's pseudo-masks train (the last stage of multi-stage WSSS).


def init_segmenter(key: jax.Array, *, width: int, classes: int, channels: int = 3) -> dict:
    """Parameters of a small fully convolutional segmenter: a stride-2 3x3 stem and a 1x1 layer
    (both ReLU), a 1x1 classifier; logits upsampled x2 (bilinear) to the input size. Small on
    purpose (CPU budget): it is the same for every method, and only its targets differ."""
    k1, k2, k3 = jax.random.split(key, 3)
    return {
        "w1": _he(k1, (3, 3, channels, width)),
        "b1": jnp.zeros(width),
        "w2": _he(k2, (width, width)),
        "b2": jnp.zeros(width),
        "w3": _he(k3, (width, classes)) * 0.5,
        "b3": jnp.zeros(classes),
    }


def segment(params: dict, images: jax.Array) -> jax.Array:
    """Logits ``[B, H, W, classes]`` of images ``[B, H, W, 3]`` in ``[0, 1]``."""
    h = jax.nn.relu(_add(_conv(images - 0.5, params["w1"], (2, 2)), params["b1"]))
    h = jax.nn.relu(_add(h @ params["w2"], params["b2"]))
    logits = _add(h @ params["w3"], params["b3"])
    b, hh, ww, k = images.shape[0], images.shape[1], images.shape[2], logits.shape[-1]
    return jax.image.resize(logits, (b, hh, ww, k), "linear")


@functools.partial(jax.jit, static_argnames=("classes", "steps", "batch", "width", "lr"))
def segmenter_stage(
    train_images,
    train_masks,
    test_images,
    test_masks,
    keys,
    *,
    classes: int,
    steps: int,
    batch: int,
    width: int,
    lr: float = 1e-2,
) -> jax.Array:
    """Train one segmenter per seed and method on that method's pseudo-masks, return its test
    mIoU ``[S, methods]``.

    ``train_images [S, N, H, W, 3]``, ``train_masks [S, M, N, H, W]`` (pseudo-masks),
    ``test_images [S, T, H, W, 3]`` and ``test_masks [S, T, H, W]`` (true masks), ``keys [S]``;
    ``classes`` counts the background.
    Every method's segmenter of a seed starts from the same weights and sees the same
    minibatches; only its targets differ. At test time it sees the image alone (no labels).
    Runs are sequential (``lax.map``; see :func:`train_classifiers`).
    """
    s, m = train_masks.shape[:2]

    def one(args):
        i, y = args
        x = train_images[i]
        ki, kf = jax.random.split(keys[i])
        p0 = init_segmenter(ki, width=width, classes=classes)

        def loss_fn(p, b, _key):
            logits = segment(p, b[0])
            return jnp.mean(
                optax.softmax_cross_entropy_with_integer_labels(logits, b[1].astype(jnp.int32))
            )

        def batch_fn(_t, kk):
            idx = jax.random.randint(kk, (batch,), 0, x.shape[0])
            return x[idx], y[idx]

        opt = optax.adam(optax.cosine_decay_schedule(lr, steps, alpha=0.1))
        res = fit(loss_fn, p0, opt, steps=steps, key=kf, batch_fn=batch_fn)
        pred = jnp.argmax(segment(res.params, test_images[i]), axis=-1)
        return mean_iou(pred, test_masks[i], classes)

    idx = jnp.repeat(jnp.arange(s), m)
    out = jax.lax.map(one, (idx, train_masks.reshape(s * m, *train_masks.shape[2:])))
    return out.reshape(s, m)
