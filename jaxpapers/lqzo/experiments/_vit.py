"""P02 cross-modality experiment: a small ViT pretrained in-repo on centred digits, quantized to
INT4 / INT2 (patch embedding kept in float) and fine-tuned on the other digits shifted by one
pixel right and down. The quantized models hold their codes one per byte
(:func:`._train.one_byte_codes`), so the INT4 and INT2 rows of a method train in one program."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.pytrees import stack_trees
from jaxpapers.core.train import train
from jaxpapers.lqzo import merge_scaled, quantize_linears, split_scales
from jaxpapers.lqzo._finetune import zeros_like_tree
from jaxpapers.lqzo.experiments._data import digits_transfer
from jaxpapers.lqzo.experiments._train import (
    LQZO,
    ZO,
    Problem,
    Quantized,
    make_evaluator,
    one_byte_codes,
    run_rows,
    xent,
)


def run_vit(ctx: Context, config: Any) -> Outcome:
    """Rows of the ViT / shifted-digits experiment (``config.vit``; see the package docstring)."""
    from jaxpapers.core.nn.vit import ViT, ViTConfig

    sz = config.vit
    src, tgt = digits_transfer(0)
    n = len(tgt.y) // 2
    # Validation: the last n_val of the target's training half (tuning only); test: other half.
    n_fit = n - sz.n_val
    data = (tgt.x[:n_fit], tgt.y[:n_fit])
    splits = {
        "val": (jnp.asarray(tgt.x[n_fit:n]), tgt.y[n_fit:n]),
        "test": (jnp.asarray(tgt.x[n:]), tgt.y[n:]),
    }
    # One jitted initialiser (built eagerly, every initialiser compiled a program of its own);
    # parameters within ~1 float32 ulp of the eager build (erf_inv compiled in another context).
    build = lambda: nnx.split(ViT(ViTConfig(), rngs=nnx.Rngs(0)), nnx.Param, ...)
    graphdef = nnx.eval_shape(build)[0]
    params0, rest = jax.jit(lambda: build()[1:])()

    def loss(p, aux, b):
        return xent(nnx.merge(graphdef, p, aux)(b[0]), b[1])

    idx = np.random.default_rng(0).integers(0, len(src.y), (sz.pretrain_steps, 64))
    pre = train(
        lambda p, b, k: loss(p, rest, b),
        # Host copies: train() copies its inputs, eagerly (one compile per leaf shape) for
        # device arrays.
        jax.tree.map(np.asarray, params0),
        optax.adam(1e-3),
        lambda i: (src.x[idx[i]], src.y[idx[i]]),
        steps=sz.pretrain_steps,
        key=jax.random.key(0),
        checkpoint_dir=ctx.checkpoint_dir("vit_pretrain"),
        checkpoint_every=sz.pretrain_steps,
    )
    params = pre.params

    def stack(tree):
        return jax.tree.map(lambda x: x[None], tree)

    # The validation split serves the learning-rate tuning only: not evaluated without a grid.
    tuned = len(sz.lr_grid) > 1
    eval_splits = {k: ((x,), y) for k, (x, y) in splits.items() if tuned or k != "val"}
    fp_apply = jax.jit(lambda p, consts, inputs: nnx.merge(graphdef, p, consts)(inputs[0]))
    fp_eval = make_evaluator(fp_apply, rest, eval_splits)

    pretrained = nnx.merge(graphdef, params, rest)

    def q_loss(d, aux, b):
        return xent(merge_scaled(gd, aux[0], d, aux[1])(b[0]), b[1])

    @jax.jit
    def q_apply(d, consts, inputs):
        # One jitted function for every bit width: their evaluators share its program.
        return merge_scaled(gd, consts[0], d, consts[1])(inputs[0])

    before = {
        "pretraining loss, last step (centred digits)": float(pre.losses[-1]),
        "full precision": fp_eval(stack(params))["test"][0],
    }
    # Codes one per byte: the INT4 and INT2 models share one structure, hence one loss, one
    # training program per ZO method and one evaluator program.
    gd = None
    q_aux, q_eval = [], {}
    for bits in sz.bits:
        qmodel = nnx.clone(pretrained)
        quantize_linears(qmodel, bits=bits, group_size=16, where=lambda path, m: path != ("embed",))
        gd_b, s0, qrest = split_scales(one_byte_codes(qmodel))
        if gd is not None and gd_b != gd:
            raise ValueError(f"INT{bits} model's structure differs from the first bit width's")
        gd = gd_b
        q_eval[bits] = make_evaluator(q_apply, (s0, qrest), eval_splits)
        before[f"INT{bits}"] = q_eval[bits](stack(zeros_like_tree(s0)))["test"][0]
        q_aux.append((s0, qrest))
    quantized = Quantized(
        tuple(sz.bits), q_loss, q_aux[0][0], stack_trees(q_aux, host=True), q_eval, data
    )

    prob = Problem(loss, params, rest, fp_eval, quantized, data)
    values, extras = run_rows(
        ctx,
        prob,
        bed="vit_digits",
        steps=sz.steps,
        fo_steps=sz.fo_steps,
        batch=sz.batch,
        lr=sz.lr,
        grid=sz.lr_grid,
        tune_steps=sz.tune_steps,
    )
    extras["accuracy_before_finetuning"] = before
    extras["setting"] = {
        "model": "ViT 8x8, patch 2, dim 64, depth 2, pretrained in-repo (Adam) on centred "
        "digits; patch embedding kept in float",
        "task": "the other half of sklearn digits, shifted one pixel right and down",
        "n_train": n_fit,
        "n_val": sz.n_val,
        "validation_evaluated": tuned,
        "n_test": len(splits["test"][1]),
        "sizes": sz._asdict(),
        "zo": ZO,
        "lqzo": LQZO,
        "group_size": 16,
    }
    return Outcome(values, extras)


__all__ = ["run_vit"]
