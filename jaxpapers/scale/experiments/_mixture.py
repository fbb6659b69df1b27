"""The Gaussian-mixture test beds (2-D and 8-D): train every method over seeds, sample, score.

One call of :func:`mixture_study` trains the conditional model (for CFG), GFT, MG and SCALE for
the same number of Adam steps on fresh exact samples, vmapped over seeds, then draws labelled
samples with deterministic DDIM and scores them against exact samples of the same labels. The
guidance scale of CFG and GFT (chosen at sampling time) is picked per seed on a separate
validation draw from ``W_GRID``; MG and SCALE train one fixed scale each. SCALE's Diffusion-DPO
fine-tuning (pairs ranked by the true class log-likelihood) runs on the 2-D bed.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.metrics import sliced_wasserstein
from jaxpapers.scale import (
    Method,
    checkerboard_mixture,
    dpo_fit,
    fit,
    mixture_metrics,
    mlp_denoiser,
    rank_pairs,
    sample_cfg,
    sample_one_pass,
)

W_GRID = (1.0, 1.5, 2.0, 3.0)
METRICS = ("log_lik", "precision", "recall", "sw")


def _score(mix, x, labels, ref, key) -> dict[str, Array]:
    m = mixture_metrics(mix, x, labels, ref)
    sw = sliced_wasserstein(x, ref, key=key)
    return {"log_lik": m.log_lik, "precision": m.precision, "recall": m.recall, "sw": sw}


Array = jax.Array


def _pick_w(scores_by_w: list[dict[str, Array]]) -> tuple[dict[str, Array], Array]:
    """Per seed, the scores at the scale with the best validation log-likelihood."""
    val = jnp.stack([s["val"] for s in scores_by_w])  # [w, seeds]
    best = jnp.argmax(val, axis=0)
    pick = lambda name: jnp.stack([s[name] for s in scores_by_w])[best, jnp.arange(best.shape[0])]
    return {k: pick(k) for k in METRICS}, jnp.asarray(W_GRID)[best]


def mixture_study(sizes: Any, dim: int, seeds: list[int], *, with_dpo: bool) -> dict[str, Any]:
    """Train all methods on the ``dim``-D checkerboard mixture; return per-seed metrics.

    Returns:
      ``{"rows": {row: {metric: [per seed]}}, "w": {...}, "nfe": {...}}`` (JSON-ready).
    """
    mix = checkerboard_mixture(dim)
    seeds_arr = jnp.asarray(seeds)
    net, init = mlp_denoiser(
        dim, mix.num_classes, seeds=seeds_arr, hidden=sizes.hidden, depth=sizes.depth
    )
    train_keys = jax.vmap(lambda s: jax.random.key(1000 + s))(seeds_arr)
    n, steps = sizes.n_eval, sizes.sample_steps
    labels = jnp.arange(n, dtype=jnp.int32) % mix.num_classes
    ref = mix.sample(jax.random.key(7), labels)
    val_ref = mix.sample(jax.random.key(8), labels)
    k_test, k_val, k_sw = jax.random.key(11), jax.random.key(12), jax.random.key(13)

    methods = {
        "conditional": Method("conditional"),
        "gft": Method("gft"),
        "mg": Method("mg", w=sizes.mg_w, warmup=sizes.steps // 2),
        "scale": Method(
            "scale",
            w=sizes.scale_w,
            warmup=sizes.steps // 2,
            refresh=sizes.refresh,
            self_steps=steps,
            self_batch=sizes.self_batch,
            clip=float(jnp.max(jnp.abs(mix.means))) + 3.0 * float(jnp.sqrt(mix.var)),
        ),
    }
    trained = {}
    for name, method in methods.items():
        res = jax.vmap(
            lambda p, k, m=method: fit(net, m, p, mix, key=k, steps=sizes.steps, batch=sizes.batch)
        )(init, train_keys)
        trained[name] = res.params[0] if name == "scale" else res.params

    def one_pass(params, num_steps, key, scalar=1.0):
        return jax.vmap(
            lambda p: sample_one_pass(net, p, labels, key=key, num_steps=num_steps, scalar=scalar).x
        )(params)

    def cfg(params, num_steps, key, w):
        return jax.vmap(lambda p: sample_cfg(net, p, labels, key=key, num_steps=num_steps, w=w).x)(
            params
        )

    @jax.jit
    def score(xs, reference=ref):
        return jax.vmap(lambda x: _score(mix, x, labels, reference, k_sw))(xs)

    def tuned(sampler):
        by_w = []
        for w in W_GRID:
            s = score(sampler(w, k_test))
            s["val"] = score(sampler(w, k_val), val_ref)["log_lik"]
            by_w.append(s)
        return _pick_w(by_w)

    rows, chosen_w = {}, {}
    rows["CFG"], chosen_w["CFG"] = tuned(lambda w, k: cfg(trained["conditional"], steps, k, w))
    rows["CFG at SCALE's NFE"], chosen_w["CFG at SCALE's NFE"] = tuned(
        lambda w, k: cfg(trained["conditional"], max(steps // 2, 1), k, w)
    )
    rows["conditional (no guidance)"] = score(one_pass(trained["conditional"], steps, k_test))
    rows["GFT"], chosen_w["GFT"] = tuned(lambda w, k: one_pass(trained["gft"], steps, k, 1.0 / w))
    rows["MG"] = score(one_pass(trained["mg"], steps, k_test))
    rows["SCALE"] = score(one_pass(trained["scale"], steps, k_test))
    if with_dpo:
        rows["SCALE+DPO"] = score(one_pass(_dpo(net, mix, trained["scale"], sizes), steps, k_test))
    nfe = {
        "CFG": 2 * steps,
        "CFG at SCALE's NFE": 2 * max(steps // 2, 1),
        "GFT": steps,
        "MG": steps,
        "SCALE": steps,
    }
    exact = _score(mix, mix.sample(jax.random.key(99), labels), labels, ref, k_sw)
    return {
        "rows": {r: {k: np.asarray(v).tolist() for k, v in s.items()} for r, s in rows.items()},
        "w": {r: np.asarray(v).tolist() for r, v in chosen_w.items()},
        "nfe": nfe,
        "exact_samples": {k: float(v) for k, v in exact.items()},
        "trained_w": {"MG": sizes.mg_w, "SCALE": sizes.scale_w},
    }


def _dpo(net, mix, params, sizes):
    """Diffusion-DPO on pairs of SCALE's own samples ranked by the true log p(x | c)."""
    n = sizes.dpo_pairs
    labels = jnp.arange(n, dtype=jnp.int32) % mix.num_classes

    def one_seed(p, seed):
        ka, kb, kf = jax.random.split(jax.random.fold_in(jax.random.key(21), seed), 3)
        draw = lambda k: sample_one_pass(net, p, labels, key=k, num_steps=sizes.sample_steps).x
        xa, xb = draw(ka), draw(kb)
        reward = lambda x: jax.vmap(mix.log_prob)(x, labels)
        pairs = rank_pairs(xa, xb, labels, reward(xa), reward(xb))
        out, _ = dpo_fit(
            net, p, pairs, key=kf, steps=sizes.dpo_steps, batch=sizes.batch, beta=sizes.dpo_beta
        )
        return out

    return jax.vmap(one_seed)(params, jnp.arange(jax.tree.leaves(params)[0].shape[0]))
