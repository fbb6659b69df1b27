"""IE-Dyna vs Dyna-Q: real transitions sampled until a target relative error."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.ievi import (
    dyna_q,
    forest_management,
    gridworld,
    ie_dyna,
    optimal_values,
    perturbed_model,
    random_mdp,
    samples_to_error,
)

DYNA_TARGET = 0.05  # relative sup-norm error |V - V*| / |V*|
SIMULATOR_ERROR = 0.3
GAMMA = 0.99
#: The rows of a Dyna experiment, in the order of :class:`DynaRuns`' curves.
ROWS = ("Dyna-Q", "Dyna-Q (10 sweeps)", "IE-Dyna")


class DynaRuns(NamedTuple):
    """Per seed, the real samples each agent drew before reaching the target (``inf``: never);
    the seed-mean relative error curves ``[3, points]`` read every ``rounds // 100`` rounds."""

    samples: np.ndarray  # [3, seeds], rows in the order of ROWS
    curve_rounds: np.ndarray
    curves: np.ndarray
    samples_per_round: int
    max_samples: int


def _problem(name: str, size: int):
    if name == "gridworld":
        return gridworld(size, GAMMA, slip=0.2)
    if name == "forest":
        return forest_management(size, GAMMA)
    return random_mdp(size, 4, GAMMA, key=jax.random.key(7))


def _size(config, problem: str) -> int:
    return {
        "gridworld": config.dyna_grid_side,
        "forest": config.dyna_forest_states,
        "random": config.dyna_random_states,
    }[problem]


def run_dyna(ctx: Context, config, *, problem: str) -> Outcome:
    size, rounds = _size(config, problem), config.dyna_rounds

    def compute():
        with jax.enable_x64(True):
            mdp = _problem(problem, size)
            v_star = optimal_values(mdp)
            target = DYNA_TARGET * float(jnp.max(jnp.abs(v_star)))

            def one(seed):
                k_model, k_samples = jax.random.split(jax.random.key(seed))
                sim = perturbed_model(mdp.P, SIMULATOR_ERROR, key=k_model)
                dq = dyna_q(mdp, v_star, key=k_samples, rounds=rounds)
                dq10 = dyna_q(mdp, v_star, key=k_samples, rounds=rounds, planning_sweeps=10)
                ie = ie_dyna(
                    mdp, sim, v_star, key=k_samples, rounds=rounds, h=100.0 / (1.0 - GAMMA)
                )
                curves = jnp.stack([dq.errors, dq10.errors, ie.errors])
                counts = jnp.stack([samples_to_error(r, target) for r in (dq, dq10, ie)])
                return counts, curves / jnp.max(jnp.abs(v_star))

            counts, curves = jax.jit(jax.vmap(one))(jnp.asarray(ctx.seed_list))
            every = max(1, rounds // 100)
            return DynaRuns(
                samples=jnp.swapaxes(counts, 0, 1),
                curve_rounds=np.arange(every, rounds + 1, every),
                curves=np.asarray(curves.mean(0))[:, every - 1 :: every],
                samples_per_round=mdp.num_states * mdp.num_actions,
                max_samples=rounds * mdp.num_states * mdp.num_actions,
            )

    res = ctx.cached(f"dyna_{problem}", compute)
    # A run that never reached the target counts as the whole budget (a lower bound).
    cap = float(res.max_samples)
    values = {
        name: [cap if np.isnan(v) else min(float(v), cap) for v in row]
        for name, row in zip(ROWS, res.samples, strict=True)
    }
    raw = {
        **{name: row.tolist() for name, row in zip(ROWS, res.samples, strict=True)},
        "curve_rounds": res.curve_rounds.tolist(),
        "curve_relative_error": {
            name: c.tolist() for name, c in zip(ROWS, res.curves, strict=True)
        },
        "samples_per_round": res.samples_per_round,
        "max_samples": res.max_samples,
    }
    extras = {
        "raw": raw,
        "target_relative_error": DYNA_TARGET,
        "gamma": GAMMA,
        "simulator_l1_error": SIMULATOR_ERROR,
        "rounds": rounds,
        "note": "a value equal to max_samples means the target was not reached",
    }
    return Outcome(values, extras)
