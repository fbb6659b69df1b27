"""The autoregressive variant on the 2-D checkerboard mixture, tokenised (2 tokens of 32 bins).

A conditional token model (label dropout 0.1) is pre-trained for ``ar_steps`` steps; CCA
fine-tunes it for ``ar_finetune`` more steps against itself as the frozen reference; SCALE trains
from scratch for ``ar_steps + ar_finetune`` steps (equal total steps); CFG on logits samples the
pre-trained conditional model with the scale picked on a validation draw. Samples are dequantised
uniformly inside their bins and scored with the exact class-conditional density.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.scale import (
    ARMethod,
    ar_fit,
    ar_sample,
    checkerboard_mixture,
    mixture_metrics,
    token_model,
)

W_GRID = (1.0, 1.5, 2.0, 3.0)


def ar_study(sizes: Any, seeds: list[int]) -> dict[str, Any]:
    """Per-seed metrics of conditional, CFG-on-logits, CCA and SCALE token models (JSON-ready)."""
    mix = checkerboard_mixture(2)
    seeds_arr = jnp.asarray(seeds)
    model, init = token_model(
        mix.num_classes, seeds=seeds_arr, d_model=sizes.ar_width, num_layers=1
    )
    keys = jax.vmap(lambda s: jax.random.key(3000 + s))(seeds_arr)
    total = sizes.ar_steps + sizes.ar_finetune

    def train(method, params, steps, ref=None):
        return jax.vmap(
            lambda p, k, r: (
                ar_fit(
                    model, method, p, mix, key=k, steps=steps, batch=sizes.batch, ref_params=r
                ).params
            )
        )(params, keys, params if ref is None else ref)

    cond = train(ARMethod("conditional"), init, sizes.ar_steps)
    cca = train(ARMethod("cca", beta=sizes.cca_beta, lam=1.0), cond, sizes.ar_finetune, cond)
    scale = train(
        ARMethod("scale", w=sizes.scale_w, refresh=sizes.refresh, self_batch=sizes.self_batch),
        init,
        total,
    )[0]
    n = sizes.n_eval
    labels = jnp.arange(n, dtype=jnp.int32) % mix.num_classes
    ref, val_ref = mix.sample(jax.random.key(7), labels), mix.sample(jax.random.key(8), labels)

    @functools.partial(jax.jit, static_argnames="mode")
    def score(params, mode, w, key, reference):
        def one(p):
            out = ar_sample(model, p, labels, key=key, mode=mode, w=w)
            x = model.dequantise(out.tokens, jax.random.fold_in(key, 1))
            m = mixture_metrics(mix, x, labels, reference)
            return {"log_lik": m.log_lik, "precision": m.precision, "recall": m.recall}

        return jax.vmap(one)(params)

    k_test, k_val = jax.random.key(41), jax.random.key(42)
    by_w = [score(cond, "cfg", w, k_test, ref) for w in W_GRID]
    val = jnp.stack([score(cond, "cfg", w, k_val, val_ref)["log_lik"] for w in W_GRID])
    best = jnp.argmax(val, 0)
    idx = jnp.arange(best.shape[0])
    rows = {
        "conditional (AR)": score(cond, "one_pass", 1.0, k_test, ref),
        "CFG on logits (2 passes/token)": {
            k: jnp.stack([s[k] for s in by_w])[best, idx] for k in by_w[0]
        },
        "CCA": score(cca, "one_pass", 1.0, k_test, ref),
        "SCALE (AR)": score(scale, "one_pass", 1.0, k_test, ref),
    }
    return {
        "rows": {r: {k: np.asarray(v).tolist() for k, v in s.items()} for r, s in rows.items()},
        "cfg_w": np.asarray(jnp.asarray(W_GRID)[best]).tolist(),
        "steps": {"conditional": sizes.ar_steps, "CCA": total, "SCALE": total},
    }
