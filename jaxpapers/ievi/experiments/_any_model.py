"""Convergence to V* of the true model for any approximate model (even a useless one)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.ievi import a_ie_vi, gridworld, ie_vi, optimal_values, perturbed_model, plan_in_model

GAMMA = 0.99


class AnyModelErrors(NamedTuple):
    """Sup-norm errors to V* of planning in the model, IE-VI and A-IE-VI, and the two planners'
    query counts (one entry per model)."""

    plan: np.ndarray
    ie: np.ndarray
    aie: np.ndarray
    ie_queries: np.ndarray
    aie_queries: np.ndarray


class AnyModelRuns(NamedTuple):
    """``random``: one random model at L1 error 1.0 per seed; ``teleport``: the model that
    jumps to state 0; ``v_star_sup``: the scale of V*."""

    random: AnyModelErrors
    teleport: AnyModelErrors
    v_star_sup: float


def _teleport_model(P: jax.Array) -> jax.Array:
    """A model in which every action jumps to state 0: it knows nothing about ``P``."""
    return jnp.zeros_like(P).at[..., 0].set(1.0)


def run_any_model(ctx: Context, config) -> Outcome:
    size, budget = config.any_model_grid_side, config.any_model_budget

    def compute():
        with jax.enable_x64(True):
            mdp = gridworld(size, GAMMA, slip=0.2)
            v_star = optimal_values(mdp)

            def run(model):
                planned = plan_in_model(mdp, model)
                ie = ie_vi(mdp, model, h=1.0 / (1.0 - GAMMA), tol=1e-9, max_queries=budget)
                ad = a_ie_vi(mdp, model, tol=1e-9, max_queries=budget)
                err = lambda v: jnp.max(jnp.abs(v - v_star))
                return AnyModelErrors(err(planned), err(ie.V), err(ad.V), ie.queries, ad.queries)

            keys = jax.vmap(lambda s: jax.random.key(1000 + s))(jnp.asarray(ctx.seed_list))
            models = jax.vmap(lambda k: perturbed_model(mdp.P, 1.0, key=k))(keys)
            random_wrong = jax.jit(jax.vmap(run))(models)
            teleport = jax.jit(run)(_teleport_model(mdp.P))
            return AnyModelRuns(random_wrong, teleport, float(jnp.max(jnp.abs(v_star))))

    res = ctx.cached("any_model", compute)
    rand = res.random
    values = {
        "plan in P_hat": rand.plan.tolist(),
        "IE-VI": rand.ie.tolist(),
        "A-IE-VI": rand.aie.tolist(),
    }
    extras = {
        "problem": f"gridworld {size}x{size}, slip 0.2, gamma {GAMMA}",
        "models": "rows mixed with random rows at L1 error 1.0 (one per seed)",
        "queries_used": {
            "IE-VI": rand.ie_queries.tolist(),
            "A-IE-VI": rand.aie_queries.tolist(),
            "budget": budget,
        },
        "teleport_model": dict(
            zip(
                ("plan in P_hat", "IE-VI", "A-IE-VI", "IE-VI queries", "A-IE-VI queries"),
                (float(x) for x in res.teleport),
                strict=True,
            )
        ),
        "v_star_sup": res.v_star_sup,
    }
    return Outcome(values, extras)
