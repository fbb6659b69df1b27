"""Pretraining, frozen-feature evaluation and the sanity checks of the P01 experiments."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpapers.codi import (
    SSLConfig,
    binned_error,
    cls_attention_mass,
    distillation_loss,
    init_state,
    knn_classify,
    linear_probe,
    mean_iou,
    pretrain,
    readout_gradients,
)
from jaxpapers.core.data.scenes import SceneConfig, make_scenes, patch_labels
from jaxpapers.core.experiment import Context
from jaxpapers.core.nn.vit import ViTConfig
from jaxpapers.core.pytrees import FAST_COMPILE

SCENES = SceneConfig(size=32, num_objects=2, num_classes=4, texture=0.3, noise=0.03)
BINS = 4


def ssl_config(sizes: Any) -> SSLConfig:
    vit = ViTConfig(
        image_size=32,
        channels=3,
        patch=8,
        dim=sizes.dim,
        depth=sizes.depth,
        heads=4,
        mlp=2 * sizes.dim,
    )
    return SSLConfig(
        vit=vit,
        out_dim=sizes.out_dim,
        total_steps=sizes.steps,
        temp_warmup=sizes.steps // 3,
        teacher_temp_end=sizes.teacher_temp_end,
        momentum_base=sizes.momentum_base,
        lr=sizes.lr,
    )


def _scenes(n_train: int, n_test: int, seed: int):
    """Train and test scenes from one program: ``((images, patch labels, main class), ...)``."""
    n = n_train + n_test
    # FAST_COMPILE here and for the feature extraction: one-shot programs whose compile, not
    # their run, is the cost (the pretraining itself is compiled with the default options).
    gen = jax.jit(lambda k: make_scenes(SCENES, n, key=k), compiler_options=FAST_COMPILE)
    s = gen(jax.random.key(seed))
    data = (s.image, patch_labels(s.classes, 8, SCENES.classes).reshape(n, -1), s.main_class)
    return tuple(a[:n_train] for a in data), tuple(a[n_train:] for a in data)


def pretrain_and_evaluate(ctx: Context, sizes: Any, lambdas: tuple[float, ...]) -> dict[str, Any]:
    """Pretrain every (lambda, seed) in one vmapped run; probe each teacher's frozen features."""
    cfg = ssl_config(sizes)
    runs = [(lam, s) for lam in lambdas for s in ctx.seed_list]
    (x_tr, p_tr, y_tr), (x_te, p_te, y_te) = _scenes(sizes.train_n, sizes.test_n, 11)
    graphdef = None
    states = []
    for _, s in runs:
        graphdef, st = init_state(cfg, key=jax.random.key(s))
        states.append(st)
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *states)
    lams = jnp.array([lam for lam, _ in runs])
    keys = jnp.stack([jax.random.key(1000 + s) for _, s in runs])
    train = jax.vmap(
        lambda st, k, lam: pretrain(
            graphdef, st, x_tr, key=k, cfg=cfg, steps=sizes.steps, batch=sizes.batch, lam=lam
        )
    )
    if ctx.size == "smoke":
        # a few steps at tiny shapes: the compile is the whole cost (the quick and full runs
        # compile it with the default options)
        train = jax.jit(train, compiler_options=FAST_COMPILE)
    out = train(stacked, keys, lams)
    # Head logits and backbone tokens of every network, one program (FAST_COMPILE: a one-shot
    # program whose compile, not its run, is the cost).
    feats = jax.jit(
        jax.vmap(lambda p, x: nnx.merge(graphdef, p)(x), in_axes=(0, None)),
        compiler_options=FAST_COMPILE,
    )
    classes = SCENES.classes + 1
    res: dict[str, Any] = {"finite": np.asarray(out.finite).tolist(), "runs": runs}

    def evaluate(tr, te, i: int) -> dict[str, Any]:
        d = tr.patches.shape[-1]
        probe = linear_probe(
            tr.patches[i].reshape(-1, d),
            p_tr.reshape(-1),
            te.patches[i].reshape(-1, d),
            classes,
            steps=sizes.probe_steps,
        )
        pred = probe.predictions.reshape(p_te.shape)
        err = (pred != p_te).astype(jnp.float32)
        mass = cls_attention_mass(te.attention[i])
        knn = knn_classify(tr.cls[i], y_tr, te.cls[i], SCENES.classes, k=sizes.knn_k)
        return {
            "dense": float(1 - err.mean()),
            "miou": float(mean_iou(pred, p_te, classes)),
            "knn": float(jnp.mean(knn == y_te)),
            "bins": np.asarray(binned_error(mass.reshape(-1), err.reshape(-1), BINS)).tolist(),
        }

    def append(key: str, row: dict[str, Any]) -> None:
        for name, value in row.items():
            res.setdefault(key, {}).setdefault(name, []).append(value)

    # Reference: the same probes on the untrained networks (the initial teacher of each seed; the
    # initial state does not depend on lambda, so the first len(seeds) runs are taken), extracted
    # in the same program as the trained teachers (rows len(runs) onwards).
    n_seeds = len(ctx.seed_list)
    teachers = jax.tree.map(
        lambda a, b: jnp.concatenate([a, b[:n_seeds]]), out.state.teacher, stacked.teacher
    )
    z_cls, z_patch, tok = feats(teachers, jnp.concatenate([x_tr, x_te]))
    tr = jax.tree.map(lambda a: a[:, : sizes.train_n], tok)
    te = jax.tree.map(lambda a: a[:, sizes.train_n :], tok)
    for i, (lam, _) in enumerate(runs):
        append(f"{lam:g}", {**evaluate(tr, te, i), "final_loss": float(out.stats.loss[i, -1])})
    for i in range(n_seeds):
        append("init", evaluate(tr, te, len(runs) + i))
    # Reference: predict the most frequent training label everywhere (the background).
    major = jnp.full_like(p_te, jnp.argmax(jnp.bincount(p_tr.reshape(-1), length=classes)))
    major_img = jnp.argmax(jnp.bincount(y_tr, length=SCENES.classes))
    for _ in range(n_seeds):
        append(
            "majority",
            {
                "dense": float(jnp.mean(major == p_te)),
                "miou": float(mean_iou(major, p_te, classes)),
                "knn": float(jnp.mean(y_te == major_img)),
            },
        )
    k = len(runs)
    res["diagnostics"] = collapse_diagnostics(
        z_cls[:k, sizes.train_n :],
        z_patch[:k, sizes.train_n :],
        te.cls[:k],
        out.state.center_cls,
        out.state.center_patch,
        cfg.teacher_temp_end,
    )
    return res


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


def sanity(ctx: Context, sizes: Any) -> dict[str, Any]:
    """lambda = 0 equals iBOT after a few steps; the read-out gradient identity.

    Seeds are vmapped: the CODI(lambda = 0) and iBOT programs compile once each, and the read-out
    gradients of every seed are one jitted program, all with ``FAST_COMPILE`` (tiny shapes: the
    compile is the whole cost; the 1e-3 tolerance on the two programs' states is unaffected).
    """
    # One block: the read-out identity concerns the last block only (depth 2 is tested in
    # tests/test_codi.py), and the compile, which is the whole cost here, shrinks.
    vit = ViTConfig(image_size=16, channels=3, patch=4, dim=16, depth=1, heads=2, mlp=32)
    cfg = SSLConfig(vit=vit, out_dim=8, hidden=16, bottleneck=8, total_steps=3, temp_warmup=1)
    x = jax.random.uniform(jax.random.key(0), (16, 16, 16, 3))
    seeds = ctx.seed_list
    graphdef = None
    states = []
    for s in seeds:
        graphdef, st = init_state(cfg, key=jax.random.key(s))
        states.append(st)
    stacked = jax.tree.map(lambda *a: jnp.stack(a), *states)
    keys = jnp.stack([jax.random.key(50 + s) for s in seeds])

    @functools.partial(jax.jit, static_argnums=0, compiler_options=FAST_COMPILE)
    def run(codi: bool, lam: float):
        return jax.vmap(
            lambda st, k: (
                pretrain(
                    graphdef, st, x, key=k, cfg=cfg, steps=3, batch=4, lam=lam, codi=codi
                ).state
            )
        )(stacked, keys)

    a, b = run(True, 0.0), run(False, 0.0)  # codi=False ignores lam (iBOT targets)
    diffs = jax.tree.map(lambda u, v: jnp.max(jnp.abs(u - v), axis=tuple(range(1, u.ndim))), a, b)
    diff = np.max(np.stack([np.asarray(d) for d in jax.tree.leaves(diffs)]), axis=0)
    targets = jnp.stack(
        [jax.nn.softmax(jax.random.normal(jax.random.key(s), (cfg.out_dim,))) for s in seeds]
    )

    def readout(student, target):
        net = nnx.merge(graphdef, student)

        def loss(cls):
            return jax.vmap(lambda c: distillation_loss(net.head(c), target, 0.1))(cls)

        g = readout_gradients(net.vit, x[:8], loss)
        err = jnp.max(jnp.abs(g.autodiff - g.predicted)) / jnp.max(jnp.abs(g.autodiff))
        return err, g.autodiff, g.mass

    relerr, grads, mass = jax.jit(jax.vmap(readout), compiler_options=FAST_COMPILE)(
        a.student, targets
    )
    slopes = []
    for gi, mi in zip(np.asarray(grads), np.asarray(mass), strict=True):
        norm = np.log(np.linalg.norm(gi, axis=-1).ravel())
        slopes.append(float(np.polyfit(np.log(mi.ravel()), norm, 1)[0]))
    return {"diff": diff.tolist(), "relerr": np.asarray(relerr).tolist(), "slope": slopes}
