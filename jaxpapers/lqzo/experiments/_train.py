"""The fine-tuning rows shared by the P02 accuracy experiments, with per-method learning rates.

Rows: first-order Adam on the full-precision parameters (upper bound), MeZO on the
full-precision parameters, QZO-style and LQZO on the quantized parameters' scales (relative
corrections ``delta``, :func:`jaxpapers.lqzo.merge_scaled`) at every bit width. Each ZO row picks
its learning rate from ``base * grid`` by validation accuracy of a pilot run (one seed, all grid
points in one vectorised program), then runs every seed at the chosen rate; test accuracy is
reported. A choice on the edge of the grid is recorded in the extras.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers.core.experiment import Context
from jaxpapers.core.pytrees import FAST_COMPILE
from jaxpapers.core.train import train
from jaxpapers.lqzo import lqzo, mezo, qzo, zeros_like_tree, zo_finetune

#: Shared ZO settings: perturbation size and the directional-derivative clip.
ZO = {"eps": 1e-2, "clip": 100.0}
#: LQZO's own settings: rank, V redrawn every nu steps, BAG entries, isotropic views.
LQZO = {"rank": 4, "nu": 10, "bag_k": 4, "noise": "bag", "isotropic": True}


def xent(logits: jax.Array, y: jax.Array) -> jax.Array:
    """Mean cross-entropy of integer labels."""
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


def accuracy(logits: Any, y: np.ndarray) -> float:
    """Accuracy in percent."""
    return float(100.0 * np.mean(np.argmax(np.asarray(logits), axis=1) == y))


#: ``evaluate(stacked_params, split) -> [accuracy per stacked entry]``, split "val" or "test".
Evaluate = Callable[[Any, str], list[float]]


class Quantized(NamedTuple):
    """One quantized model: loss of ``(delta, aux, batch)``, starting scales, frozen parts,
    evaluator and training data."""

    loss: Any
    scales0: Any
    aux: Any
    evaluate: Evaluate
    data: tuple[np.ndarray, ...]


class Problem(NamedTuple):
    """What the row runner needs: the float model, the quantized models, the training data."""

    fp_loss: Any
    fp_params: Any
    fp_aux: Any
    fp_eval: Evaluate
    quantized: dict[int, Quantized]
    data: tuple[np.ndarray, ...]


def _zo_optimizer(method: str):
    """``make_optimizer(key, learning_rate)`` of one ZO row."""
    if method == "MeZO":
        return lambda key, rate: mezo(rate, key=key, eps=1e-3)
    if method == "QZO-style":
        return lambda key, rate: qzo(rate, key=key, **ZO)
    return lambda key, rate: lqzo(rate, key=key, **ZO, **LQZO)


def _flatten_grid(tree: Any) -> Any:
    """``[S, H, ...]`` -> ``[S * H, ...]`` for the evaluators."""
    return jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), tree)


def run_rows(
    ctx: Context,
    prob: Problem,
    *,
    steps: int,
    fo_steps: int,
    batch: int,
    lr: dict[str, float],
    grid: tuple[float, ...],
    tune_steps: int,
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """All rows for all seeds; each (tuning or final) run is one compiled, vectorised program."""
    seeds = ctx.seed_list
    n = len(prob.data[-1])
    fast = ctx.pick(smoke=FAST_COMPILE, quick=None, full=None)

    def fo():
        # One Adam run per seed, stacked along a leading seed axis: the summed loss has
        # independent per-seed gradients and Adam is elementwise, so this equals separate runs.
        s = len(seeds)
        stacked = jax.tree.map(lambda x: jnp.broadcast_to(x, (s, *x.shape)), prob.fp_params)
        idx = np.stack(
            [np.random.default_rng(sd).integers(0, n, (fo_steps, batch)) for sd in seeds], axis=1
        )
        per_seed = jax.vmap(lambda p, b: prob.fp_loss(p, prob.fp_aux, b))
        res = train(
            lambda p, b, k: jnp.sum(per_seed(p, b)),
            stacked,
            optax.adam(lr["adam"]),
            lambda i: tuple(a[idx[i]] for a in prob.data),
            steps=fo_steps,
            key=jax.random.key(0),
            checkpoint_dir=ctx.checkpoint_dir("fo"),
            checkpoint_every=fo_steps,
        )
        return {"acc": prob.fp_eval(res.params, "test"), "loss": (res.losses / s).tolist()}

    def zo(method: str, bits: int | None):
        if bits is None:
            loss, start, aux, evaluate, data = (
                prob.fp_loss,
                prob.fp_params,
                prob.fp_aux,
                prob.fp_eval,
                prob.data,
            )
            base = lr["mezo"]
        else:
            q = prob.quantized[bits]
            loss, start, aux, evaluate, data = (
                q.loss,
                zeros_like_tree(q.scales0),
                q.aux,
                q.evaluate,
                q.data,
            )
            base = lr["scales"]
        make = _zo_optimizer(method)
        rates = [base * g for g in grid]
        kw = dict(batch_size=batch, compiler_options=fast)
        chosen, val = rates[0], []
        if len(rates) > 1:
            pilot = zo_finetune(
                loss,
                start,
                aux,
                make,
                data,
                steps=tune_steps,
                seeds=[seeds[0] + 1000],
                learning_rates=rates,
                **kw,
            )
            val = evaluate(_flatten_grid(pilot.params), "val")
            chosen = rates[int(np.argmax(val))]
        res = zo_finetune(
            loss,
            start,
            aux,
            lambda key: make(key, chosen),
            data,
            steps=steps,
            seeds=seeds,
            **kw,
        )
        return {
            "acc": evaluate(res.params, "test"),
            "loss": res.losses[0].tolist(),
            "lr": chosen,
            "val_by_lr": dict(zip([f"{r:.3g}" for r in rates], val, strict=False)),
            "lr_on_grid_edge": len(rates) > 1 and chosen in (rates[0], rates[-1]),
            "tuned": len(rates) > 1,
        }

    jobs: list[tuple[str, Callable[[], dict]]] = [
        ("FO full precision", fo),
        ("MeZO full precision", lambda: zo("MeZO", None)),
    ]
    for bits in prob.quantized:
        for method in ("QZO-style", "LQZO"):
            jobs.append((f"{method} INT{bits}", lambda m=method, b=bits: zo(m, b)))
    values: dict[str, list[float]] = {}
    extras: dict[str, Any] = {"train_loss_seed0": {}, "learning_rate": {}, "tuning": {}}
    for name, fn in jobs:
        r = ctx.cached(name.replace(" ", "_"), fn)
        values[name] = r["acc"]
        extras["train_loss_seed0"][name] = r["loss"]
        if "lr" in r:
            extras["learning_rate"][name] = r["lr"]
            extras["tuning"][name] = {
                "val_acc_by_lr": r["val_by_lr"],
                "edge": r["lr_on_grid_edge"],
                "tuned": r.get("tuned", True),
            }
    return values, extras


__all__ = ["LQZO", "ZO", "Evaluate", "Problem", "Quantized", "accuracy", "run_rows", "xent"]
