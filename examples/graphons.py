"""Neural graphon optimisation: the triangle-free Turan problem and a triangle upper tail.

Run: python examples/graphons.py
"""

import jax
import jax.numpy as jnp

from jaxpapers.graphons import (
    NeuralGraphon,
    TailObjective,
    TuranObjective,
    best_reference,
    edge,
    evaluate_tail,
    evaluate_turan,
    optimise_graphon,
    step_density,
    triangle,
)

# Exact density of a step graphon: the hub 1[min(x, y) < b] has t(K3) = 3 b^2 - 2 b^3.
b = 0.3
print(
    "hub t(K3):",
    float(step_density(triangle(), jnp.array([b, 1 - b]), jnp.array([[1.0, 1], [1, 0]]))),
)

g = NeuralGraphon.init(jax.random.key(0), width=24, sharpness=2.0)

# Maximise the edge density while the embedded solver holds t(K3) at 1e-3.
turan = TuranObjective(edge(), triangle(), slack=1e-3)
res = optimise_graphon(
    turan, g, key=jax.random.key(1), steps=150, num_points=32, learning_rate=2e-2
)
vals = evaluate_turan(turan, res.graphon, 100)
print(
    f"triangle-free: edge density {float(vals.value):.3f}, rounded at 1/2 "
    f"{float(vals.rounded_value):.3f} (optimum 0.5)"
)

# Upper tail of triangles in G(n, 0.2): minimise the entropy at t(K3) = 2 p^3.
tail = TailObjective(triangle(), 0.2, 1.0)
res = optimise_graphon(tail, g, key=jax.random.key(2), steps=300, num_points=24, learning_rate=2e-2)
rate, density, _ = evaluate_tail(tail, res.graphon, 100)
print(f"upper tail rate {float(rate):.5f} vs best reference {best_reference(0.2, 1.0).rate:.5f}")
