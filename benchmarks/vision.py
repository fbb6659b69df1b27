"""P01 CODI and P09 CR-CE: cost of one training step against its baseline.

* ``codi_step_over_ibot_time``: one jitted self-distillation step (two views, student + EMA
  teacher ViT, AdamW) with CODI's target mixing (lambda = 0.1) over the same step with iBOT's
  targets; the median of ABBA-paired ratios (:func:`jaxpapers.core.bench.paired_time_ratio`).
* ``crce_step_over_ce_time``: one Adam step of the GAP CNN with CR-CE (ContrastiveCAM of the
  true class, differentiated through) over the plain cross-entropy step.
* ``<step>_images_per_s``: batch / median step time.
* ``<step>_peak_bytes`` from the compiled executable's ``memory_analysis()``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from jaxpapers.codi import SSLConfig, init_state, ssl_optimizer, train_step
from jaxpapers.core.bench import bench_main, executable_memory, paired_time_ratio, row
from jaxpapers.core.data.scenes import SceneConfig, make_scenes
from jaxpapers.core.nn.cnn import CNNConfig, ConvNet
from jaxpapers.core.nn.vit import ViTConfig
from jaxpapers.crce import CRCE, cell_fractions, cr_ce_loss


def _ratio_rows(name, base_name, fn, base, batch, repeats, n_args):
    paired = paired_time_ratio(lambda: fn(*n_args), lambda: base(*n_args), repeats=repeats)
    return [
        row(
            f"{name}_step_over_{base_name}_time",
            "ratio",
            paired["ratio"],
            "1",
            q25=paired["q25"],
            q75=paired["q75"],
            repeats=repeats,
        ),
        row(f"{name}_step_images_per_s", "throughput", batch / paired["time"], "images/s"),
        row(
            f"{base_name}_step_images_per_s",
            "throughput",
            batch / paired["baseline_time"],
            "images/s",
        ),
        row(f"{name}_step_peak_bytes", "memory", executable_memory(fn)["peak"], "bytes"),
        row(f"{base_name}_step_peak_bytes", "memory", executable_memory(base)["peak"], "bytes"),
    ]


def run(quick: bool = True) -> list[dict]:
    batch, repeats = (64, 21) if quick else (256, 31)
    dim, depth = (64, 2) if quick else (192, 6)
    scenes = make_scenes(
        batch, config=SceneConfig(size=32, num_objects=1, num_classes=2), key=jax.random.key(0)
    )
    rows = []

    vit = ViTConfig(image_size=32, channels=3, patch=8, dim=dim, depth=depth, heads=4, mlp=2 * dim)
    cfg = SSLConfig(vit=vit)
    state = init_state(config=cfg, key=jax.random.key(0))
    opt_state = ssl_optimizer(config=cfg).init(state.student)
    key = jax.random.key(1)

    def ssl(lam):
        def f(st, o, x, k):
            return train_step(st, o, x, key=k, config=cfg, lam=lam)

        # Compiled ahead of time: the executable timed is the one memory_analysis() reads.
        return jax.jit(f).lower(state, opt_state, scenes.image, key).compile()

    rows += _ratio_rows(
        "codi", "ibot", ssl(0.1), ssl(None), batch, repeats, (state, opt_state, scenes.image, key)
    )

    widths = (8, 16) if quick else (32, 64)
    gdef, params = nnx.split(ConvNet(CNNConfig(widths=widths, stem_stride=2), rngs=nnx.Rngs(0)))
    opt = optax.adam(1e-3)
    opt_state = opt.init(params)
    labels = scenes.main_class
    context = 1.0 - cell_fractions(scenes.instances > 0, (8, 8))

    def crce_loss(p, x, y, ctx):
        net = nnx.merge(gdef, p)
        return cr_ce_loss(net.classify, net.features(x), y, ctx, config=CRCE(beta=1.0)).loss

    def ce_loss(p, x, y, ctx):
        logits = nnx.merge(gdef, p)(x)
        return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, y))

    def cnn(loss):
        def f(p, s, x, y, ctx):
            u, s = opt.update(jax.grad(loss)(p, x, y, ctx), s, p)
            return optax.apply_updates(p, u), s

        return jax.jit(f).lower(params, opt_state, scenes.image, labels, context).compile()

    rows += _ratio_rows(
        "crce",
        "ce",
        cnn(crce_loss),
        cnn(ce_loss),
        batch,
        repeats,
        (params, opt_state, scenes.image, labels, context),
    )
    return rows


if __name__ == "__main__":
    bench_main("vision", run)
