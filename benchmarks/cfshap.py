"""P10 benchmark: exact counterfactual Shapley values over 2^n coalitions, and the LP bounds.

Exact values: a random linear-Gaussian SCM with n features (edge probability 0.4), a nonlinear
model, 32 background draws; all 2^n coalitions are evaluated in batches of 4096 (``lax.map``) and
aggregated with the (n, 2^n) Shapley weight matrix. Bounds: the three-variable binary graph
X0 -> X1 -> X2, X0 -> X2 with observational and all single-variable interventional laws
(6 programmes, 128 response-function combinations, HiGHS).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxpapers.cfshap import (
    DiscreteSCM,
    LinearGaussianSCM,
    TableModel,
    cf_shapley_bounds,
    counterfactual_game,
    shapley_values,
)
from jaxpapers.core.bench import bench_main, median_time, row


def _model(v):
    return jnp.tanh(v[0] * v[-1]) + jnp.sum(jnp.sin(v))


def _exact_time(n: int) -> float:
    kw, kb, kx = jax.random.split(jax.random.key(n), 3)
    w = jnp.tril(jax.random.normal(kw, (n, n)) * 0.5, k=-1) * (jax.random.uniform(kb, (n, n)) < 0.4)
    scm = LinearGaussianSCM(w)
    game = counterfactual_game(scm, _model, scm.sample(kx, 1)[0], background=scm.sample(kb, 32))
    return median_time(lambda g: shapley_values(g).block_until_ready(), game, repeats=3)


def _lp_time() -> float:
    parents = ((), (0,), (0, 1))
    with jax.enable_x64(True):
        mono = DiscreteSCM.canonical((2, 2, 2), parents, monotone=True)
        q = jax.random.dirichlet(jax.random.key(0), jnp.full(mono.num_noise, 0.3))
        truth = DiscreteSCM(mono.cards, parents, mono.functions, q)
        full = DiscreteSCM.canonical((2, 2, 2), parents)
        model = TableModel(jax.random.uniform(jax.random.key(1), (8,)), (4, 2, 1))
        x = jnp.array([1, 1, 1])
        obs = truth.observational()
        ints = {(i, a): truth.interventional(i, a) for i in range(3) for a in range(2)}
        return median_time(
            lambda: cf_shapley_bounds(full, model, x, obs, interventional=ints), repeats=3
        )


def run(quick: bool = True) -> list[dict]:
    rows = []
    for n in (8, 12, 16) if quick else (8, 12, 16, 18):
        rows.append(row(f"cfshap_exact_features_{n}_time", "time", _exact_time(n), "s"))
        print(rows[-1], flush=True)
    rows.append(row("lp_bounds_time", "time", _lp_time(), "s (3 features, obs + do, 6 LPs)"))
    print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    bench_main("cfshap", run)
