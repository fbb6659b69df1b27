"""Inference pair for ``benchmarks/segmentation.py``: STEAM vs the pretrained base model."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxpapers.steam import (
    VISConfig,
    decode,
    encode,
    identity_projectors,
    init_adapters,
    init_vis,
    segment,
)
from jaxpapers.steam.experiments._tasks import NUM_CLASSES, TASKS, class_mask, task_videos


def steam_inference_pair(quick: bool) -> tuple[Callable[[], object], Callable[[], object], int]:
    """``(steam, base, frames)``: zero-argument compiled inference calls on the same videos.

    STEAM runs with three tasks' experts active (random non-zero adapters: the cost does not
    depend on the values), soft routing, the routed class prior and DASH (static map and
    frame-level dynamic part) applied after the neck; the base model runs the same network with
    no adapters. Both segment and associate.
    """
    n, frames, size = (32, 4, 16) if quick else (128, 8, 32)
    cfg = VISConfig(
        size=size,
        width=16 if quick else 32,
        dim=16 if quick else 32,
        classes=NUM_CLASSES,
        experts=3,
    )
    graphdef, params = init_vis(config=cfg, key=jax.random.key(0))
    adapters = init_adapters(config=cfg, key=jax.random.key(1))
    k = jax.random.split(jax.random.key(2), 4)
    adapters = adapters._replace(
        frame=adapters.frame._replace(up=jax.random.normal(k[0], adapters.frame.up.shape)),
        video=adapters.video._replace(up=jax.random.normal(k[1], adapters.video.up.shape)),
        keys=jax.random.normal(k[2], adapters.keys.shape),
    )
    proj = identity_projectors(config=cfg)
    videos = task_videos(TASKS[0], n, frames, size, key=k[3]).image
    allowed = jnp.ones((cfg.classes,))
    gates = jnp.stack([class_mask(t.pool) for t in TASKS])

    def infer(a, active, task_classes):
        def one(v):
            out = decode(
                params,
                a,
                proj,
                encode(graphdef, params, v),
                config=cfg,
                active=active,
                task_classes=task_classes,
            )
            return segment(out, allowed).tracks

        return jax.vmap(one)(videos)

    base_ad = init_adapters(config=cfg, key=jax.random.key(1))
    steam = jax.jit(lambda: infer(adapters, jnp.ones(3), gates))
    base = jax.jit(lambda: infer(base_ad, jax.nn.one_hot(0, 3), None))
    return steam, base, n * frames
