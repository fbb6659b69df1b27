"""P08 STEAM: segment a synthetic video with a (random) VIS model plus STEAM's routed adapters,
and check that DASH folds into the neck exactly.

Run: ``python examples/steam.py``.

What you should see: the largest difference between DASH applied after the neck and DASH folded
into the neck's weights (float32 rounding, about 1e-6: the fold is exact algebra), the routing
weights of the video over the two experts (they sum to 1), and the track ids found in each of
the 4 frames (-1 is background). The model is random, so the tracks only show the API; expected
are an exact fold and weights that sum to 1, which the script checks.
"""

import jax
import jax.numpy as jnp

from jaxpapers.core.data.scenes import SceneConfig
from jaxpapers.steam import (
    VISConfig,
    dash_init,
    decode,
    encode,
    fold_scale_shift,
    identity_projectors,
    init_adapters,
    init_vis,
    make_videos,
    scale_shift,
    segment,
)

cfg = VISConfig(size=16, width=8, dim=8, queries=4, experts=2, rank=2)
graphdef, params = init_vis(config=cfg, key=jax.random.key(0))
scenes = SceneConfig(size=16, num_objects=2, min_radius=2.5, max_radius=4.5)


@jax.jit
def demo(key):
    """One video: DASH fold check, routed STEAM decode, tracked segmentation (one compile)."""
    kv, ka, kk = jax.random.split(key, 3)
    video = make_videos(1, 4, config=scenes, key=kv, pool=jnp.array([0, 1])).image[0]
    feats = encode(graphdef, params, video)  # [T, 8, 8, D] pixel features before DASH
    ss = dash_init(feats, jnp.zeros(cfg.dim), jnp.ones(cfg.dim))  # standardise the features
    kernel, bias = fold_scale_shift(params["neck"]["kernel"], params["neck"]["bias"], ss)
    folded = encode(graphdef, {**params, "neck": {"kernel": kernel, "bias": bias}}, video)
    fold_error = jnp.max(jnp.abs(folded - scale_shift(feats, ss)))
    adapters = init_adapters(config=cfg, key=ka)
    adapters = adapters._replace(keys=jax.random.normal(kk, (cfg.experts, cfg.dim)))
    proj = identity_projectors(config=cfg)
    out = decode(params, adapters, proj, feats, config=cfg, active=jnp.ones(2))
    return fold_error, out.video_weights, segment(out, jnp.ones(cfg.classes)).tracks


fold_error, weights, tracks = demo(jax.random.key(1))
print("DASH fold error:", float(fold_error))
print("routing weights (sum to 1):", weights)
print("track ids per frame:", [sorted(set(map(int, jnp.unique(t)))) for t in tracks])
ok = float(fold_error) < 1e-5 and abs(float(weights.sum()) - 1.0) < 1e-5
print(
    "Expected: DASH folds into the neck exactly (float32 rounding) and the routing weights sum "
    "to 1: " + ("as expected." if ok else "NOT as expected.")
)
