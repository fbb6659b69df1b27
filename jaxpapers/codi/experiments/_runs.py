"""Runs of the P01 experiments: the shared pretraining and probes, the sanity checks, and the run
functions that turn them into rows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.codi import (
    TEXTURES,
    SSLConfig,
    cls_attention_mass,
    distillation_loss,
    init_state,
    knn_classify,
    linear_probe,
    pretrain,
    readout_gradients,
    texture_scenes,
)
from jaxpapers.core.data.scenes import SceneConfig, make_scenes, patch_labels
from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.nn.vit import ViTConfig
from jaxpapers.core.segmentation_metrics import mean_iou

if TYPE_CHECKING:
    from jaxpapers.codi.experiments import Config

BINS = 4
#: lambda values of ``lambda_sweep`` (0 = iBOT); CODI's headline row uses CODI_LAMBDA. Each size
#: pretrains its ``Config.lambdas`` (quick: 0 and CODI_LAMBDA only).
LAMBDAS = (0.0, 0.1, 0.3)
CODI_LAMBDA = 0.1
IBOT, CODI = "iBOT", f"CODI (lambda={CODI_LAMBDA:g})"
#: reference rows: the same probes on the untrained network, and the majority-class prediction.
INIT, MAJORITY = "untrained ViT", "majority class"
#: rows of ``targets_informative``: iBOT's final teacher [CLS] targets on the test scenes.
TARGET_ROWS = (
    "iBOT [CLS] target entropy per image / log K",
    "iBOT [CLS] entropy of the mean target / log K",
)
#: rows of ``attention_informative``: the shared reference map against the foreground.
ATTENTION_ROWS = ("foreground AUC of the reference [CLS] attention",)
SANITY_ROWS = (
    "max |CODI(lambda=0) - iBOT| parameters",
    "read-out gradient: max relative error of the closed form",
)


class Probes(NamedTuple):
    """Probe results of one family of networks, one entry per seed.

    Attributes:
      dense: per-patch linear-probe accuracy on the test scenes.
      miou: mIoU of those predictions (background included).
      knn: [CLS] k-NN accuracy of the largest object's class.
      bins: dense error in each bin of the shared reference attention map (lowest first; see
        :class:`Pretrained`); empty for the majority-class reference.
      final_loss: the pretraining loss of the last step; empty for the references.
      errors: ``[test images, patches]`` 0/1 dense errors of the probe; empty for the
        majority-class reference.
      loss_curve: the pretraining loss every :data:`CURVE_EVERY` steps; empty for the
        references.
    """

    dense: list[float]
    miou: list[float]
    knn: list[float]
    bins: list[list[float]]
    final_loss: list[float]
    errors: list[np.ndarray]
    loss_curve: list[list[float]]


class Pretrained(NamedTuple):
    """Everything the CODI-vs-iBOT experiments read, from one vmapped pretraining.

    Attributes:
      by_lambda: the trained teachers' probes for each pretrained lambda (``lambdas`` of
        :func:`pretrain_and_probe`).
      untrained: the same probes on the untrained network of each seed.
      majority: the majority-class prediction (the same on every seed).
      finite: whether every pretraining run kept a finite loss, in the order of ``runs``.
      runs: the ``(lambda, seed)`` of every pretraining run.
      diagnostics: collapse diagnostics of every run (see :func:`collapse_diagnostics`).
      reference_mass: per seed, ``[test images, patches]`` head-mean [CLS]-to-patch attention
        of that seed's trained iBOT teacher: the one map every row's attention bins use, fixed
        before any comparison (binning each model by its own attention would put different
        patches in iBOT's and CODI's bins).
      foreground: per seed, ``[test images, patches]`` booleans: the patch's label is an object
        (not the background). The attention bins hold foreground patches only.
      untrained_diagnostics: the same collapse diagnostics of each seed's untrained network,
        with its centres at its mean logits on the test scenes (a centre that has caught up):
        what the targets would be before any training.
    """

    by_lambda: dict[float, Probes]
    untrained: Probes
    majority: Probes
    finite: list[bool]
    runs: list[tuple[float, int]]
    diagnostics: dict[str, list[float]]
    reference_mass: list[np.ndarray]
    foreground: list[np.ndarray]
    untrained_diagnostics: dict[str, list[float]]


class Sanity(NamedTuple):
    """Per seed: max |CODI(0) - iBOT| over the parameters, max relative error of the read-out
    gradient's closed form, and the log-log slope of its norm against the attention mass."""

    diff: list[float]
    relerr: list[float]
    slope: list[float]


#: The pretraining loss is recorded every this many steps in ``Probes.loss_curve``.
CURVE_EVERY = 10


def scene_config(config: Config) -> SceneConfig:
    """The shape-scene family of a run size (``bed="shapes"``): 32x32 RGB scenes of shapes of
    four classes (square, disc, triangle, ring) in random colours with a striped texture, and
    pixel noise."""
    return SceneConfig(
        size=32,
        num_objects=config.num_objects,
        num_classes=4,
        min_radius=config.min_radius,
        max_radius=config.max_radius,
        texture=0.3,
        noise=0.03,
    )


def ssl_config(config: Config) -> SSLConfig:
    vit = ViTConfig(
        image_size=32,
        channels=3,
        patch=8,
        dim=config.dim,
        depth=config.depth,
        heads=4,
        mlp=2 * config.dim,
    )
    return SSLConfig(
        vit=vit,
        out_dim=config.out_dim,
        hidden=config.hidden,
        bottleneck=config.bottleneck,
        head_bn=config.head_bn,
        total_steps=config.steps,
        temp_warmup=config.steps // 3,
        teacher_temp_end=config.teacher_temp_end,
        momentum_base=config.momentum_base,
        lr=config.lr,
        lr_warmup=config.lr_warmup,
        lr_final=config.lr_final,
        center_momentum=config.center_momentum,
        crop_min=config.crop_min,
        channel_shuffle=config.channel_shuffle,
        grey=config.grey,
    )


def _scenes(config: Config, seed: int):
    """Train and test scenes from one program: ``((images, patch labels, main class), ...)``."""
    n_train, n = config.train_n, config.train_n + config.test_n
    if config.bed == "textures":
        t = texture_scenes(
            n,
            key=jax.random.key(seed),
            num_objects=config.num_objects,
            min_radius=config.min_radius,
            max_radius=config.max_radius,
            colour=config.colour,
            smooth=config.smooth,
            level=tuple(config.level),
            amplitude=tuple(config.amplitude),
        )
        data = (t.images, t.patch_labels, t.main_class)
        return tuple(a[:n_train] for a in data), tuple(a[n_train:] for a in data)
    if config.bed != "shapes":
        raise ValueError(f"bed={config.bed!r}; expected 'textures' or 'shapes'")
    scenes = scene_config(config)
    s = make_scenes(n, config=scenes, key=jax.random.key(seed), background=config.background)
    data = (s.image, patch_labels(s.classes, 8, scenes.classes).reshape(n, -1), s.main_class)
    return tuple(a[:n_train] for a in data), tuple(a[n_train:] for a in data)


def _stack(trees: list[Any]) -> Any:
    return jax.tree.map(lambda *x: jnp.stack(x), *trees)


def attention_bins(
    errors: np.ndarray, reference_mass: np.ndarray, foreground: np.ndarray, bins: int = BINS
) -> list[float]:
    """Mean dense error in ``bins`` equal-count bins of the FOREGROUND patches ranked by one
    reference attention map (lowest first; the same rule as :func:`jaxpapers.codi.binned_error`,
    in NumPy because the number of foreground patches varies): every model's errors binned by the
    same map fall on the same patches in each bin, and the background (about half of the
    patches, nearly always right) cannot make a bin look easy by its share alone."""
    fg = np.asarray(foreground, bool).reshape(-1)
    mass = np.asarray(reference_mass, np.float64).reshape(-1)[fg]
    err = np.asarray(errors, np.float64).reshape(-1)[fg]
    return _equal_count_means(mass, err, bins)


def _equal_count_means(mass: np.ndarray, values: np.ndarray, bins: int) -> list[float]:
    if not 1 <= bins <= mass.shape[0]:
        raise ValueError(f"bins={bins}; expected 1 <= bins <= {mass.shape[0]} patches")
    order = np.argsort(mass, kind="stable")
    which = (np.arange(mass.shape[0]) * bins) // mass.shape[0]
    sums = np.bincount(which, values[order], minlength=bins)
    return (sums / np.bincount(which, minlength=bins)).tolist()


def foreground_fraction_bins(
    reference_mass: np.ndarray, foreground: np.ndarray, bins: int = BINS
) -> list[float]:
    """Foreground share of each equal-count bin of ALL patches ranked by the reference map
    (lowest first): what binning every patch, as before 2026-12-05, mixed into the bins."""
    mass = np.asarray(reference_mass, np.float64).reshape(-1)
    return _equal_count_means(mass, np.asarray(foreground, np.float64).reshape(-1), bins)


def attention_separation(reference_mass: np.ndarray, foreground: np.ndarray) -> dict[str, float]:
    """How much one reference attention map separates: the AUC of its mass for foreground
    against background patches (pooled over images, as the bins are; 0.5 = no separation, ties
    count 1/2), and the mean over images of the within-image max/min mass ratio (1 = flat)."""
    m = np.asarray(reference_mass, np.float64)
    fg = np.asarray(foreground, bool).reshape(-1)
    flat = m.reshape(-1)
    n1, n0 = int(fg.sum()), int((~fg).sum())
    if n1 == 0 or n0 == 0:
        auc = float("nan")
    else:
        order = np.argsort(flat, kind="stable")
        ranks = np.empty(flat.shape[0])
        ranks[order] = np.arange(1, flat.shape[0] + 1)
        # average ranks over ties
        _, inv, counts = np.unique(flat, return_inverse=True, return_counts=True)
        sums = np.bincount(inv, ranks)
        ranks = (sums / counts)[inv]
        auc = float((ranks[fg].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))
    ratio = float(np.mean(m.max(-1) / m.min(-1)))
    return {"auc": auc, "max_min_ratio": ratio}


def pretrain_and_probe(
    seeds: list[int], config: Config, lambdas: tuple[float, ...] = LAMBDAS
) -> Pretrained:
    """Pretrain every (lambda, seed) in one vmapped run; probe each teacher's frozen features.

    ``lambdas`` must contain 0 (iBOT): its trained teachers' attention is the reference map of
    the attention bins. Model seed ``s`` trains and is probed on its own scene draw,
    ``_scenes(config, 11 + s)``, shared by every lambda of that seed (the comparisons stay
    paired, and the seed spread covers the data draw too).
    """
    if 0.0 not in lambdas:
        raise ValueError(f"lambdas={lambdas}; expected 0 (iBOT, the reference attention) in it")
    cfg = ssl_config(config)
    runs = [(lam, s) for lam in lambdas for s in seeds]
    data = [_scenes(config, 11 + s) for s in seeds]
    x_tr, p_tr, y_tr = (jnp.stack([d[0][j] for d in data]) for j in range(3))
    x_te, p_te, y_te = (jnp.stack([d[1][j] for d in data]) for j in range(3))
    n_seeds = len(seeds)
    row_seed = jnp.array([seeds.index(s) for _, s in runs] + list(range(n_seeds)))
    n_obj = len(TEXTURES) if config.bed == "textures" else scene_config(config).classes
    stacked = _stack([init_state(config=cfg, key=jax.random.key(s)) for _, s in runs])
    lams = jnp.array([lam for lam, _ in runs])
    keys = jnp.stack([jax.random.key(1000 + s) for _, s in runs])
    out = jax.vmap(
        lambda st, x, k, lam: pretrain(
            st, x, key=k, config=cfg, steps=config.steps, batch=config.batch, lam=lam
        )
    )(stacked, x_tr[row_seed[: len(runs)]], keys, lams)
    # Head logits and backbone tokens of every network on its seed's scenes, one program.
    feats = jax.jit(jax.vmap(lambda p, x: stacked.model(p)(x)))
    classes = n_obj + 1

    def evaluate(tr, te, i: int) -> tuple[float, float, float, np.ndarray]:
        d = tr.patches.shape[-1]
        j = int(row_seed[i])
        probe = linear_probe(
            tr.patches[i].reshape(-1, d),
            p_tr[j].reshape(-1),
            te.patches[i].reshape(-1, d),
            classes,
            steps=config.probe_steps,
        )
        pred = probe.predictions.reshape(p_te[j].shape)
        err = (pred != p_te[j]).astype(jnp.float32)
        knn = knn_classify(tr.cls[i], y_tr[j], te.cls[i], n_obj, k=config.knn_k)
        return (
            float(1 - err.mean()),
            float(mean_iou(pred, p_te[j], classes)),
            float(jnp.mean(knn == y_te[j])),
            np.asarray(err, np.uint8),
        )

    # Reference: the same probes on the untrained networks (the initial teacher of each seed; the
    # initial state does not depend on lambda, so the first len(seeds) runs are taken), extracted
    # in the same program as the trained teachers (rows len(runs) onwards).
    teachers = jax.tree.map(
        lambda a, b: jnp.concatenate([a, b[:n_seeds]]), out.state.teacher, stacked.teacher
    )
    z_cls, z_patch, tok = feats(teachers, jnp.concatenate([x_tr, x_te], axis=1)[row_seed])
    tr = jax.tree.map(lambda a: a[:, : config.train_n], tok)
    te = jax.tree.map(lambda a: a[:, config.train_n :], tok)
    mass = np.asarray(jax.vmap(cls_attention_mass)(te.attention))  # [runs + seeds, M, N]
    reference = [mass[runs.index((0.0, s))] for s in seeds]
    foreground = [np.asarray(p_te[j]) > 0 for j in range(n_seeds)]

    def probes(first: int, final_loss=None, curve=None) -> Probes:
        rows = [evaluate(tr, te, first + j) for j in range(n_seeds)]
        dense, miou, knn, errors = (list(c) for c in zip(*rows, strict=True))
        bins = [
            attention_bins(e, m, f) for e, m, f in zip(errors, reference, foreground, strict=True)
        ]
        return Probes(dense, miou, knn, bins, final_loss or [], errors, curve or [])

    losses = np.asarray(out.losses)
    by_lambda = {
        lam: probes(
            j * n_seeds,
            losses[j * n_seeds : (j + 1) * n_seeds, -1].tolist(),
            losses[j * n_seeds : (j + 1) * n_seeds, CURVE_EVERY - 1 :: CURVE_EVERY].tolist(),
        )
        for j, lam in enumerate(lambdas)
    }
    untrained = probes(len(runs))
    # Reference: predict the most frequent training label everywhere (the background), per seed.
    rows = []
    for j in range(n_seeds):
        major = jnp.full_like(
            p_te[j], jnp.argmax(jnp.bincount(p_tr[j].reshape(-1), length=classes))
        )
        major_img = jnp.argmax(jnp.bincount(y_tr[j], length=n_obj))
        rows.append(
            (
                float(jnp.mean(major == p_te[j])),
                float(mean_iou(major, p_te[j], classes)),
                float(jnp.mean(y_te[j] == major_img)),
            )
        )
    majority = Probes(
        *([r[c] for r in rows] for c in range(3)), bins=[], final_loss=[], errors=[], loss_curve=[]
    )
    k = len(runs)
    diagnostics = collapse_diagnostics(
        z_cls[:k, config.train_n :],
        z_patch[:k, config.train_n :],
        te.cls[:k],
        out.state.center_cls,
        out.state.center_patch,
        cfg.teacher_temp_end,
    )
    # The two cross-entropies of the loss, each to be compared with log K (their sum is the loss).
    diagnostics["final_cls_loss"] = np.asarray(out.stats.cls_loss[:, -1]).tolist()
    diagnostics["final_patch_loss"] = np.asarray(out.stats.patch_loss[:, -1]).tolist()
    u_cls, u_patch = z_cls[k:, config.train_n :], z_patch[k:, config.train_n :]
    untrained_diagnostics = collapse_diagnostics(
        u_cls,
        u_patch,
        te.cls[k:],
        jnp.mean(u_cls, axis=1),
        jnp.mean(u_patch, axis=(1, 2)),
        cfg.teacher_temp_end,
    )
    return Pretrained(
        by_lambda,
        untrained,
        majority,
        np.asarray(out.finite).tolist(),
        runs,
        diagnostics,
        reference,
        foreground,
        untrained_diagnostics,
    )


def collapse_diagnostics(
    z_cls, z_patch, cls_features, center_cls, center_patch, temperature: float
) -> dict[str, list[float]]:
    """Per run (leading axis): mean entropy of the teacher's [CLS] and patch targets and the
    entropy of their mean over images (both ``log K`` for uniform targets, both 0 for a collapse
    to one prototype; a healthy run has a low per-image and a high mean entropy), the norm of the
    [CLS] centre, and the mean over feature dimensions of the across-image std of the teacher's
    [CLS] features (0 when every image maps to the same feature)."""
    z_cls, z_patch = np.asarray(z_cls, np.float64), np.asarray(z_patch, np.float64)
    k = z_cls.shape[-1]

    def targets(z, c):
        z = (z - np.asarray(c)[:, None, :]) / temperature
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def ent(p):
        return -np.sum(p * np.log(p + 1e-12), -1)

    t_cls = targets(z_cls, center_cls)
    t_patch = targets(z_patch.reshape(z_patch.shape[0], -1, k), center_patch)
    out = {
        "cls_entropy": ent(t_cls).mean(1),
        "cls_entropy_of_mean": ent(t_cls.mean(1)),
        "patch_entropy": ent(t_patch).mean(1),
        "patch_entropy_of_mean": ent(t_patch.mean(1)),
        "log_K": np.full(z_cls.shape[0], np.log(k)),
        "center_cls_norm": np.linalg.norm(np.asarray(center_cls), axis=-1),
        "cls_feature_std": np.asarray(cls_features).std(1).mean(-1),
    }
    return {name: v.tolist() for name, v in out.items()}


def sanity_checks(seeds: list[int]) -> Sanity:
    """lambda = 0 equals iBOT after a few steps; the read-out gradient identity.

    Seeds are vmapped: the CODI(lambda = 0) and iBOT programs compile once each, and the read-out
    gradients of every seed are one jitted program.
    """
    # One block: the read-out identity concerns the last block only (depth 2 is tested in
    # tests/test_codi.py), and the compile, which is the whole cost here, shrinks.
    vit = ViTConfig(image_size=16, channels=3, patch=4, dim=16, depth=1, heads=2, mlp=32)
    cfg = SSLConfig(vit=vit, out_dim=8, hidden=16, bottleneck=8, total_steps=3, temp_warmup=1)
    x = jax.random.uniform(jax.random.key(0), (16, 16, 16, 3))
    stacked = _stack([init_state(config=cfg, key=jax.random.key(s)) for s in seeds])
    keys = jnp.stack([jax.random.key(50 + s) for s in seeds])

    def run(codi: bool, lam: float):
        return jax.vmap(
            lambda st, k: (
                pretrain(st, x, key=k, config=cfg, steps=3, batch=4, lam=lam, codi=codi).state
            )
        )(stacked, keys)

    a, b = run(True, 0.0), run(False, 0.0)  # codi=False ignores lam (iBOT targets)
    diffs = jax.tree.map(lambda u, v: jnp.max(jnp.abs(u - v), axis=tuple(range(1, u.ndim))), a, b)
    diff = np.max(np.stack([np.asarray(d) for d in jax.tree.leaves(diffs)]), axis=0)
    targets = jnp.stack(
        [jax.nn.softmax(jax.random.normal(jax.random.key(s), (cfg.out_dim,))) for s in seeds]
    )

    def readout(student, target):
        net = stacked.model(student)

        def loss(cls):
            return jax.vmap(lambda c: distillation_loss(net.head(c), target, 0.1))(cls)

        g = readout_gradients(net.vit, x[:8], loss)
        err = jnp.max(jnp.abs(g.autodiff - g.predicted)) / jnp.max(jnp.abs(g.autodiff))
        return err, g.autodiff, g.mass

    relerr, grads, mass = jax.jit(jax.vmap(readout))(a.student, targets)
    slopes = []
    for gi, mi in zip(np.asarray(grads), np.asarray(mass), strict=True):
        norm = np.log(np.linalg.norm(gi, axis=-1).ravel())
        slopes.append(float(np.polyfit(np.log(mi.ravel()), norm, 1)[0]))
    return Sanity(diff.tolist(), np.asarray(relerr).tolist(), slopes)


# --------------------------------------------------------------------------------------------
# Run functions: rows of each experiment from the shared computations (``ctx.cached``).


def _pretrained(
    ctx: Context, config: Config, lambdas: tuple[float, ...] | None = None
) -> Pretrained:
    """The shared pretraining of ``lambdas`` (default ``config.lambdas``) on the run's seeds."""
    lambdas = config.lambdas if lambdas is None else tuple(lambdas)
    if 0.0 not in lambdas or CODI_LAMBDA not in lambdas:
        raise ValueError(
            f"lambdas={lambdas}; expected 0 (iBOT) and {CODI_LAMBDA} (CODI's headline row) in it"
        )
    return ctx.cached(
        "pretrain_and_probe_" + "_".join(map(str, lambdas)),
        lambda: pretrain_and_probe([config.seed_base + s for s in ctx.seed_list], config, lambdas),
    )


def dense_by_patch_kind(probes: Probes, foreground: list[np.ndarray]) -> dict[str, list[float]]:
    """Per seed, the dense probe's accuracy on the foreground (object) and on the background test
    patches: dense accuracy is about half background, so a gain on the objects can hide behind a
    loss on the background (what iBOT's pretraining does at quick size)."""
    out: dict[str, list[float]] = {"foreground": [], "background": []}
    for err, fg in zip(probes.errors, foreground, strict=True):
        err = np.asarray(err, bool)
        out["foreground"].append(float(1.0 - err[fg].mean()))
        out["background"].append(float(1.0 - err[~fg].mean()))
    return out


def run_pretraining_learns(ctx: Context, config: Config) -> Outcome:
    res = _pretrained(ctx, config)
    base, init = res.by_lambda[0.0], res.untrained
    values = {
        f"{INIT} dense": init.dense,
        f"{IBOT} dense": base.dense,
        f"{INIT} mIoU": init.miou,
        f"{IBOT} mIoU": base.miou,
        f"{INIT} k-NN": init.knn,
        f"{IBOT} k-NN": base.knn,
    }
    major = res.majority
    extras = {
        "model seeds (each on its scene draw 11 + seed)": [s for lam, s in res.runs if lam == 0.0],
        MAJORITY: {"dense": major.dense, "miou": major.miou, "knn": major.knn},
        "final_loss": base.final_loss,
        "log_K": float(np.log(config.out_dim)),
        f"loss_curve (every {CURVE_EVERY} steps)": base.loss_curve,
        "dense accuracy by patch kind": {
            name: dense_by_patch_kind(p, res.foreground) for name, p in ((INIT, init), (IBOT, base))
        },
    }
    return Outcome(values, extras)


def run_codi_vs_ibot(ctx: Context, config: Config) -> Outcome:
    res = _pretrained(ctx, config)
    base, codi = res.by_lambda[0.0], res.by_lambda[CODI_LAMBDA]
    init, major = res.untrained, res.majority
    values = {
        f"{MAJORITY} dense": major.dense,
        f"{INIT} dense": init.dense,
        f"{IBOT} dense": base.dense,
        f"{CODI} dense": codi.dense,
        f"{MAJORITY} k-NN": major.knn,
        f"{INIT} k-NN": init.knn,
        f"{IBOT} k-NN": base.knn,
        f"{CODI} k-NN": codi.knn,
    }
    extras = {
        "mIoU": {MAJORITY: major.miou, INIT: init.miou, IBOT: base.miou, CODI: codi.miou},
        "dense accuracy by patch kind": {
            name: dense_by_patch_kind(p, res.foreground)
            for name, p in ((INIT, init), (IBOT, base), (CODI, codi))
        },
        "final_loss": {IBOT: base.final_loss, CODI: codi.final_loss},
        "all_losses_finite": all(res.finite),
        "collapse_diagnostics (per run, runs in the order of 'runs')": res.diagnostics,
        "runs (lambda, seed)": res.runs,
    }
    return Outcome(values, extras)


def run_targets_informative(ctx: Context, config: Config) -> Outcome:
    res = _pretrained(ctx, config)
    ibot = [i for i, (lam, _) in enumerate(res.runs) if lam == 0.0]
    untrained = range(len(res.untrained_diagnostics.get("log_K", [])))

    def per_log_k(d: dict[str, list[float]], name: str, runs) -> list[float]:
        return [d[name][i] / d["log_K"][i] for i in runs]

    d = res.diagnostics
    values = {
        TARGET_ROWS[0]: per_log_k(d, "cls_entropy", ibot),
        TARGET_ROWS[1]: per_log_k(d, "cls_entropy_of_mean", ibot),
    }
    u = res.untrained_diagnostics
    extras = {
        "log_K": float(np.log(config.out_dim)),
        "iBOT patch target entropy per patch / log K": per_log_k(d, "patch_entropy", ibot),
        "iBOT patch entropy of the mean target / log K": per_log_k(
            d, "patch_entropy_of_mean", ibot
        ),
        "untrained network (centres at its mean test logits): [CLS] entropy per image / log K": (
            per_log_k(u, "cls_entropy", untrained)
        ),
        "untrained network: [CLS] entropy of the mean target / log K": per_log_k(
            u, "cls_entropy_of_mean", untrained
        ),
        "reading": "with the batch-normalised head the untrained network's targets are "
        "image-dependent too: the gate shows that CODI's mixed-in term is not zero, not that "
        "training sharpened the targets",
        "why": "with uniform teacher targets CODI's target (1 - lambda) t_patch + lambda t_cls "
        "equals iBOT's, so codi_vs_ibot, lambda_sweep and low_attention_patches cannot show CODI "
        "either way",
    }
    return Outcome(values, extras)


def run_attention_informative(ctx: Context, config: Config) -> Outcome:
    res = _pretrained(ctx, config)
    sep = [
        attention_separation(m, f) for m, f in zip(res.reference_mass, res.foreground, strict=True)
    ]
    values = {ATTENTION_ROWS[0]: [s["auc"] for s in sep]}
    extras = {
        "within-image max/min mass ratio (mean over images)": [s["max_min_ratio"] for s in sep],
        "foreground fraction of each all-patch bin (lowest first)": [
            foreground_fraction_bins(m, f)
            for m, f in zip(res.reference_mass, res.foreground, strict=True)
        ],
        "foreground fraction of the test patches": [float(np.mean(f)) for f in res.foreground],
    }
    return Outcome(values, extras)


def low_attention_rows(res: Pretrained) -> dict[str, list[float]]:
    """Per seed, iBOT's minus CODI's dense error in the lowest and the highest bin of the shared
    reference attention map (:attr:`Pretrained.reference_mass`), foreground patches only: both
    errors are averaged over the same patches, so equal error maps give a reduction of exactly 0
    in every bin."""
    base, codi = res.by_lambda[0.0], res.by_lambda[CODI_LAMBDA]
    gains = [
        np.subtract(attention_bins(b, m, f), attention_bins(c, m, f))
        for b, c, m, f in zip(
            base.errors, codi.errors, res.reference_mass, res.foreground, strict=True
        )
    ]
    return {
        "error reduction, lowest-attention bin": [float(g[0]) for g in gains],
        "error reduction, highest-attention bin": [float(g[-1]) for g in gains],
    }


def run_low_attention(ctx: Context, config: Config) -> Outcome:
    res = _pretrained(ctx, config)
    base, codi = res.by_lambda[0.0], res.by_lambda[CODI_LAMBDA]
    extras = {
        "binned_error": {IBOT: base.bins, CODI: codi.bins, INIT: res.untrained.bins},
        "reference attention": "the trained iBOT teacher's head-mean [CLS]-to-patch attention "
        "of the same seed, one map for every row; bins of the foreground patches only",
        "foreground fraction of each all-patch bin (lowest first)": [
            foreground_fraction_bins(m, f)
            for m, f in zip(res.reference_mass, res.foreground, strict=True)
        ],
    }
    return Outcome(low_attention_rows(res), extras)


def run_lambda_sweep(ctx: Context, config: Config) -> Outcome:
    # Every lambda of LAMBDAS, whatever the size's ``lambdas`` (quick mode pretrains 0 and 0.1
    # only; naming this experiment at quick size pretrains all three).
    res = _pretrained(ctx, config, LAMBDAS)
    rows = {f"lambda={lam:g}": res.by_lambda[lam] for lam in LAMBDAS}
    values = {name: p.dense for name, p in rows.items()}
    extras = {
        "knn": {name: p.knn for name, p in rows.items()},
        "miou": {name: p.miou for name, p in rows.items()},
    }
    return Outcome(values, extras)


def run_sanity(ctx: Context, config: Config) -> Outcome:
    res = ctx.cached("sanity_checks", lambda: sanity_checks(ctx.seed_list))
    values = {SANITY_ROWS[0]: res.diff, SANITY_ROWS[1]: res.relerr}
    return Outcome(values, {"loglog_slope_grad_norm_vs_attention_mass": res.slope})
