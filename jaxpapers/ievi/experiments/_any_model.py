"""Convergence to V* of the true model for any approximate model (even a useless one)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.ievi import a_ie_vi, gridworld, ie_vi, optimal_values, perturbed_model, plan_in_model


def _teleport_model(P: jax.Array) -> jax.Array:
    """A model in which every action jumps to state 0: it knows nothing about ``P``."""
    return jnp.zeros_like(P).at[..., 0].set(1.0)


def any_model_run(ctx: Context, sizes) -> Outcome:
    gamma = 0.99
    size, budget = sizes.any_model_grid_side, sizes.any_model_budget

    def compute():
        with jax.enable_x64(True):
            mdp = gridworld(size, gamma, slip=0.2)
            v_star = optimal_values(mdp)

            def run(model):
                planned = plan_in_model(mdp, model)
                ie = ie_vi(mdp, model, h=1.0 / (1.0 - gamma), tol=1e-9, max_queries=budget)
                ad = a_ie_vi(mdp, model, tol=1e-9, max_queries=budget)
                err = lambda v: jnp.max(jnp.abs(v - v_star))
                return err(planned), err(ie.V), err(ad.V), ie.queries, ad.queries

            keys = jax.vmap(lambda s: jax.random.key(1000 + s))(jnp.asarray(ctx.seed_list))
            models = jax.vmap(lambda k: perturbed_model(k, mdp.P, 1.0))(keys)
            random_wrong = jax.jit(jax.vmap(run))(models)
            teleport = jax.jit(run)(_teleport_model(mdp.P))
            return {
                "random_l1_1.0": [np.asarray(x).tolist() for x in random_wrong],
                "teleport": [float(x) for x in teleport],
                "v_star_sup": float(jnp.max(jnp.abs(v_star))),
            }

    res = ctx.cached("any_model", compute)
    plan, ie, ad, ie_q, ad_q = res["random_l1_1.0"]
    values = {"plan in P_hat": plan, "IE-VI": ie, "A-IE-VI": ad}
    extras = {
        "problem": f"gridworld {size}x{size}, slip 0.2, gamma {gamma}",
        "models": "rows mixed with random rows at L1 error 1.0 (one per seed)",
        "queries_used": {"IE-VI": ie_q, "A-IE-VI": ad_q, "budget": budget},
        "teleport_model": dict(
            zip(
                ("plan in P_hat", "IE-VI", "A-IE-VI", "IE-VI queries", "A-IE-VI queries"),
                res["teleport"],
                strict=True,
            )
        ),
        "v_star_sup": res["v_star_sup"],
    }
    return Outcome(values, extras)
