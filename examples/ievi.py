"""IE-VI in a few lines: plan with an approximate model, converge to the true values.

Run: python examples/ievi.py
"""

import jax
import jax.numpy as jnp

from jaxpapers import ievi

jax.config.update("jax_enable_x64", True)  # values ~ 1/(1-gamma): keep float64 for 1e-6 errors

gamma = 0.999
mdp = ievi.gridworld(8, gamma, slip=0.2)  # the true model (queried sparingly)
model = ievi.perturbed_model(jax.random.key(0), mdp.P, 0.05)  # a 5%-wrong simulator
v_star = ievi.optimal_values(mdp)

vi = ievi.value_iteration(mdp, tol=1e-6, max_queries=50_000)
ie = ievi.ie_vi(mdp, model, h=100 / (1 - gamma), tol=1e-6)
adaptive = ievi.a_ie_vi(mdp, model, tol=1e-6)  # no step size to choose
biased = ievi.plan_in_model(mdp, model)  # what planning in the simulator alone gives

for name, res in (("VI", vi), ("IE-VI", ie), ("A-IE-VI", adaptive)):
    err = float(jnp.max(jnp.abs(res.V - v_star)))
    print(f"{name:8s} true-model queries {int(res.queries):6d}  error {err:.1e}")
print(f"planning in the simulator alone: error {float(jnp.max(jnp.abs(biased - v_star))):.1f}")

# Batched over MDPs with vmap, jitted once:
mdps = jax.vmap(lambda k: ievi.random_mdp(k, 50, 4, 0.99))(jax.random.split(jax.random.key(1), 8))
models = jax.vmap(lambda k, P: ievi.perturbed_model(k, P, 0.1))(
    jax.random.split(jax.random.key(2), 8), mdps.P
)
batch = jax.jit(jax.vmap(lambda m, p: ievi.ie_vi(m, p, h=1e4, tol=1e-8)))(mdps, models)
print("queries per MDP:", batch.queries.tolist())
