"""True-model query counts of VI, IE-VI and A-IE-VI to sup-norm error 1e-6, per discount.

All runs are float64 (``jax.enable_x64``): in float32 VI cannot reach 1e-6 at gamma 0.999 (|V*| ~
1e3: the best float32 error there is ~5e-3). Seeds are vmapped: seed ``i`` draws the random MDP and
the perturbation of the approximate model from ``jax.random.key(i)``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.pytrees import stack_trees
from jaxpapers.ievi import (
    TabularMDP,
    a_ie_vi,
    gridworld,
    ie_vi,
    optimal_values,
    perturbed_model,
    plan_in_model,
    random_mdp,
    value_iteration,
)

GAMMAS = (0.9, 0.99, 0.999, 0.9999)
TOL = 1e-6
ACTIONS = 8
MAX_QUERIES = 2_000_000  # a cap only; runs stop at the tolerance long before it


def random_problem(seed: int, num_states: int, gamma: float) -> TabularMDP:
    return random_mdp(num_states, ACTIONS, gamma, key=jax.random.key(seed))


def grid_problem(seed: int, size: int, gamma: float) -> TabularMDP:
    del seed
    return gridworld(size, gamma, slip=0.2)


PROBLEMS = {"random": random_problem, "gridworld": grid_problem}


@jax.jit
def _vi_counts_batch(batch: TabularMDP):
    """VI's queries to sup-norm error ``TOL`` for a batch of MDPs (the discount is traced, so one
    compilation serves every gamma)."""

    def run(mdp):
        vi = value_iteration(mdp, tol=TOL, max_queries=MAX_QUERIES, v_star=optimal_values(mdp))
        return vi.queries, vi.converged

    return jax.vmap(run)(batch)


@jax.jit
def _ie_counts_batch(batch: TabularMDP, keys: jax.Array, l1_error: jax.Array):
    """IE-VI's and A-IE-VI's queries to sup-norm error ``TOL`` with perturbed models."""

    def run(mdp, k):
        v_star = optimal_values(mdp)
        model = perturbed_model(mdp.P, l1_error, key=k)
        h = 100.0 / (1.0 - mdp.gamma)
        ie = ie_vi(mdp, model, h=h, tol=TOL, max_queries=MAX_QUERIES, v_star=v_star)
        ad = a_ie_vi(mdp, model, tol=TOL, max_queries=MAX_QUERIES, v_star=v_star)
        return ie.queries, ad.queries, ie.model_solves, ie.converged & ad.converged

    return jax.vmap(run)(batch, keys)


@jax.jit
def _plan_errors_batch(batch: TabularMDP, keys: jax.Array, l1_error: jax.Array):
    """Sup-norm error to V* of planning in the perturbed model alone (its exact fixed point), with
    the same models as :func:`_ie_counts_batch`."""

    def run(mdp, k):
        model = perturbed_model(mdp.P, l1_error, key=k)
        return jnp.max(jnp.abs(plan_in_model(mdp, model) - optimal_values(mdp)))

    return jax.vmap(run)(batch, keys)


def _model_keys(seeds: list[int]) -> jax.Array:
    """Seed ``s``'s model perturbation key (shared by the query counts and the planning error)."""
    return jax.vmap(lambda s: jax.random.fold_in(jax.random.key(s), 1))(jnp.asarray(seeds))


class VICounts(NamedTuple):
    """VI's queries to sup-norm error ``TOL`` per seed, and whether each run converged."""

    queries: np.ndarray
    converged: np.ndarray


class IECounts(NamedTuple):
    """IE-VI's and A-IE-VI's queries per seed, IE-VI's model solves, and whether both
    converged."""

    ie_queries: np.ndarray
    aie_queries: np.ndarray
    ie_model_solves: np.ndarray
    converged: np.ndarray


def query_counts(
    ctx: Context, problem: str, size: int, gamma: float, l1_error: float
) -> dict[str, list]:
    """Queries of VI, IE-VI and A-IE-VI to sup-norm error ``TOL``, one entry per seed.

    Both steps are ``ctx.cached``: VI's counts do not depend on the model, and the experiments
    that need the same counts (the query counts and the horizon fit) compute them once.
    """
    make = PROBLEMS[problem]
    seeds = ctx.seed_list
    label = f"{problem}{size}_g{gamma}"

    def batch():
        return stack_trees([make(s, size, gamma) for s in seeds])

    def vi():
        return VICounts(*_vi_counts_batch(batch()))

    def ie():
        return IECounts(*_ie_counts_batch(batch(), _model_keys(seeds), jnp.asarray(l1_error)))

    with jax.enable_x64(True):
        base = ctx.cached(f"vi_{label}", vi)
        meth = ctx.cached(f"ie_{label}_err{l1_error:.3g}", ie)
    return {
        "VI": base.queries.tolist(),
        "converged": (base.converged & meth.converged).tolist(),
        "IE-VI": meth.ie_queries.tolist(),
        "A-IE-VI": meth.aie_queries.tolist(),
        "model_solves_ie": meth.ie_model_solves.tolist(),
    }


def _model_error(gamma: float, l1_scale: str) -> float:
    return 0.1 * (1.0 - gamma) if l1_scale == "horizon" else 0.05


#: The discount of the query-count verdicts.
HEAD_GAMMA = 0.999
#: ``model_error_matters``: planning in the model alone must miss V* by more than this (sup
#: norm), a thousand times the query counts' tolerance ``TOL``; otherwise the model is as good as
#: the true one for the counts and the bed cannot tell model error from none.
MODEL_MATTERS = 1e-3
#: The row of ``model_error_matters_<problem>_<level>`` per model-error level (``l1_scale``).
PLAN_ROWS = {"horizon": "plan in P_hat, L1 0.1 (1 - gamma)", "fixed": "plan in P_hat, L1 0.05"}


def plan_errors(ctx: Context, problem: str, size: int, gamma: float, l1_error: float) -> list:
    """Per seed: sup-norm error to V* of planning in the query counts' perturbed model alone."""
    make = PROBLEMS[problem]
    seeds = ctx.seed_list

    def compute():
        batch = stack_trees([make(s, size, gamma) for s in seeds])
        return _plan_errors_batch(batch, _model_keys(seeds), jnp.asarray(l1_error))

    with jax.enable_x64(True):
        return ctx.cached(f"plan_{problem}{size}_g{gamma}_err{l1_error:.3g}", compute).tolist()


def _size(config, problem: str) -> int:
    return config.grid_side if problem == "gridworld" else config.random_states


def run_model_error(ctx: Context, config, *, problem: str, l1_scale: str) -> Outcome:
    """Planning error of the query counts' perturbed models at gamma 0.999 (one error level)."""
    size = _size(config, problem)
    l1 = _model_error(HEAD_GAMMA, l1_scale)
    values = {PLAN_ROWS[l1_scale]: plan_errors(ctx, problem, size, HEAD_GAMMA, l1)}
    extras = {
        "problem": problem,
        "num_states": size * size if problem == "gridworld" else size,
        "gamma": HEAD_GAMMA,
        "model_l1_error": l1,
        "query_tolerance": TOL,
        "threshold": MODEL_MATTERS,
    }
    return Outcome(values, extras)


def run_queries(ctx: Context, config, *, problem: str, l1_scale: str) -> Outcome:
    """Query counts over all discounts (verdict at gamma 0.999)."""
    size = _size(config, problem)
    per_gamma = {
        str(g): query_counts(ctx, problem, size, g, _model_error(g, l1_scale)) for g in GAMMAS
    }
    head = per_gamma[str(HEAD_GAMMA)]
    values = {k: [float(v) for v in head[k]] for k in ("VI", "IE-VI", "A-IE-VI")}
    extras = {
        "problem": f"{problem}_{'small' if l1_scale == 'horizon' else '5pct'}",
        "num_states": size * size if problem == "gridworld" else size,
        "model_l1_error": "0.1 (1 - gamma)" if l1_scale == "horizon" else "0.05",
        "ie_vi_step": "100 / (1 - gamma)",
        "tolerance": TOL,
        "per_gamma": per_gamma,
        "all_converged": all(all(v["converged"]) for v in per_gamma.values()),
    }
    return Outcome(values, extras)


def _slopes(per_gamma: dict, name: str) -> list[float]:
    """Per-seed least-squares slope of log(queries) against log(1 / (1 - gamma))."""
    gammas = sorted(per_gamma, key=float)
    x = np.log([1.0 / (1.0 - float(g)) for g in gammas])
    y = np.log(np.array([per_gamma[g][name] for g in gammas], dtype=np.float64))  # [gammas, seeds]
    return [float(np.polyfit(x, y[:, i], 1)[0]) for i in range(y.shape[1])]


def run_slopes(ctx: Context, config) -> Outcome:
    """Log-log slope of the query counts against the horizon, on the gridworld."""
    size = config.slope_grid_side
    per_gamma = {
        str(g): query_counts(ctx, "gridworld", size, g, _model_error(g, "horizon")) for g in GAMMAS
    }
    values = {name: _slopes(per_gamma, name) for name in ("VI", "IE-VI", "A-IE-VI")}
    extras = {
        "problem": f"gridworld {size}x{size}, slip 0.2",
        "gammas": list(GAMMAS),
        "model_l1_error": "0.1 (1 - gamma)",
        "per_gamma": per_gamma,
    }
    return Outcome(values, extras)
