"""The P16 experiments' ``run`` functions (sizes come from the table in ``__init__``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.multiclass import (
    gaptron,
    parameter_free_gaptron,
    perceptron,
    stable_gaptron,
    stable_perceptron,
    stream_margin,
)
from jaxpapers.multiclass.experiments import _runs


def _four(z) -> dict[str, Any]:
    return {
        "perceptron": perceptron(),
        "Gaptron": gaptron(z.eta, z.exploration),
        "stable perceptron": stable_perceptron(z.eta),
        "stable Gaptron": stable_gaptron(z.eta, z.exploration),
    }


def novikoff(ctx: Context, *, sizes: dict[str, Any]) -> Outcome:
    """Perceptron mistakes on separable streams against 2 (R / gamma)^2."""
    z = ctx.pick(**sizes)
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


def surrogate_regret(ctx: Context, *, sizes: dict[str, Any]) -> Outcome:
    """Surrogate regret of the four learners on noisy linear streams, per loss."""
    z = ctx.pick(**sizes)
    learners = _four(z)
    streams, _ = _runs.linear_streams(ctx.seed_list, z.T, z.d, z.C, noise=z.noise)
    values: dict[str, list[float]] = {}
    extras: dict[str, Any] = {"stable_fraction": {}, "exploration": {}, "curves": {}}
    for loss in z.losses:
        out = _runs.run_grid(_runs.stack(learners.values()), streams, z.C, loss)
        comp = np.asarray(_runs.comparator_losses(streams, z.C, loss))
        expected = np.asarray(out.expected_mistakes)  # [seeds, learners, T]
        suffix = "" if loss == z.losses[0] else f" ({loss})"
        for j, name in enumerate(learners):
            values[name + suffix] = (expected[:, j].sum(-1) - comp).tolist()
            extras["stable_fraction"][name + suffix] = float(np.asarray(out.stable)[:, j].mean())
            extras["exploration"][name + suffix] = float(np.asarray(out.exploration)[:, j].mean())
            if loss == z.losses[0]:
                extras["curves"][name] = np.cumsum(expected[:, j], -1)[:, :: max(z.T // 50, 1)]
        extras[f"comparator loss ({loss})"] = comp.tolist()
    extras["regret definition"] = (
        "sum_t E[mistake_t] - sum_t loss_t(U*), U* = argmin loss + |U|^2/2"
    )
    return Outcome(values, extras)


def delays(ctx: Context, *, sizes: dict[str, Any]) -> Outcome:
    """Surrogate regret under feedback delays d in ``z.delays``."""
    z = ctx.pick(**sizes)
    learners = _four(z)
    streams, _ = _runs.linear_streams(ctx.seed_list, z.T, z.d, z.C, noise=z.noise)
    comp = np.asarray(_runs.comparator_losses(streams, z.C))
    values: dict[str, list[float]] = {}
    for d in z.delays:
        out = _runs.run_grid(_runs.stack(learners.values()), streams, z.C, delay=d)
        expected = np.asarray(out.expected_mistakes).sum(-1)
        for j, name in enumerate(learners):
            values[f"{name} d={d}"] = (expected[:, j] - comp).tolist()
    return Outcome(values, {"delays": list(z.delays)})


def parameter_free(ctx: Context, *, sizes: dict[str, Any]) -> Outcome:
    """Parameter-free Gaptron against Gaptron over a grid of step sizes (exploration a = eta)."""
    z = ctx.pick(**sizes)
    streams, _ = _runs.linear_streams(ctx.seed_list, z.T, z.d, z.C, noise=z.noise)
    grid = [gaptron(e, min(e, z.exploration)) for e in z.eta_grid]
    learners = [*grid, parameter_free_gaptron(z.exploration)]
    out = _runs.run_grid(_runs.stack(learners), streams, z.C)
    comp = np.asarray(_runs.comparator_losses(streams, z.C))
    regret = np.asarray(out.expected_mistakes).sum(-1) - comp[:, None]  # [seeds, learners]
    grid_regret = regret[:, : len(grid)]
    best = int(np.argmin(grid_regret.mean(0)))
    median = int(np.argsort(grid_regret.mean(0))[len(grid) // 2])
    return Outcome(
        {
            "parameter-free Gaptron": regret[:, -1].tolist(),
            "Gaptron (best eta of grid)": grid_regret[:, best].tolist(),
            "Gaptron (median eta of grid)": grid_regret[:, median].tolist(),
        },
        {
            "eta_grid": list(z.eta_grid),
            "grid_mean_regret": grid_regret.mean(0).tolist(),
            "best_eta": z.eta_grid[best],
        },
    )


def batch(ctx: Context, *, sizes: dict[str, Any]) -> Outcome:
    """Online-to-batch (average iterate, one pass) test error on sklearn digits."""
    z = ctx.pick(**sizes)
    learners = _four(z)
    train, test = _runs.digits_split(ctx.seed_list, z.train)
    out = _runs.run_grid(_runs.stack(learners.values()), train, 10)
    avg = _runs.held_out_errors(out.average, test)
    last = _runs.held_out_errors(out.weights, test)
    values = {f"{n} (average iterate)": avg[:, j].tolist() for j, n in enumerate(learners)}
    values["perceptron (last iterate)"] = last[:, 0].tolist()
    extras = {f"{n} (last iterate)": last[:, j].tolist() for j, n in enumerate(learners)}
    note = (
        "Gaptron, the stable perceptron and the stable Gaptron make the same gradient step "
        "every round (exploration changes predictions, not updates, under full feedback), "
        "so their iterates and batch errors coincide; the comparison is with the perceptron."
    )
    return Outcome(values, {"last_iterate_test_error": extras, "train": z.train, "note": note})
