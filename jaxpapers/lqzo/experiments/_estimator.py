"""P02 estimator quality: one-step LQZO vs QZO-style estimates against the true gradient.

Layer: the top encoder layer of all-MiniLM-L6-v2, every linear layer quantized group-wise
(``group_size`` codes per scale); its scale corrections ``delta`` are the parameters, the loss is
cross-entropy of a nearest-centroid head on a batch of VADER entries; the five lower layers are
frozen, quantized alike at ``--full`` and kept in float at the quick size (``quantize_lower``:
one compiled lower stack serves both bit widths; the quantized top layer, whose scale gradient
is estimated, is the same). The true gradient ``G = dL/d delta`` at ``delta = 0`` comes from
backprop.

The loss is :func:`small_loss_xent` (cross-entropy that stays accurate when tiny): with
``jax.nn.log_softmax`` a batch that the head separates well (INT2, seed 1, quick) had a loss of a
few float32 ulps, both perturbed losses were identical and every estimate was exactly 0.

Per bit width and seed (a different batch and a different set of directions per seed), both
estimators draw ``n`` directions and report the mean normalised error
``E||g_hat - G||^2 / ||G||^2`` (the row value, lower is better), the mean cosine
``<g_hat, G> / (|g_hat| |G|)`` and their ratios. For any unbiased direction with
``E[Z Z^T] = I`` the first is about ``d + 1`` (``d`` = number of scales) and the cosine about
``sqrt(2 / (pi d))``, whatever the rank, unless the gradient lives in the perturbation's
subspace: the measurement shows whether the layer's gradient is low rank enough for that. Each
leaf's gradient effective rank (entropy effective rank ``exp H(sigma / sum sigma)``, Roy and
Vetterli 2007) is reported in the natural ``[G, N]`` view and LQZO's near-square view.

Programs: one compiled program per estimator configuration and one for the backprop gradient.
The quantized layers hold their codes one per byte (:func:`._train.one_byte_codes`: same grid,
same weights), so the INT4 and INT2 layers share every program. The lower layers run through one
compiled encoder layer shared by all five, and the backprop gradient is computed once per batch
and passed to the forward-only estimator programs.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.lqzo import (
    estimate_to_gradient,
    make_config,
    matrix_view_shape,
    merge_scaled,
    quantize_linears,
    split_scales,
    zo_estimate,
)
from jaxpapers.lqzo._finetune import zeros_like_tree
from jaxpapers.lqzo.experiments._data import vader_tokens
from jaxpapers.lqzo.experiments._text import apply_layer
from jaxpapers.lqzo.experiments._train import LQZO, ZO, one_byte_codes


@functools.partial(jax.jit, static_argnums=0)
def _embed_jit(model_def, state, ids):
    return nnx.merge(model_def, state).embed(ids)


def effective_rank(m: np.ndarray) -> float:
    """Entropy effective rank ``exp(-sum p log p)``, ``p = sigma / sum(sigma)``."""
    s = np.linalg.svd(np.asarray(m, np.float64), compute_uv=False)
    p = s / max(s.sum(), 1e-300)
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def _configs() -> dict[str, Any]:
    return {
        "QZO-style": make_config(**ZO),
        "LQZO": make_config(
            **ZO,
            **{k: LQZO[k] for k in ("rank", "noise", "bag_k")},
            isotropic=LQZO["isotropic"],
            fused=True,
        ),
        "LQZO natural view": make_config(
            **ZO, rank=LQZO["rank"], noise="bag", bag_k=LQZO["bag_k"], isotropic=False
        ),
    }


def small_loss_xent(logits: jax.Array, y: jax.Array) -> jax.Array:
    """Mean cross-entropy ``logsumexp(l) - l_y`` that keeps its precision when it is tiny.

    ``jax.nn.log_softmax`` forms ``log(1 + sum_{j != y} exp(l_j - l_y))`` as ``log`` of a float32
    sum that rounds to 1 once the other classes' terms fall below ``2^-24``: a well separated
    batch then has a loss of a few ulps, and the two-point difference ``L(+eps) - L(-eps)`` is
    exactly 0 (INT2, seed 1 of the quick run: loss ``2^-23 / 16``, every estimate 0, normalised
    error exactly 1). Here ``d = l - l_y``, ``m = max d`` and the loss is
    ``m + log1p(sum_{j != argmax} exp(d_j - m))``: the same value, accurate to float32 relative
    precision however small.
    """
    d = logits - jnp.take_along_axis(logits, y[:, None], axis=1)
    m = jnp.max(d, axis=1, keepdims=True)
    top = jax.nn.one_hot(jnp.argmax(d, axis=1), d.shape[1], dtype=bool)
    rest = jnp.sum(jnp.where(top, 0.0, jnp.exp(d - m)), axis=1)
    return jnp.mean(m[:, 0] + jnp.log1p(rest))


def _loss(d, gd, s0, rest, h, mask, y):
    """Cross-entropy of a nearest-centroid head built from the batch's starting features."""
    from jaxpapers.core.nn.bert import mean_pool

    pooled = mean_pool(merge_scaled(gd, s0, zeros_like_tree(s0), rest)(h, mask), mask)
    mu = jnp.mean(pooled, 0)
    w = jnp.stack([jnp.mean(pooled, 0, where=(y == c)[:, None]) for c in (0, 1)]).T - mu[:, None]
    w = jax.lax.stop_gradient(w / jnp.linalg.norm(w, axis=0, keepdims=True))
    out = mean_pool(merge_scaled(gd, s0, d, rest)(h, mask), mask) - jax.lax.stop_gradient(mu)[None]
    return small_loss_xent(10.0 * out @ w, y)


@functools.partial(jax.jit, static_argnums=0)
def true_gradient(gd, s0, rest, h, mask, y):
    """Backprop gradient of the loss in ``delta`` at ``delta = 0``."""
    return jax.grad(_loss)(zeros_like_tree(s0), gd, s0, rest, h, mask, y)


@functools.partial(jax.jit, static_argnums=0)
def estimator_quality(gd, s0, rest, h, mask, y, config, seeds, grad):
    """Mean normalised squared error and mean cosine of the estimates for ``seeds [n, 2]``.

    ``grad`` is :func:`true_gradient` of the same batch, passed in so that this program (compiled
    once per estimator configuration) holds forward passes only.
    """
    delta = zeros_like_tree(s0)
    g_flat = jnp.concatenate([x.reshape(-1) for x in jax.tree.leaves(grad)])
    value = lambda d: _loss(d, gd, s0, rest, h, mask, y)

    def one(s):
        est = zo_estimate(value, delta, s, config=config)
        leaves = jax.tree.leaves(estimate_to_gradient(est, delta, config=config))
        gh = jnp.concatenate([x.reshape(-1) for x in leaves])
        err = jnp.sum((gh - g_flat) ** 2) / jnp.sum(g_flat**2)
        norms = jnp.linalg.norm(gh) * jnp.linalg.norm(g_flat)
        return err, jnp.sum(gh * g_flat) / jnp.maximum(norms, 1e-30)

    err, cos = jax.lax.map(one, seeds)
    return jnp.mean(err), jnp.mean(cos)


def run_estimator(ctx: Context, config: Any, *, study: str = "estimator") -> Outcome:
    """Rows of the estimator-quality experiment (see the module docstring).

    ``study``: the field of ``config`` with its sizes (``"estimator"``, or ``"estimator_cpu"``
    for the CPU-sized ``--full`` study).
    """
    from jaxpapers.core.nn.bert import load_minilm

    sz = getattr(config, study)
    data = vader_tokens(sz.est_pool)
    base = load_minilm()
    values: dict[str, list[float]] = {}
    cosines: dict[str, list[float]] = {}
    ranks: dict[str, dict[str, float]] = {}
    float_layers = None if sz.quantize_lower else [nnx.split(x) for x in base.layers[:-1]]
    base_def, base_state = nnx.split(base)
    last = len(base.layers) - 1
    for bits in sz.bits:
        model = nnx.clone(base)
        quantize_linears(
            model,
            bits=bits,
            group_size=sz.est_group,
            where=None if sz.quantize_lower else lambda path, m: path[:2] == ("layers", last),
        )
        # Codes one per byte: the INT4 and INT2 layers share every compiled program.
        one_byte_codes(model)
        top = model.layers[-1]
        # Embeddings are never quantized: one compiled embedding serves every bit width.
        layers = float_layers or [nnx.split(layer) for layer in model.layers[:-1]]

        def lower(ids, mask, layers=layers):
            # One compiled encoder layer serves all five lower layers (they share a graph); with
            # float lower layers (quantize_lower=False) it also serves both bit widths.
            h = _embed_jit(base_def, base_state, ids)
            for layer_def, state in layers:
                h = apply_layer(layer_def, state, h, mask)
            return h

        gd, s0, rest = split_scales(top)
        for seed in ctx.seed_list:
            rng = np.random.default_rng(seed)
            pick = rng.choice(sz.est_pool, sz.est_batch, replace=False)
            mask, y = jnp.asarray(data.mask[pick]), jnp.asarray(data.y[pick])
            h = lower(jnp.asarray(data.ids[pick]), mask)
            batch = (h, mask, y)
            grad = true_gradient(gd, s0, rest, *batch)
            if seed == ctx.seed_list[0]:
                nat, iso = [], []
                for g in jax.tree.leaves(grad):
                    g = np.asarray(g)
                    nat.append(effective_rank(g))
                    iso.append(effective_rank(g.reshape(matrix_view_shape(g.shape, True))))
                ranks[f"INT{bits}"] = {
                    "natural_view_mean": float(np.mean(nat)),
                    "isotropic_view_mean": float(np.mean(iso)),
                    "natural_view_per_leaf": nat,
                    "isotropic_view_per_leaf": iso,
                    "natural_view_shapes": [list(np.shape(g)) for g in jax.tree.leaves(grad)],
                    "perturbation_rank": LQZO["rank"],
                    "num_scales": int(sum(np.size(g) for g in jax.tree.leaves(grad))),
                }
            seeds = jax.random.bits(jax.random.key(seed), (sz.est_dirs, 2), jnp.uint32)
            for name, cfg in _configs().items():
                if not ctx.runs(f"{name} INT{bits}"):
                    continue
                err, cos = estimator_quality(gd, s0, rest, *batch, cfg, seeds, grad)
                row = f"{name} INT{bits}"
                values.setdefault(row, []).append(float(err))
                cosines.setdefault(row, []).append(float(cos))
    ratios = {
        f"INT{b}": {
            "variance_ratio_qzo_over_lqzo": float(
                np.mean(values[f"QZO-style INT{b}"]) / np.mean(values[f"LQZO INT{b}"])
            ),
            "cosine_ratio_lqzo_over_qzo": float(
                np.mean(cosines[f"LQZO INT{b}"]) / np.mean(cosines[f"QZO-style INT{b}"])
            ),
        }
        for b in sz.bits
    }
    return Outcome(
        values,
        {
            "mean_cosine_to_true_gradient": cosines,
            "ratios": ratios,
            "gradient_effective_rank": ranks,
            "setting": {
                "layer": "all-MiniLM-L6-v2 top encoder layer, quantized scales (relative delta)",
                "lower_layers": "quantized like the top layer"
                if sz.quantize_lower
                else "kept in float (shared by both bit widths)",
                "group_size": sz.est_group,
                "directions_per_seed": sz.est_dirs,
                "batch": sz.est_batch,
                "zo": ZO,
                "lqzo": LQZO,
            },
        },
    )


__all__ = ["effective_rank", "run_estimator", "small_loss_xent"]
