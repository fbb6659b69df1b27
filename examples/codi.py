"""CODI in a few lines: a short masked self-distillation run on procedural scenes, then a
per-patch linear probe on the frozen teacher and the [CLS] attention mass of each patch.

    python examples/codi.py

Scale it up with more scenes, a larger ViT (``dim``, ``depth``) and more steps (the P01
experiments pretrain 100 steps at quick size, 5000 at full size: ``jaxpapers reproduce P01``).
"""

import jax
import jax.numpy as jnp

from jaxpapers.codi import (
    SSLConfig,
    cls_attention_mass,
    init_state,
    linear_probe,
    pretrain,
    teacher_tokens,
)
from jaxpapers.core.data.scenes import SceneConfig, make_scenes, patch_labels
from jaxpapers.core.nn.vit import ViTConfig
from jaxpapers.core.pytrees import FAST_COMPILE

scene_cfg = SceneConfig(size=16, num_objects=2, num_classes=3, min_radius=3.0, max_radius=5.0)
scenes = make_scenes(scene_cfg, 96, key=jax.random.key(0))
dense = patch_labels(scenes.classes, 4, scene_cfg.classes).reshape(96, -1)  # [96, 16]

cfg = SSLConfig(
    vit=ViTConfig(image_size=16, channels=3, patch=4, dim=32, depth=1, heads=2, mlp=64),
    out_dim=16,
    hidden=32,
    bottleneck=16,
    total_steps=20,
    temp_warmup=5,
    # Short-run recipe (see jaxpapers.codi): a faster EMA teacher, a constant teacher temperature.
    momentum_base=0.95,
    teacher_temp_end=0.04,
    lr=3e-4,
)
graphdef, state = init_state(cfg, key=jax.random.key(1))
# A 20-step run costs its compile: FAST_COMPILE compiles it several times faster (leave it out,
# as for timing, when scaling up).
train = jax.jit(
    lambda st, images, k: pretrain(
        graphdef, st, images, key=k, cfg=cfg, steps=20, batch=16, lam=0.1
    ),  # lam=0.1: CODI; codi=False: iBOT
    compiler_options=FAST_COMPILE,
)
run = train(state, scenes.image, jax.random.key(2))
print("loss", float(run.stats.loss[0]), "->", float(run.stats.loss[-1]), "finite", bool(run.finite))

tok = teacher_tokens(graphdef, run.state.teacher, scenes.image)
x, d = tok.patches.reshape(-1, 32), dense.reshape(-1)
probe = linear_probe(x[:1024], d[:1024], x[1024:], scene_cfg.classes + 1, steps=100)
print("dense probe accuracy", float(jnp.mean(probe.predictions == d[1024:])))
print("[CLS] attention mass of image 0's patches", cls_attention_mass(tok.attention)[0].round(3))
