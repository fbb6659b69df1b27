"""Jitted pseudo-mask generators for ``benchmarks/segmentation.py`` (P12 rows)."""

from __future__ import annotations

from collections.abc import Callable

import jax

from jaxpapers.ropmb import PRDC, MemoryBank, pseudo_masks, refined_scores, seed_masks
from jaxpapers.ropmb import class_activation_maps as cams
from jaxpapers.ropmb.experiments._data import SCENES, make_splits
from jaxpapers.ropmb.experiments._pipeline import classifier_forward, init_classifier
from jaxpapers.ropmb.experiments._runs import REFINE


def ropmb_pseudo_mask_pair(quick: bool) -> tuple[Callable[[], object], Callable[[], object], int]:
    """``(ropmb, cam, images)``: zero-argument calls that map a batch of images to pseudo-masks,
    classifier forward included; RO-PMB with its bank (``K`` prototypes per class) and PRDC
    enrichment, CAM with the constant background score. Untrained weights (timing does not
    depend on them)."""
    n, width, k = (64, 32, 2) if quick else (256, 64, 4)
    data = make_splits(n, jax.random.key(0)[None])
    images, labels = data.images[0], data.labels[0]
    params = init_classifier(jax.random.key(0), width=width, classes=SCENES.num_classes)
    _, feats = classifier_forward(params, images)
    seeds = seed_masks(cams(feats, params["head_w"], labels), labels, config=REFINE)
    bank = MemoryBank(SCENES.num_classes, k).init(feats, seeds, key=jax.random.key(1))
    prdc = PRDC(feats.shape[-1], key=jax.random.key(2))

    def make(method: str):
        def f(p, x, y, st, g):
            _, a = classifier_forward(p, x)
            scores = refined_scores(method, a, p["head_w"], y, config=REFINE, bank=st, prdc=g)
            return pseudo_masks(scores, y, x.shape[1])

        jitted = jax.jit(f)
        return lambda: jitted(params, images, labels, bank, prdc)

    return make("ropmb"), make("cam"), n
