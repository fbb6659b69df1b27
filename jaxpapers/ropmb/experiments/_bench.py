"""Jitted pseudo-mask generators for ``benchmarks/segmentation.py`` (P12 rows)."""

from __future__ import annotations

from collections.abc import Callable

import jax
from flax import nnx

from jaxpapers.core.nn.cnn import CNNConfig, ConvNet
from jaxpapers.ropmb import PRDC, MemoryBank, pseudo_masks, refined_scores, seed_masks
from jaxpapers.ropmb import class_activation_maps as cams
from jaxpapers.ropmb.experiments._data import SCENES, make_splits
from jaxpapers.ropmb.experiments._runs import REFINE


def ropmb_pseudo_mask_pair(quick: bool) -> tuple[Callable[[], object], Callable[[], object], int]:
    """``(ropmb, cam, images)``: zero-argument calls that map a batch of images to pseudo-masks,
    CNN forward included; RO-PMB with its bank (``K`` prototypes per class) and PRDC enrichment,
    CAM with the constant background score. Untrained weights (timing does not depend on them)."""
    n, widths, stride, k = (64, (16,), 2, 2) if quick else (256, (32, 64), 1, 4)
    data = make_splits(n, jax.random.key(0)[None])
    images, labels = data.images[0], data.labels[0]
    cfg = CNNConfig(channels=3, widths=widths, classes=SCENES.num_classes, stem_stride=stride)
    graphdef, params = nnx.split(ConvNet(cfg, rngs=nnx.Rngs(0)))
    net = nnx.merge(graphdef, params)
    out = net.forward(images)
    weights = params["head"]["kernel"][...]
    seeds = seed_masks(cams(out.features, weights, labels), labels, config=REFINE)
    bank = MemoryBank(SCENES.num_classes, k).init(out.features, seeds, key=jax.random.key(1))
    prdc = PRDC(out.features.shape[-1], key=jax.random.key(2))

    def make(method: str):
        def f(p, x, y, st, g):
            o = nnx.merge(graphdef, p).forward(x)
            w = p["head"]["kernel"]
            scores = refined_scores(method, o.features, w, y, config=REFINE, bank=st, prdc=g)
            return pseudo_masks(scores, y, x.shape[1])

        jitted = jax.jit(f)
        return lambda: jitted(params, images, labels, bank, prdc)

    return make("ropmb"), make("cam"), n
