"""The autoregressive variant on the 2-D checkerboard mixture, tokenised (2 tokens of 32 bins).

A conditional token model (label dropout 0.1) is pre-trained for ``ar_steps`` steps; CCA
fine-tunes it for ``ar_finetune`` more steps against itself as the frozen reference; SCALE trains
from scratch for ``ar_steps + ar_finetune`` steps (equal total steps); CFG on logits samples the
pre-trained conditional model with the scale picked on a validation draw. Samples are dequantised
uniformly inside their bins and scored with the exact class-conditional density.
"""

from __future__ import annotations

from typing import NamedTuple

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
from jaxpapers.scale.experiments._config import Config

W_GRID = (1.0, 1.5, 2.0, 3.0)


class ARStudy(NamedTuple):
    """What :func:`ar_study` measures (per-seed lists, ready for ``result.json``).

    Attributes:
      rows: ``{row: {"log_lik", "precision", "recall": [per seed]}}``.
      cfg_w: the CFG scale chosen per seed on the validation draw.
      steps: the training steps of each model.
    """

    rows: dict[str, dict[str, list[float]]]
    cfg_w: list[float]
    steps: dict[str, int]


def ar_study(config: Config, seeds: list[int]) -> ARStudy:
    """Per-seed metrics of conditional, CFG-on-logits, CCA and SCALE token models."""
    mix = checkerboard_mixture(2)
    seeds_arr = jnp.asarray(seeds)
    model, init = token_model(
        mix.num_classes, seeds=seeds_arr, d_model=config.ar_width, num_layers=1
    )
    keys = jax.vmap(lambda s: jax.random.key(3000 + s))(seeds_arr)
    total = config.ar_steps + config.ar_finetune

    def train_all(init, keys):
        def train(method, params, steps, ref=None):
            return jax.vmap(
                lambda p, k, r: (
                    ar_fit(
                        model, method, p, mix, key=k, steps=steps, batch=config.batch, ref_params=r
                    ).params
                )
            )(params, keys, params if ref is None else ref)

        cond = train(ARMethod("conditional"), init, config.ar_steps)
        cca = train(ARMethod("cca", beta=config.cca_beta, lam=1.0), cond, config.ar_finetune, cond)
        scale = train(
            ARMethod(
                "scale", w=config.scale_w, refresh=config.refresh, self_batch=config.self_batch
            ),
            init,
            total,
        )[0]
        return cond, cca, scale

    cond, cca, scale = jax.jit(train_all)(init, keys)
    n = config.n_eval
    labels = jnp.arange(n, dtype=jnp.int32) % mix.num_classes
    nw, ns = len(W_GRID), len(seeds)

    def evaluate(cond, cca, scale):
        """Every sampler once, vmapped over one flat (job x seed) axis."""
        ref = mix.sample(labels, key=jax.random.key(7))
        val_ref = mix.sample(labels, key=jax.random.key(8))
        k_test, k_val = jax.random.key(41), jax.random.key(42)

        def score(mode, params, ws, keys, refs):  # params [jobs, seeds, ...]; the rest [jobs]
            jobs = ws.shape[0]
            flat = jax.tree.map(lambda a: a.reshape(jobs * ns, *a.shape[2:]), params)
            rep = np.repeat(np.arange(jobs), ns)

            def one(p, w, key, reference):
                out = ar_sample(model, p, labels, key=key, mode=mode, w=w)
                x = model.dequantise(out.tokens, key=jax.random.fold_in(key, 1))
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

    rows, best = jax.jit(evaluate)(cond, cca, scale)
    return ARStudy(
        rows={r: {k: np.asarray(v).tolist() for k, v in s.items()} for r, s in rows.items()},
        cfg_w=np.asarray(jnp.asarray(W_GRID)[best]).tolist(),
        steps={"conditional": config.ar_steps, "CCA": total, "SCALE": total},
    )
