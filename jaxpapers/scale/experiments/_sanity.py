"""``sanity_limits``: the limits in which every method is plain conditional training, and the
exactly guided Gaussian-mixture target that CFG approximates.

Rows (per seed):

* the largest difference between CFG samples at ``w = 1`` and the conditional model's one-pass
  samples (same key); GFT's loss with ``beta_min = 1``, MG's with ``w = 1`` and SCALE's with
  ``w = 1`` and no self term, each minus the conditional loss (same key and batch);
* for the trained conditional model, the mean squared error of its CFG prediction (``w = 3``)
  against the exact guided prediction, and (baseline) against the exact *unguided* conditional
  prediction: CFG should be closer to the guided target it approximates.

The conditional model is the one the 2-D mixture study trains for CFG (same seeds); the study
computes these numbers inside its evaluation program (:func:`sanity_numbers`; the sampler row
compares the study's CFG draw at ``w = 1`` with its one-pass draw of the conditional model, both
at the test key on ``n_eval`` labels), so the sanity check costs no training and no program of
its own.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxpapers.core.diffusion import VPSchedule
from jaxpapers.scale import (
    conditional_loss,
    gft_loss,
    mg_loss,
    noise_batch,
    scale_loss,
)
from jaxpapers.scale.experiments._config import Config

SCH = VPSchedule()
GUIDE_W = 3.0


def sanity_numbers(net: Any, mix: Any, params: Any, config: Config, seeds: jax.Array) -> dict:
    """The loss-limit and guided-target rows for the seed-stacked conditional ``params``
    (traceable; ``[seeds]`` each). The sampler row (CFG at ``w = 1`` against the one-pass
    sampler) comes from the study's own evaluation draws, which include both at the same key."""

    def limits(p, k):
        kd, kl = jax.random.split(k)
        x0, lab = mix.draw(config.batch, key=kd)
        cond = conditional_loss(net, p, x0, lab, key=kl, schedule=SCH)
        cond0 = conditional_loss(net, p, x0, lab, key=kl, schedule=SCH, p_uncond=0.0)
        gft = gft_loss(net, p, x0, lab, key=kl, schedule=SCH, beta_min=1.0)
        mg = mg_loss(net, p, p, x0, lab, key=kl, schedule=SCH, w=1.0)
        sc = scale_loss(net, (p, p), x0, lab, x0, lab, key=kl, schedule=SCH, w=1.0, self_weight=0.0)
        return {
            "gft": jnp.abs(gft - cond),
            "mg": jnp.abs(mg - cond),
            "scale": jnp.abs(sc - cond0),
        }

    def guided_error(p, k):
        kd, kn = jax.random.split(k)
        x0, lab = mix.draw(1024, key=kd)
        n = noise_batch(x0, key=kn, schedule=SCH)
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

    eval_keys = jax.vmap(lambda s: jax.random.key(600 + s))(seeds)
    lim = jax.vmap(limits)(params, eval_keys)
    ge = jax.vmap(guided_error)(params, eval_keys)
    return {**lim, **ge}
