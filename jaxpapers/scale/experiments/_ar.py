"""The autoregressive variant on the 2-D checkerboard mixture, tokenised (2 tokens of 32 bins).

A conditional token model (label dropout 0.1) is pre-trained for ``ar_steps`` steps; CCA
fine-tunes it for ``ar_finetune`` more steps against itself as the frozen reference; SCALE trains
from scratch for ``ar_steps + ar_finetune`` steps (equal total steps); CFG on logits samples the
pre-trained conditional model with the scale picked on a validation draw. Samples are dequantised
uniformly inside their bins and scored with the exact class-conditional density.
"""

from __future__ import annotations

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
from jaxpapers.scale.experiments._mixture import study_jit

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

    def train_all(init, keys):
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
        return cond, cca, scale

    # Training keeps full optimisation: with FAST_COMPILE the quick token-model study cost more
    # (measured on a near-idle machine: 146.8 CPU-s against 68.7 with a fully optimised training).
    cond, cca, scale = study_jit(train_all, sizes)(init, keys)
    n = sizes.n_eval
    labels = jnp.arange(n, dtype=jnp.int32) % mix.num_classes
    nw, ns = len(W_GRID), len(seeds)

    def evaluate(cond, cca, scale):
        """Every sampler once, vmapped over one flat (job x seed) axis."""
        ref = mix.sample(jax.random.key(7), labels)
        val_ref = mix.sample(jax.random.key(8), labels)
        k_test, k_val = jax.random.key(41), jax.random.key(42)

        def score(mode, params, ws, keys, refs):  # params [jobs, seeds, ...]; the rest [jobs]
            jobs = ws.shape[0]
            flat = jax.tree.map(lambda a: a.reshape(jobs * ns, *a.shape[2:]), params)
            rep = np.repeat(np.arange(jobs), ns)

            def one(p, w, key, reference):
                out = ar_sample(model, p, labels, key=key, mode=mode, w=w)
                x = model.dequantise(out.tokens, jax.random.fold_in(key, 1))
                m = mixture_metrics(mix, x, labels, reference)
                return {"log_lik": m.log_lik, "precision": m.precision, "recall": m.recall}

            out = jax.vmap(one)(flat, ws[rep], keys[rep], refs[rep])
            return {k: v.reshape(jobs, ns) for k, v in out.items()}

        stack = lambda *ps: jax.tree.map(lambda *a: jnp.stack(a), *ps)
        one_pass = score(
            "one_pass",
            stack(cond, cca, scale),
            jnp.ones(3),
            jnp.stack([k_test] * 3),
            jnp.stack([ref] * 3),
        )
        cfg = score(
            "cfg",
            stack(*[cond] * (2 * nw)),
            jnp.concatenate([jnp.asarray(W_GRID)] * 2),
            jnp.stack([k_test] * nw + [k_val] * nw),
            jnp.stack([ref] * nw + [val_ref] * nw),
        )
        best = jnp.argmax(cfg["log_lik"][nw:], 0)
        idx = jnp.arange(ns)
        at = lambda i: {k: v[i] for k, v in one_pass.items()}
        rows = {
            "conditional (AR)": at(0),
            "CFG on logits (2 passes/token)": {k: v[:nw][best, idx] for k, v in cfg.items()},
            "CCA": at(1),
            "SCALE (AR)": at(2),
        }
        return rows, best

    rows, best = study_jit(evaluate, sizes, light=True)(cond, cca, scale)
    return {
        "rows": {r: {k: np.asarray(v).tolist() for k, v in s.items()} for r, s in rows.items()},
        "cfg_w": np.asarray(jnp.asarray(W_GRID)[best]).tolist(),
        "steps": {"conditional": sizes.ar_steps, "CCA": total, "SCALE": total},
    }
