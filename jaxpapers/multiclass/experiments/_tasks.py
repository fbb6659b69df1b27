"""The P16 experiments' ``run(ctx, config)`` functions (``config``: ``SIZES`` in ``__init__``).

Step sizes are tuned, never set by hand: every learner with a step (Gaptron, the stable Gaptron;
exploration ``a = eta``, the coupling of Gaptron's analysis) runs the whole grid on *validation*
streams (seeds ``VALIDATION_OFFSET + s``, drawn apart from the test streams), the step with the
lowest mean validation regret is kept, and only that step runs on the test streams that the
verdicts read. The perceptron (scale-free from ``W = 0``) and the parameter-free Gaptron have no
step. The chosen steps, and whether one sits at an edge of the grid, are in the extras.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.multiclass import (
    Stream,
    gaptron,
    parameter_free_gaptron,
    perceptron,
    stable_gaptron,
    stream_margin,
)
from jaxpapers.multiclass.experiments import _runs

#: Validation streams use seeds ``VALIDATION_OFFSET + s``; test streams use the seeds ``s``.
VALIDATION_OFFSET = 10_000

#: The learners with a step size, as ``eta -> Learner`` (exploration tied to the step).
TUNED: dict[str, Callable[[float], Any]] = {
    "Gaptron": lambda e: gaptron(e, e),
    "stable Gaptron": lambda e: stable_gaptron(e, e),
}


def _validation(ctx: Context) -> list[int]:
    return [VALIDATION_OFFSET + s for s in ctx.seed_list]


def _regret(out, comp: np.ndarray) -> np.ndarray:
    """``[seeds, learners]`` surrogate regret: summed expected mistakes minus the comparator's
    summed surrogate loss."""
    return np.asarray(out.expected_mistakes).sum(-1) - comp[:, None]


def tune_steps(z, streams: Stream, loss: str = "hinge", delay: int = 0) -> dict[str, Any]:
    """Every tuned learner over ``z.eta_grid`` on the validation ``streams``; returns per learner
    the chosen step, the mean validation regret per step and whether the choice is a grid edge."""
    grid = list(z.eta_grid)
    learners = [make(e) for make in TUNED.values() for e in grid]
    out = _runs.run_grid(_runs.stack(learners), streams, z.C, loss, delay)
    comp = np.asarray(_runs.comparator_losses(streams, z.C, loss))
    mean = _regret(out, comp).mean(0).reshape(len(TUNED), len(grid))
    chosen = {}
    for i, name in enumerate(TUNED):
        best = int(np.argmin(mean[i]))
        order = np.argsort(mean[i])
        chosen[name] = {
            "eta": grid[best],
            "median_eta": grid[int(order[len(grid) // 2])],
            "validation_regret": mean[i].tolist(),
            "at_grid_edge": best in (0, len(grid) - 1),
            "edge": "lower" if best == 0 else "upper" if best == len(grid) - 1 else None,
        }
    return chosen


def _tuned_learners(chosen: dict[str, Any]) -> dict[str, Any]:
    return {
        "perceptron": perceptron(),
        **{name: make(chosen[name]["eta"]) for name, make in TUNED.items()},
    }


def _edge_note(chosen: dict[str, Any], z) -> list[str]:
    """One line per learner whose chosen step is a grid edge. The lower edge (1e-5 in the quick
    and full grids) stands for the limit eta -> 0, where Gaptron's predictions no longer depend
    on eta and its exploration vanishes: a comparison there is against that limit."""
    notes = []
    for n, c in chosen.items():
        if c["edge"] == "lower":
            notes.append(
                f"{n}: chosen eta {c['eta']} is the lower edge of the grid {list(z.eta_grid)}: "
                "the comparison is against the learner's eta -> 0 limit"
            )
        elif c["edge"] == "upper":
            notes.append(
                f"{n}: chosen eta {c['eta']} is the upper edge of the grid {list(z.eta_grid)}"
            )
    return notes


def novikoff(ctx: Context, config) -> Outcome:
    """Perceptron mistakes on separable streams against 2 (R / gamma)^2."""
    z = config
    streams, U = _runs.linear_streams(ctx.seed_list, z.T, z.d, z.C, margin=z.margin)
    out = _runs.run_grid(_runs.stack([perceptron()]), streams, z.C)
    mistakes = np.asarray(out.mistakes.sum(-1))[:, 0]
    bounds = []
    for i in range(len(ctx.seed_list)):
        gamma, R = stream_margin(type(streams)(streams.x[i], streams.y[i]), U[i])
        bounds.append(2 * (R / gamma) ** 2)
    return Outcome(
        {"perceptron mistakes / 2(R/gamma)^2": (mistakes / np.array(bounds)).tolist()},
        {"mistakes": mistakes.tolist(), "bounds": bounds},
    )


def perceptron_bound(ctx: Context, config) -> Outcome:
    r"""The standard perceptron's surrogate regret against the classic bound and the
    stability-refined one (derivation in the package docstring).

    On every stream and for every comparator ``U`` (the minimisers of the hinge loss on the
    mistake rounds plus ``l2 / 2 |U|^2`` at ``l2`` in ``z.ridges``, and the perceptron's final
    direction at the scales ``z.scales``): ``M - L_M(U)`` (mistakes minus the hinge loss of
    ``U`` on the mistake rounds, the quantity both bounds control; the surrogate regret
    ``M - L(U)`` is at most this) against the old bound ``|U| R sqrt(2 M)`` and the new one
    ``|U| R sqrt(2 M_u)``, ``M_u`` the mistakes whose update changed the prediction.
    """
    z = config
    streams, _ = _runs.linear_streams(ctx.seed_list, z.T, z.d, z.C, noise=z.noise)
    out = _runs.run_grid(_runs.stack([perceptron()]), streams, z.C)
    wrong = np.asarray(out.mistakes)[:, 0]  # [seeds, T]; the perceptron is deterministic
    stable = np.asarray(out.stable)[:, 0]
    M = wrong.sum(-1)
    M_u = (wrong * (1.0 - stable)).sum(-1)
    x = np.asarray(streams.x, np.float64)
    R = np.linalg.norm(x, axis=-1).max(-1)
    ratios, regrets = [], []
    # zeroed features give a constant hinge of 1 with no gradient, so the fit on these streams
    # minimises the hinge over the mistake rounds only
    on_mistakes = Stream(streams.x * wrong[..., None], streams.y)
    W = np.asarray(out.weights, np.float64)[:, 0]
    direction = W / np.linalg.norm(W, axis=(1, 2), keepdims=True)
    comparators = [_ridge(on_mistakes, z.C, l2) for l2 in z.ridges]
    # the perceptron's own direction at several scales (the direction that makes
    # <U, W_T> = |U| |W_T|, where the potential argument is tightest)
    comparators += [scale * direction for scale in z.scales]
    y = np.asarray(streams.y)
    for U in comparators:  # [seeds, C, d]
        scores = np.einsum("std,scd->stc", x, U)
        own = np.take_along_axis(scores, y[..., None], -1)[..., 0]
        others = np.where(np.eye(z.C, dtype=bool)[y], -np.inf, scores).max(-1)
        hinge = np.maximum(0.0, 1.0 - (own - others))
        L_M = (hinge * wrong).sum(-1)
        new = np.linalg.norm(U, axis=(1, 2)) * R * np.sqrt(2.0 * M_u)
        ratios.append((M - L_M) / new)
        regrets.append(M - hinge.sum(-1))
    ratios = np.stack(ratios, -1)  # [seeds, comparators]
    per_stream = ratios.max(-1)
    return Outcome(
        {
            "worst stream: max_U (M - L_M(U)) / new bound": [float(per_stream.max())],
            "max_U (M - L_M(U)) / new bound": per_stream.tolist(),
            "new bound / old bound": np.sqrt(M_u / M).tolist(),
        },
        {
            "mistakes": M.tolist(),
            "unstable_mistakes": M_u.tolist(),
            "comparators": [f"ridge {r} on the mistake rounds" for r in z.ridges]
            + [f"{c} W_T / |W_T|" for c in z.scales],
            "ratio_per_comparator": ratios.tolist(),
            "surrogate_regret_per_comparator": np.stack(regrets, -1).tolist(),
            "potential_check |W_T|^2 / (2 R^2 M_u)": (
                (W**2).sum((1, 2)) / (2 * R**2 * M_u)
            ).tolist(),
        },
    )


def _ridge(streams: Stream, C: int, l2: float) -> np.ndarray:
    return np.asarray(_runs.comparators(streams, C, l2).weights, np.float64)


def surrogate_regret(ctx: Context, config) -> Outcome:
    """Surrogate regret of the perceptron and the tuned Gaptron and stable Gaptron, per loss."""
    z = config
    streams, _ = _runs.linear_streams(ctx.seed_list, z.T, z.d, z.C, noise=z.noise)
    val, _ = _runs.linear_streams(_validation(ctx), z.T, z.d, z.C, noise=z.noise)
    values: dict[str, list[float]] = {}
    extras: dict[str, Any] = {
        "stable_fraction": {},
        "exploration": {},
        "curves": {},
        "chosen": {},
        "other_losses": {},
    }
    notes = []
    for loss in z.losses:
        chosen = tune_steps(z, val, loss)
        extras["chosen"][loss] = chosen
        notes += [f"{loss}: {n}" for n in _edge_note(chosen, z)]
        learners = _tuned_learners(chosen)
        out = _runs.run_grid(_runs.stack(learners.values()), streams, z.C, loss)
        comp = np.asarray(_runs.comparator_losses(streams, z.C, loss))
        expected = np.asarray(out.expected_mistakes)  # [seeds, learners, T]
        regret = _regret(out, comp)
        for j, name in enumerate(learners):
            if loss == z.losses[0]:
                values[name] = regret[:, j].tolist()
                extras["curves"][name] = np.cumsum(expected[:, j], -1)[:, :: max(z.T // 50, 1)]
            else:
                extras["other_losses"][f"{name} ({loss})"] = regret[:, j].tolist()
            key = name if loss == z.losses[0] else f"{name} ({loss})"
            extras["stable_fraction"][key] = float(np.asarray(out.stable)[:, j].mean())
            extras["exploration"][key] = float(np.asarray(out.exploration)[:, j].mean())
        extras[f"comparator loss ({loss})"] = comp.tolist()
    extras["grid_edges"] = notes
    extras["regret definition"] = (
        "sum_t E[mistake_t] - sum_t loss_t(U*), U* = argmin loss + |U|^2/2"
    )
    return Outcome(values, extras)


def penalty_row(name: str, d: int) -> str:
    """The row name of a learner's delay penalty: regret at delay ``d`` minus at delay 0."""
    return f"{name} penalty d={d} - d=0"


def delays(ctx: Context, config) -> Outcome:
    """Surrogate regret under feedback delays d in ``z.delays``, steps tuned at each delay.

    Besides each learner's regret at each delay (rows ``"<learner> d=<d>"``), the rows
    ``penalty_row(learner, d_max)`` hold the paired delay penalty: regret at the largest delay
    minus regret at d = 0 on the same test streams and exploration keys, each delay with the
    step tuned (same grid, same validation streams) at that delay. "Improved results for
    delayed feedback" is about how regret grows with d, so the verdict reads these penalties.
    """
    z = config
    streams, _ = _runs.linear_streams(ctx.seed_list, z.T, z.d, z.C, noise=z.noise)
    val, _ = _runs.linear_streams(_validation(ctx), z.T, z.d, z.C, noise=z.noise)
    comp = np.asarray(_runs.comparator_losses(streams, z.C))
    values: dict[str, list[float]] = {}
    chosen_all, notes = {}, []
    for d in z.delays:
        chosen = tune_steps(z, val, delay=d)
        chosen_all[str(d)] = chosen
        notes += [f"d={d}: {n}" for n in _edge_note(chosen, z)]
        learners = _tuned_learners(chosen)
        out = _runs.run_grid(_runs.stack(learners.values()), streams, z.C, delay=d)
        regret = _regret(out, comp)
        for j, name in enumerate(learners):
            values[f"{name} d={d}"] = regret[:, j].tolist()
    first, last = z.delays[0], z.delays[-1]
    penalties = {
        penalty_row(name, last): (
            np.asarray(values[f"{name} d={last}"]) - np.asarray(values[f"{name} d={first}"])
        ).tolist()
        for name in ("perceptron", *TUNED)
    }
    return Outcome(
        {**values, **penalties},
        {"delays": list(z.delays), "chosen": chosen_all, "grid_edges": notes},
    )


def parameter_free(ctx: Context, config) -> Outcome:
    """Parameter-free Gaptron against Gaptron at the step tuned on validation streams and at the
    median step of the validation ranking, scored on the test streams (regret per round)."""
    z = config
    streams, _ = _runs.linear_streams(ctx.seed_list, z.T, z.d, z.C, noise=z.noise)
    val, _ = _runs.linear_streams(_validation(ctx), z.T, z.d, z.C, noise=z.noise)
    chosen = tune_steps(z, val)["Gaptron"]
    learners = [
        TUNED["Gaptron"](chosen["eta"]),
        TUNED["Gaptron"](chosen["median_eta"]),
        parameter_free_gaptron(),
    ]
    out = _runs.run_grid(_runs.stack(learners), streams, z.C)
    comp = np.asarray(_runs.comparator_losses(streams, z.C))
    regret = _regret(out, comp) / z.T
    return Outcome(
        {
            "parameter-free Gaptron": regret[:, 2].tolist(),
            "Gaptron (tuned eta)": regret[:, 0].tolist(),
            "Gaptron (median eta)": regret[:, 1].tolist(),
        },
        {
            "eta_grid": list(z.eta_grid),
            "chosen": chosen,
            "grid_edges": _edge_note({"Gaptron": chosen}, z),
            "parameter_free_mean_exploration": float(np.asarray(out.exploration)[:, 2].mean()),
        },
    )


def batch(ctx: Context, config) -> Outcome:
    """Online-to-batch (average iterate, one pass) test error on sklearn digits; the stable
    Gaptron's step is chosen by the average iterate's error on a validation split of the
    training part (the test part is never seen before scoring)."""
    z = config
    train, test = _runs.digits_split(ctx.seed_list, z.train)
    fit = Stream(train.x[:, : z.train - z.validation], train.y[:, : z.train - z.validation])
    hold = Stream(train.x[:, z.train - z.validation :], train.y[:, z.train - z.validation :])
    grid = list(z.eta_grid)
    out = _runs.run_grid(_runs.stack([TUNED["stable Gaptron"](e) for e in grid]), fit, 10)
    val_err = _runs.held_out_errors(out.average, hold).mean(0)
    best = int(np.argmin(val_err))
    eta = grid[best]
    learners = {"perceptron": perceptron(), "stable Gaptron": TUNED["stable Gaptron"](eta)}
    out = _runs.run_grid(_runs.stack(learners.values()), train, 10)
    avg = _runs.held_out_errors(out.average, test)
    last = _runs.held_out_errors(out.weights, test)
    values = {f"{n} (average iterate)": avg[:, j].tolist() for j, n in enumerate(learners)}
    values["perceptron (last iterate)"] = last[:, 0].tolist()
    return Outcome(
        values,
        {
            "stable Gaptron (last iterate)": last[:, 1].tolist(),
            "train": z.train,
            "validation": z.validation,
            "eta_grid": grid,
            "validation_error_per_eta": val_err.tolist(),
            "chosen_eta": eta,
            "at_grid_edge": best in (0, len(grid) - 1),
            "note": "full feedback: exploration changes predictions, not updates, so the "
            "stable Gaptron's batch classifier is the average iterate of hinge OGD at its tuned "
            "step; the perceptron has no step",
        },
    )
