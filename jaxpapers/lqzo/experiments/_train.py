"""The fine-tuning rows shared by the P02 accuracy experiments, with per-method learning rates.

Rows: first-order Adam on the full-precision parameters (upper bound), MeZO on the
full-precision parameters, QZO-style and LQZO on the quantized parameters' scales (relative
corrections ``delta``, :func:`jaxpapers.lqzo.merge_scaled`) at every bit width. Each ZO row picks
its learning rate from ``base * grid`` by validation accuracy of a pilot run (one seed, all grid
points in one vectorised program), then runs every seed at the chosen rate; test accuracy is
reported. When the pilot would be as long as the run (``tune_steps >= steps``, the smoke size)
every (seed, rate) pair runs in one program and the rate with the best seed-mean validation
accuracy is chosen. A choice on the edge of the grid is recorded in the extras.

One program per ZO method serves every bit width: the quantized models hold their codes one per
byte (:func:`one_byte_codes`; the INT4 / INT2 grids and so the dequantized weights are unchanged,
only the packing differs), so the INT4 and INT2 models have one structure and
:func:`jaxpapers.lqzo.zo_finetune` runs them side by side (``stacked_aux``), with the same seeds,
batches and directions as separate runs. Their evaluators share one compiled program too.

The MeZO and QZO-style rows use ``share_direction=True`` (each leaf's Gaussian ``z`` formed once
per step for both passes and the update; the same values, so the same rows up to float32
round-off). Each finished row is kept with ``ctx.cached`` under a name that says the bed and
the row, so a resumed run trains nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jaxpapers_kernels.quant_matmul import unpack_codes

from jaxpapers.core.experiment import Context
from jaxpapers.core.metrics import accuracy
from jaxpapers.core.train import train
from jaxpapers.lqzo import QuantizedLinear, lqzo, mezo, qzo, zo_finetune
from jaxpapers.lqzo._finetune import zeros_like_tree

#: Shared ZO settings: perturbation size and the directional-derivative clip.
ZO = {"eps": 1e-2, "clip": 100.0}
#: LQZO's own settings: rank, V redrawn every nu steps, BAG entries, isotropic views.
LQZO = {"rank": 4, "nu": 10, "bag_k": 4, "noise": "bag", "isotropic": True}


def xent(logits: jax.Array, y: jax.Array) -> jax.Array:
    """Mean cross-entropy of integer labels."""
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


def accuracy_percent(logits: Any, y: np.ndarray) -> float:
    """Accuracy in percent (:func:`jaxpapers.core.metrics.accuracy`, on the host's arrays)."""
    return 100.0 * float(accuracy(np.asarray(logits), np.asarray(y)))


#: ``evaluate(stacked_params) -> {"val": [...], "test": [...]}``: accuracy per stacked entry.
Evaluate = Callable[[Any], dict[str, list[float]]]


def one_byte_codes(model: nnx.Module) -> nnx.Module:
    """Hold every :class:`QuantizedLinear`'s codes one per byte (in place; returns ``model``).

    The codes, scales and zero points are unchanged (an INT2 layer keeps its 4-level grid and
    its dequantized weight is the same), but INT4 and INT2 models then have the same structure
    and array shapes, so one compiled program serves both bit widths. Packing only saves memory,
    which these small models do not need. Unpacked on the host (``unpack_codes`` of a NumPy
    array): eager jnp would compile every op once per weight shape.
    """
    for _, m in nnx.iter_modules(model):
        if isinstance(m, QuantizedLinear) and m.bits != 8:
            codes = unpack_codes(np.asarray(m.codes.get_value()), m.bits)
            # 8-bit "packing" is the code itself, stored as the bits of a uint8 in an int8.
            m.codes.set_value(jnp.asarray(codes.astype(np.uint8).view(np.int8)))
            m.bits = 8
    return model


def make_evaluator(
    apply: Callable[..., jax.Array],
    consts: Any,
    splits: Mapping[str, tuple[Any, np.ndarray]],
) -> Evaluate:
    """Accuracy on every split of any number of stacked parameter sets.

    ``apply(params, consts, inputs) -> logits`` for one (unstacked) parameter set, jitted by the
    caller: evaluators given the same jitted ``apply`` share its compiled program whenever their
    arguments have the same structure and shapes (the INT4 and INT2 models). ``splits`` maps a
    split name to ``(inputs, labels)`` (inputs a pytree of ``[N, ...]`` arrays). The splits are
    concatenated and passed as arguments (not baked in as constants), and stacked parameters are
    evaluated one entry at a time, so the number of entries (a pilot's learning rates, the
    seeds, one "before" model) never recompiles.
    """
    names = list(splits)
    inputs = jax.tree.map(lambda *a: jnp.concatenate(a), *[splits[k][0] for k in names])
    bounds = np.cumsum([0] + [len(splits[k][1]) for k in names])

    def evaluate(stacked: Any) -> dict[str, list[float]]:
        host = jax.tree.map(np.asarray, stacked)
        count = jax.tree.leaves(host)[0].shape[0]
        out: dict[str, list[float]] = {k: [] for k in names}
        for i in range(count):
            params = jax.tree.map(lambda a, i=i: a[i], host)
            logits = np.asarray(apply(params, consts, inputs))
            for j, k in enumerate(names):
                out[k].append(accuracy_percent(logits[bounds[j] : bounds[j + 1]], splits[k][1]))
        return out

    return evaluate


class Quantized(NamedTuple):
    """The quantized models of every bit width (one structure, :func:`one_byte_codes`).

    ``loss(delta, aux_b, batch)`` with ``aux_b`` one model's entry of ``aux`` (leaves stacked
    ``[len(bits), ...]``); ``scales0`` has the shape of ``delta``; ``evaluate[b]`` is bit width
    ``b``'s evaluator; ``data`` the training data of all of them.
    """

    bits: tuple[int, ...]
    loss: Any
    scales0: Any
    aux: Any
    evaluate: dict[int, Evaluate]
    data: tuple[np.ndarray, ...]


class Problem(NamedTuple):
    """What the row runner needs: the float model, the quantized models, the training data."""

    fp_loss: Any
    fp_params: Any
    fp_aux: Any
    fp_eval: Evaluate
    quantized: Quantized
    data: tuple[np.ndarray, ...]


def _zo_optimizer(method: str):
    """``make_optimizer(key, learning_rate)`` of one ZO row."""
    # share_direction: each leaf's z formed once per step (same values as regenerating it in
    # both passes and the update; fewer generator evaluations, see the package docstring).
    if method == "MeZO":
        return lambda key, rate: mezo(rate, key=key, eps=1e-3, share_direction=True)
    if method == "QZO-style":
        return lambda key, rate: qzo(rate, key=key, **ZO, share_direction=True)
    return lambda key, rate: lqzo(rate, key=key, **ZO, **LQZO)


def _take(tree: Any, index: int) -> Any:
    """Entry ``index`` of a pytree's leading axis."""
    return jax.tree.map(lambda a: a[index], tree)


def _flatten_grid(tree: Any) -> Any:
    """``[S, H, ...]`` -> ``[S * H, ...]`` for the evaluators."""
    return jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), tree)


class RowResult(NamedTuple):
    """One trained row: per-seed test accuracies, seed 0's training loss curve and, for ZO rows,
    the learning rate and how it was chosen (``lr`` is ``None`` for the first-order row)."""

    acc: list[float]
    loss: list[float]
    lr: float | None = None
    val_by_lr: dict[str, float] | None = None
    lr_on_grid_edge: bool = False
    tuned: bool = False
    protocol: str = ""


def run_rows(
    ctx: Context,
    prob: Problem,
    *,
    bed: str,
    steps: int,
    fo_steps: int,
    batch: int,
    lr: dict[str, float],
    grid: tuple[float, ...],
    tune_steps: int,
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """All rows for all seeds; each (tuning or final) run is one compiled, vectorised program.

    Each row (or group of rows trained in one program) is kept with ``ctx.cached`` under
    ``f"{bed}_<rows>"``.
    """
    seeds = ctx.seed_list
    n = len(prob.data[-1])

    def fo():
        # One Adam run per seed, stacked along a leading seed axis: the summed loss has
        # independent per-seed gradients and Adam is elementwise, so this equals separate runs.
        s = len(seeds)
        # On the host: an eager broadcast would compile once per leaf shape.
        stacked = jax.tree.map(
            lambda x: np.broadcast_to(np.asarray(x), (s, *np.shape(x))), prob.fp_params
        )
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
            checkpoint_dir=ctx.checkpoint_dir(f"{bed}_fo"),
            checkpoint_every=fo_steps,
        )
        return RowResult(prob.fp_eval(res.params)["test"], (res.losses / s).tolist())

    def zo(method: str, quantized: bool) -> list[RowResult]:
        """One ZO method on the float model or, in one program, on every quantized model."""
        if quantized:
            q = prob.quantized
            loss, start, aux, data = q.loss, zeros_like_tree(q.scales0), q.aux, q.data
            evaluates, base = [q.evaluate[b] for b in q.bits], lr["scales"]
        else:
            loss, start, aux, data = prob.fp_loss, prob.fp_params, prob.fp_aux, prob.data
            evaluates, base = [prob.fp_eval], lr["mezo"]
        models = list(range(len(evaluates)))

        def finetune(members: list[int], **kw):
            # Quantized: the chosen models' stacked aux (a leading model axis on the results);
            # float: the one model, as a model axis of length 1.
            if not quantized:
                res = zo_finetune(loss, start, aux, data=data, **kw, **common)
                return jax.tree.map(lambda x: x[None], res.params), res.losses[None]
            pick = np.asarray(members)
            sub = aux if members == models else jax.tree.map(lambda x: x[pick], aux)
            res = zo_finetune(loss, start, sub, data=data, stacked_aux=True, **kw, **common)
            return res.params, res.losses

        make = _zo_optimizer(method)
        rates = [base * g for g in grid]
        common = dict(batch_size=batch)
        if len(rates) > 1 and tune_steps >= steps:
            # Joint tuning (the pilot would be as long as the run): every (seed, rate) pair in
            # one program; per model, the rate with the best seed-mean validation accuracy is
            # chosen and its runs' test accuracies are reported.
            params, losses = finetune(
                models, make_optimizer=make, steps=steps, seeds=seeds, learning_rates=rates
            )
            out = []
            for m in models:
                acc = evaluates[m](_flatten_grid(_take(params, m)))
                by_rate = {k: np.asarray(v).reshape(len(seeds), len(rates)) for k, v in acc.items()}
                val = by_rate["val"].mean(0).tolist()
                best = int(np.argmax(val))
                out.append(
                    RowResult(
                        acc=by_rate["test"][:, best].tolist(),
                        loss=losses[m, 0, best].tolist(),
                        lr=rates[best],
                        val_by_lr=dict(zip([f"{r:.3g}" for r in rates], val, strict=True)),
                        lr_on_grid_edge=best in (0, len(rates) - 1),
                        tuned=True,
                        protocol="joint: all seeds at every rate, seed-mean validation accuracy",
                    )
                )
            return out
        chosen, vals = [rates[0]] * len(models), [[] for _ in models]
        if len(rates) > 1:
            pilot, _ = finetune(
                models,
                make_optimizer=make,
                steps=tune_steps,
                seeds=[seeds[0] + 1000],
                learning_rates=rates,
            )
            for m in models:
                vals[m] = evaluates[m](_flatten_grid(_take(pilot, m)))["val"]
                chosen[m] = rates[int(np.argmax(vals[m]))]
        # One program for the models that chose the same rate (all of them at the quick size).
        runs: dict[int, tuple[Any, np.ndarray, int]] = {}
        for rate in dict.fromkeys(chosen):
            group = [m for m in models if chosen[m] == rate]
            params, losses = finetune(
                group, make_optimizer=lambda key, r=rate: make(key, r), steps=steps, seeds=seeds
            )
            runs.update({m: (params, losses, j) for j, m in enumerate(group)})
        out = []
        for m in models:
            params, losses, j = runs[m]
            out.append(
                RowResult(
                    acc=evaluates[m](_take(params, j))["test"],
                    loss=losses[j, 0].tolist(),
                    lr=chosen[m],
                    val_by_lr=dict(zip([f"{r:.3g}" for r in rates], vals[m], strict=False)),
                    lr_on_grid_edge=len(rates) > 1 and chosen[m] in (rates[0], rates[-1]),
                    tuned=len(rates) > 1,
                    protocol="pilot: one seed, tune_steps steps" if len(rates) > 1 else "base rate",
                )
            )
        return out

    bits = prob.quantized.bits
    jobs: list[tuple[str, list[str], Callable[[], list[RowResult]]]] = [
        ("FO_full_precision", ["FO full precision"], lambda: [fo()]),
        ("MeZO_full_precision", ["MeZO full precision"], lambda: zo("MeZO", False)),
    ]
    jobs = [job for job in jobs if all(ctx.runs(name) for name in job[1])]
    for method in ("QZO-style", "LQZO"):
        names = [f"{method} INT{b}" for b in bits]
        jobs.append(
            (f"{method}_" + "_".join(f"INT{b}" for b in bits), names, lambda m=method: zo(m, True))
        )
    results: dict[str, RowResult] = {}
    for cache_name, names, fn in jobs:
        rows = ctx.cached(
            f"{bed}_{cache_name}", lambda fn=fn, names=names: dict(zip(names, fn(), strict=True))
        )
        results.update(rows)
    # Row order: the baselines, then per bit width QZO-style and LQZO.
    order = [r for r in ("FO full precision", "MeZO full precision") if r in results]
    order += [f"{m} INT{b}" for b in bits for m in ("QZO-style", "LQZO")]
    values: dict[str, list[float]] = {}
    extras: dict[str, Any] = {"train_loss_seed0": {}, "learning_rate": {}, "tuning": {}}
    for name in order:
        r = results[name]
        values[name] = r.acc
        extras["train_loss_seed0"][name] = r.loss
        if r.lr is not None:
            extras["learning_rate"][name] = r.lr
            extras["tuning"][name] = {
                "val_acc_by_lr": r.val_by_lr,
                "edge": r.lr_on_grid_edge,
                "tuned": r.tuned,
                "protocol": r.protocol,
            }
    return values, extras


__all__ = [
    "LQZO",
    "ZO",
    "Evaluate",
    "Problem",
    "Quantized",
    "RowResult",
    "accuracy_percent",
    "make_evaluator",
    "one_byte_codes",
    "run_rows",
    "xent",
]
