"""Counterfactual Shapley values on a small causal model, next to SHAP, with LP bounds.

Run: python examples/cfshap.py
"""

import jax
import jax.numpy as jnp

from jaxpapers.cfshap import (
    DiscreteSCM,
    LinearGaussianSCM,
    cf_shapley_bounds,
    counterfactual_game,
    interventional_game,
    shapley_sampling,
    shapley_values,
)

# Linear-Gaussian chain X0 -> X1 -> X2; the model reads only X2.
scm = LinearGaussianSCM(jnp.array([[0.0, 0.0, 0.0], [1.5, 0.0, 0.0], [0.0, -2.0, 0.0]]))
background = scm.sample(jax.random.key(0), 256)
x = jnp.array([1.0, 2.0, -3.5])


def model(v):
    return jnp.tanh(v[2])


cf = counterfactual_game(scm, model, x, background=background)
print("counterfactual Shapley:", shapley_values(cf))
print(
    "interventional SHAP:   ",
    shapley_values(interventional_game(scm, model, x, background=background)),
)
est = shapley_sampling(cf, key=jax.random.key(1), num_permutations=200)
print("sampled (200 orders):  ", est.values, "+-", est.stderr)

# A binary SCM known only through its graph and observational law: tight bounds by LP.
truth = DiscreteSCM.markovian(
    (2, 2),
    ((), (0,)),
    (jnp.array([[0], [1]]), jnp.array([[0, 0], [0, 1], [1, 1]])),
    (jnp.array([0.4, 0.6]), jnp.array([0.2, 0.5, 0.3])),
)


def binary_model(v):
    return v[1].astype(float)


unit = jnp.array([1, 1])
print("true CF-Shapley (binary):", shapley_values(counterfactual_game(truth, binary_model, unit)))
graph_only = DiscreteSCM.canonical((2, 2), ((), (0,)))
b = cf_shapley_bounds(graph_only, binary_model, unit, truth.observational())
print(
    "bounds from observational data:",
    list(zip(b.lower.round(3).tolist(), b.upper.round(3).tolist(), strict=True)),
)
