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
    teacher_tokens,
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
        vit=vit, out_dim=sizes.out_dim, total_steps=sizes.steps, temp_warmup=sizes.steps // 3
    )


def _scenes(n: int, seed: int):
    s = jax.jit(lambda k: make_scenes(SCENES, n, key=k))(jax.random.key(seed))
    return s.image, patch_labels(s.classes, 8, SCENES.classes).reshape(n, -1), s.main_class


def pretrain_and_evaluate(ctx: Context, sizes: Any, lambdas: tuple[float, ...]) -> dict[str, Any]:
    """Pretrain every (lambda, seed) in one vmapped run; probe each teacher's frozen features."""
    cfg = ssl_config(sizes)
    runs = [(lam, s) for lam in lambdas for s in ctx.seed_list]
    x_tr, p_tr, y_tr = _scenes(sizes.train_n, 11)
    x_te, p_te, y_te = _scenes(sizes.test_n, 12)
    graphdef = None
    states = []
    for _, s in runs:
        graphdef, st = init_state(cfg, key=jax.random.key(s))
        states.append(st)
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *states)
    lams = jnp.array([lam for lam, _ in runs])
    keys = jnp.stack([jax.random.key(1000 + s) for _, s in runs])
    out = jax.vmap(
        lambda st, k, lam: pretrain(
            graphdef, st, x_tr, key=k, cfg=cfg, steps=sizes.steps, batch=sizes.batch, lam=lam
        )
    )(stacked, keys, lams)
    feats = jax.jit(
        jax.vmap(lambda p, x: teacher_tokens(graphdef, p, x), in_axes=(0, None)),
        static_argnums=(),
    )
    tr, te = feats(out.state.teacher, x_tr), feats(out.state.teacher, x_te)
    classes = SCENES.classes + 1
    res: dict[str, Any] = {"finite": np.asarray(out.finite).tolist(), "runs": runs}
    for i, (lam, _) in enumerate(runs):
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
        row = res.setdefault(f"{lam:g}", {})
        row.setdefault("dense", []).append(float(1 - err.mean()))
        row.setdefault("miou", []).append(float(mean_iou(pred, p_te, classes)))
        row.setdefault("knn", []).append(float(jnp.mean(knn == y_te)))
        row.setdefault("bins", []).append(
            np.asarray(binned_error(mass.reshape(-1), err.reshape(-1), BINS)).tolist()
        )
        row.setdefault("final_loss", []).append(float(out.stats.loss[i, -1]))
    return res


def sanity(ctx: Context, sizes: Any) -> dict[str, Any]:
    """lambda = 0 equals iBOT after a few steps; the read-out gradient identity.

    Seeds are vmapped: the CODI(lambda = 0) and iBOT programs compile once each, and the read-out
    gradients of every seed are one jitted program, all with ``FAST_COMPILE`` (tiny shapes: the
    compile is the whole cost; the 1e-3 tolerance on the two programs' states is unaffected).
    """
    vit = ViTConfig(image_size=16, channels=3, patch=4, dim=16, depth=2, heads=2, mlp=32)
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
