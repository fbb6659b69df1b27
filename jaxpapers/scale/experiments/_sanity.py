"""``sanity_limits``: the limits in which every method is plain conditional training, and the
exactly guided Gaussian-mixture target that CFG approximates.

Rows (per seed):

* the largest difference between CFG samples at ``w = 1`` and the conditional model's one-pass
  samples (same key); GFT's loss with ``beta_min = 1``, MG's with ``w = 1`` and SCALE's with
  ``w = 1`` and no self term, each minus the conditional loss (same key and batch);
* for the trained conditional model, the mean squared error of its CFG prediction (``w = 3``)
  against the exact guided prediction, and (baseline) against the exact *unguided* conditional
  prediction: CFG should be closer to the guided target it approximates.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.diffusion import VPSchedule
from jaxpapers.scale import (
    Method,
    checkerboard_mixture,
    conditional_loss,
    fit,
    gft_loss,
    mg_loss,
    mlp_denoiser,
    noise_batch,
    sample_cfg,
    sample_one_pass,
    scale_loss,
)

SCH = VPSchedule()
GUIDE_W = 3.0


def sanity_study(sizes: Any, seeds: list[int]) -> dict[str, Any]:
    mix = checkerboard_mixture(2)
    seeds_arr = jnp.asarray(seeds)
    net, init = mlp_denoiser(
        2, mix.num_classes, seeds=seeds_arr, hidden=sizes.hidden, depth=sizes.depth
    )
    keys = jax.vmap(lambda s: jax.random.key(500 + s))(seeds_arr)
    params = jax.vmap(
        lambda p, k: (
            fit(
                net, Method("conditional"), p, mix, key=k, steps=sizes.steps, batch=sizes.batch
            ).params
        )
    )(init, keys)
    labels = jnp.arange(256, dtype=jnp.int32) % mix.num_classes

    def limits(p, k):
        kd, kl, ks = jax.random.split(k, 3)
        x0, lab = mix.draw(kd, sizes.batch)
        cond = conditional_loss(net, p, x0, lab, key=kl, schedule=SCH)
        cond0 = conditional_loss(net, p, x0, lab, key=kl, schedule=SCH, p_uncond=0.0)
        gft = gft_loss(net, p, x0, lab, key=kl, schedule=SCH, beta_min=1.0)
        mg = mg_loss(net, p, p, x0, lab, key=kl, schedule=SCH, w=1.0)
        sc = scale_loss(net, (p, p), x0, lab, x0, lab, key=kl, schedule=SCH, w=1.0, self_weight=0.0)
        x_cfg = sample_cfg(net, p, labels, key=ks, num_steps=sizes.sample_steps, w=1.0).x
        x_one = sample_one_pass(net, p, labels, key=ks, num_steps=sizes.sample_steps).x
        return {
            "cfg": jnp.max(jnp.abs(x_cfg - x_one)),
            "gft": jnp.abs(gft - cond),
            "mg": jnp.abs(mg - cond),
            "scale": jnp.abs(sc - cond0),
        }

    def guided_error(p, k):
        kd, kn = jax.random.split(k)
        x0, lab = mix.draw(kd, 1024)
        n = noise_batch(x0, kn, SCH)
        t = 0.05 + 0.9 * n.t  # away from the ends, where eps is nearly trivial
        a, s = SCH.alpha(t)[:, None], SCH.sigma(t)[:, None]
        x_t = a * x0 + s * n.eps
        one = jnp.ones_like(t)
        e_c = net(p, x_t, t, lab, one)
        e_u = net(p, x_t, t, jnp.full_like(lab, mix.num_classes), one)
        cfg = e_u + GUIDE_W * (e_c - e_u)
        exact_g = jax.vmap(lambda x, tt, c: mix.guided_eps(x, tt, c, GUIDE_W, SCH))(x_t, t, lab)
        exact_c = jax.vmap(lambda x, tt, c: mix.eps(x, tt, c, SCH))(x_t, t, lab)
        err = lambda ref: jnp.mean(jnp.sum((cfg - ref) ** 2, -1))
        return {"to_guided": err(exact_g), "to_conditional": err(exact_c)}

    eval_keys = jax.vmap(lambda s: jax.random.key(600 + s))(seeds_arr)
    lim = jax.vmap(limits)(params, eval_keys)
    ge = jax.vmap(guided_error)(params, eval_keys)
    return {k: np.asarray(v).tolist() for k, v in {**lim, **ge}.items()}
