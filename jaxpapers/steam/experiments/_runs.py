"""Run functions of the P08 experiments (declared in ``__init__``), all on one protocol run."""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.steam import forgetting
from jaxpapers.steam.experiments._protocol import (
    ADAPTER_METHODS,
    FINETUNE,
    L2P,
    METHODS,
    NO_DASH,
    NO_SCOA,
    NO_TEMPORAL,
    ORACLE,
    ORACLES,
    STEAM,
    Config,
    Protocol,
    run_protocol,
)

#: The row of method ``m`` and task number ``k`` (1-based) in ``learns_tasks``:
#: ``LEARNED.format(m, k)``.
LEARNED = "{}: task {} learning gain (mIoU after - before learning it)"
SCOA_LEAK = "SCOA expert on earlier-input subspace"
FREE_LEAK = "unconstrained expert (w/o SCOA) on the same subspace"
FOLD = "DASH folded into the neck vs applied after it"
PATH = "STEAM: old videos' outputs after the last task vs right after their own (routed to it)"
PATH_FT = "sequential fine-tuning: the same change (every old video)"
PATH_ORACLE = "STEAM: the same change, every old video routed to its own task (oracle)"
#: ``ablations`` rows: STEAM and its ablations, oracle-routed at test time (judged) and as
#: deployed (reported).
ABLATED = (STEAM, NO_DASH, NO_TEMPORAL, NO_SCOA)


def _protocol(ctx: Context, config: Config) -> Protocol:
    return ctx.cached("protocol", lambda: run_protocol(config, ctx.seed_list))


def _per_method(res: Protocol) -> dict[str, Any]:
    acc = np.asarray(res.miou)  # [method, stage, task, seed]
    before = np.asarray(res.miou_before)  # [method, task, seed]
    sw = np.asarray(res.switches)[:, -1].sum(1)  # [method, seed]
    pairs = np.asarray(res.pairs)[:, -1].sum(1)
    out = {}
    for i, name in enumerate(res.methods):
        seeds = range(acc.shape[-1])
        out[name] = {
            "forgetting": [forgetting(acc[i, :, :, s]) for s in seeds],
            "final": [float(acc[i, -1, :, s].mean()) for s in seeds],
            "plasticity": [float(np.mean(np.diag(acc[i, :, :, s])[1:])) for s in seeds],
            # Learning gain per task: mIoU right after learning the task minus the same model's
            # mIoU on it just before ([task][seed]).
            "learned": [
                [float(acc[i, t, t, s] - before[i, t, s]) for s in seeds]
                for t in range(acc.shape[1])
            ],
            "switch_rate": (sw[i] / np.maximum(pairs[i], 1)).tolist(),
            # Routing accuracy after the last task, over every task's test videos.
            "routing": [float(np.asarray(res.routed)[i, -1, :, s].mean()) for s in seeds],
            "matrix": acc[i].mean(-1).tolist(),
        }
    return out


def _extras(res: Protocol, stats: dict[str, Any]) -> dict[str, Any]:
    mean = {
        k: {m: float(np.mean(v[k])) for m, v in stats.items()}
        for k in ("forgetting", "final", "plasticity", "switch_rate")
    }
    # The oracle rows' "before" is the routed model's (not comparable): no learning gain.
    gains = {
        m: np.mean(v["learned"], axis=1).tolist()
        for m, v in stats.items()
        if m not in ORACLES.values()
    }
    return {
        "tasks": list(res.tasks),
        "all-background prediction mIoU per task (seed mean)": np.mean(
            res.background_only_miou, 1
        ).tolist(),
        "learning gain per task (mIoU after - before learning it, seed mean)": gains,
        "miou just before learning each task (seed mean)": {
            m: np.mean(v, axis=-1).tolist()
            for m, v in zip(res.methods, res.miou_before, strict=True)
        },
        "final_average_miou": mean["final"],
        "average_forgetting": mean["forgetting"],
        "plasticity (mIoU on a task right after learning it, tasks 2-3)": mean["plasticity"],
        "identity_switch_rate": mean["switch_rate"],
        "routing accuracy after the last task per task (seed mean)": {
            m: np.asarray(res.routed)[i, -1].mean(-1).tolist()
            for i, m in enumerate(res.methods)
            if m != FINETUNE and m not in ORACLES.values()
        },
        "miou_matrix [stage][task] (seed mean)": {m: v["matrix"] for m, v in stats.items()},
        f"{ORACLE} minus {STEAM} (per seed; same trained parameters, routing given)": {
            k: (np.asarray(stats[ORACLE][k]) - np.asarray(stats[STEAM][k])).tolist()
            for k in ("plasticity", "forgetting", "final")
        },
        "final_losses": {k: np.asarray(v)[..., -1].tolist() for k, v in res.losses.items()},
        "learning-rate tuning (grid, selected, validation final average mIoU per grid point)": (
            res.tuning
        ),
        "DASH of STEAM's selected runs: Frobenius norms per task row (seed mean; task 1 is the "
        "identity)": {k: np.mean(v, axis=1).tolist() for k, v in (res.slope_norms or {}).items()},
        "cpu_seconds_by_phase": res.cpu_seconds,
    }


def run_forgetting(ctx: Context, config: Config) -> Outcome:
    res = _protocol(ctx, config)
    stats = _per_method(res)
    values = {m: stats[m]["forgetting"] for m in (FINETUNE, L2P, STEAM, ORACLE)}
    return Outcome(values, _extras(res, stats))


def run_learns_tasks(ctx: Context, config: Config) -> Outcome:
    res = _protocol(ctx, config)
    stats = _per_method(res)
    values = {
        LEARNED.format(m, t + 1): gain
        for m in (FINETUNE, L2P, STEAM)
        for t, gain in enumerate(stats[m]["learned"])
    }
    return Outcome(values, _extras(res, stats))


def run_plasticity(ctx: Context, config: Config) -> Outcome:
    res = _protocol(ctx, config)
    stats = _per_method(res)
    values = {m: stats[m]["plasticity"] for m in (FINETUNE, L2P, STEAM, ORACLE)}
    return Outcome(values, _extras(res, stats))


def run_ablations(ctx: Context, config: Config) -> Outcome:
    res = _protocol(ctx, config)
    stats = _per_method(res)
    values = {ORACLES[m]: stats[ORACLES[m]]["final"] for m in ABLATED}
    values.update({m: stats[m]["final"] for m in ABLATED})
    return Outcome(values, _extras(res, stats))


def run_temporal(ctx: Context, config: Config) -> Outcome:
    res = _protocol(ctx, config)
    stats = _per_method(res)
    values = {m: stats[m]["switch_rate"] for m in (FINETUNE, L2P, NO_TEMPORAL, STEAM)}
    return Outcome(values, _extras(res, stats))


def run_routing(ctx: Context, config: Config) -> Outcome:
    res = _protocol(ctx, config)
    stats = _per_method(res)
    values = {m: stats[m]["routing"] for m in (L2P, STEAM)}
    extras = _extras(res, stats)
    extras[
        "supervised probe ceiling: test accuracy of logistic regression predicting a video's task "
        "from the frozen base's summary (per seed)"
    ] = dict(res.probe or {})
    return Outcome(values, extras)


def run_sanity(ctx: Context, config: Config) -> Outcome:
    res = _protocol(ctx, config)
    names = list(ADAPTER_METHODS)
    leaks = np.stack([np.asarray(v) for v in res.leaks.values()])  # [task, method, seed, lvl]
    scoa = leaks[:, names.index(STEAM)].max(axis=(0, 2))  # worst case per seed
    free = leaks[:, names.index(NO_SCOA)].min(axis=(0, 2))
    values = {
        SCOA_LEAK: scoa.tolist(),
        FREE_LEAK: free.tolist(),
        FOLD: list(res.fold_error),
        PATH: list(res.path_change[STEAM]),
        PATH_FT: list(res.path_change[FINETUNE]),
        PATH_ORACLE: list(res.path_change[ORACLE]),
    }
    extras = {
        "leak per task (STEAM; frame, video)": leaks[:, names.index(STEAM)].mean(1).tolist(),
        "leak per task (w/o SCOA; frame, video)": leaks[:, names.index(NO_SCOA)].mean(1).tolist(),
        "methods": list(METHODS),
        "old test videos routed to their own task both times (STEAM, per seed; the videos the "
        "whole-path row averages)": list(res.path_routed),
        "old test videos per seed": res.path_videos,
    }
    return Outcome(values, extras)
