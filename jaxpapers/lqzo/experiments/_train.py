"""The fine-tuning rows shared by the P02 accuracy experiments, with per-method learning rates.

Rows: first-order Adam on the full-precision parameters (upper bound), MeZO on the
full-precision parameters, QZO-style and LQZO on the quantized parameters' scales (relative
corrections ``delta``, :func:`jaxpapers.lqzo.merge_scaled`) at every bit width. Each ZO row picks
its learning rate from ``base * grid`` by validation accuracy of a pilot run (one seed, all grid
points in one vectorised program), then runs every seed at the chosen rate; test accuracy is
reported. When the pilot would be as long as the run (``tune_steps >= steps``, the smoke size)
every (seed, rate) pair runs in one program and the rate with the best seed-mean validation
accuracy is chosen. A choice on the edge of the grid is recorded in the extras.
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


#: ``evaluate(stacked_params) -> {"val": [...], "test": [...]}``: accuracy per stacked entry.
Evaluate = Callable[[Any], dict[str, list[float]]]


def make_evaluator(
    apply: Callable[..., jax.Array],
    consts: Any,
    splits: dict[str, tuple[Any, np.ndarray]],
    compiler_options: dict[str, Any] | None = None,
) -> Evaluate:
    """One compiled program per model for every split and any number of stacked parameters.

    ``apply(params, consts, inputs) -> logits`` for one (unstacked) parameter set; ``splits``
    maps a split name to ``(inputs, labels)`` (inputs a pytree of ``[N, ...]`` arrays). The
    splits are concatenated and passed as arguments (not baked in as constants), and stacked
    parameters are evaluated one entry at a time through the same program, so the number of
    entries (a pilot's learning rates, the seeds, one "before" model) never recompiles.
    """
    names = list(splits)
    inputs = jax.tree.map(lambda *a: jnp.concatenate(a), *[splits[k][0] for k in names])
    bounds = np.cumsum([0] + [len(splits[k][1]) for k in names])
    compiled = {}

    def evaluate(stacked: Any) -> dict[str, list[float]]:
        host = jax.tree.map(np.asarray, stacked)
        count = jax.tree.leaves(host)[0].shape[0]
        out: dict[str, list[float]] = {k: [] for k in names}
        for i in range(count):
            params = jax.tree.map(lambda a, i=i: a[i], host)
            if "f" not in compiled:
                lowered = jax.jit(apply).lower(params, consts, inputs)
                compiled["f"] = lowered.compile(compiler_options)
            logits = np.asarray(compiled["f"](params, consts, inputs))
            for j, k in enumerate(names):
                out[k].append(accuracy(logits[bounds[j] : bounds[j + 1]], splits[k][1]))
        return out

    return evaluate


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
        return {"acc": prob.fp_eval(res.params)["test"], "loss": (res.losses / s).tolist()}

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
        if len(rates) > 1 and tune_steps >= steps:
            # Joint tuning (the pilot would be as long as the run): every (seed, rate) pair in
            # one program; the rate with the best seed-mean validation accuracy is chosen and
            # its runs' test accuracies are reported.
            res = zo_finetune(
                loss, start, aux, make, data, steps=steps, seeds=seeds, learning_rates=rates, **kw
            )
            acc = evaluate(_flatten_grid(res.params))
            by_rate = {n: np.asarray(v).reshape(len(seeds), len(rates)) for n, v in acc.items()}
            val = by_rate["val"].mean(0).tolist()
            best = int(np.argmax(val))
            return {
                "acc": by_rate["test"][:, best].tolist(),
                "loss": res.losses[0, best].tolist(),
                "lr": rates[best],
                "val_by_lr": dict(zip([f"{r:.3g}" for r in rates], val, strict=True)),
                "lr_on_grid_edge": best in (0, len(rates) - 1),
                "tuned": True,
                "protocol": "joint: all seeds at every rate, seed-mean validation accuracy",
            }
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
            val = evaluate(_flatten_grid(pilot.params))["val"]
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
            "acc": evaluate(res.params)["test"],
            "loss": res.losses[0].tolist(),
            "lr": chosen,
            "val_by_lr": dict(zip([f"{r:.3g}" for r in rates], val, strict=False)),
            "lr_on_grid_edge": len(rates) > 1 and chosen in (rates[0], rates[-1]),
            "tuned": len(rates) > 1,
            "protocol": "pilot: one seed, tune_steps steps" if len(rates) > 1 else "base rate",
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
                "protocol": r.get("protocol", "pilot: one seed, tune_steps steps"),
            }
    return values, extras


__all__ = [
    "LQZO",
    "ZO",
    "Evaluate",
    "Problem",
    "Quantized",
    "accuracy",
    "make_evaluator",
    "run_rows",
    "xent",
]
