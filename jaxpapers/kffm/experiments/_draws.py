"""Pair draws with and without replacement: distinct data functions per batch and pair cost.

With replacement each prior draw picks its data partner from its row of the Sinkhorn plan, so
data functions near many prior draws repeat and others drop out of the batch; without
replacement the draw is a random permutation that follows the plan (``replace=False`` of the
pairings), so every data function of the batch is used exactly once. Both draws here come from
the same plan (one Sinkhorn solve per pairing), so they differ only in the draw.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.pytrees import FAST_COMPILE
from jaxpapers.kffm import draw_indices
from jaxpapers.kffm.experiments._data import DATA_SEEDS, Family, Sizes, dataset, make_pairing, prior

OT_PAIRINGS = ("ot_euclid", "kffm_rbf", "kffm_sobolev", "kffm_signature")
DRAWS = (("with", True), ("without", False))


def draw_stats(fam: Family, sizes: Sizes, seeds: list[int]) -> dict:
    """Per data set, pairing and draw (rows ``"<pairing>/with"``, ``"<pairing>/without"``), per
    seed: the fraction of distinct data functions in one training-size batch and the mean squared
    L2 distance per grid point of the pairs (row ``"ffm"``: independent pairs). One program."""
    gp = prior(fam, sizes.grid)
    pairings = [make_pairing(p, fam) for p in OT_PAIRINGS]
    x1 = []
    for name in fam.datasets:
        # The training data (cached per process: generated once per run).
        data = dataset(name, DATA_SEEDS[name], sizes.n_train + sizes.n_test, sizes.grid)
        for s in seeds:
            rows = np.random.default_rng([31, s]).choice(sizes.n_train, sizes.batch, replace=False)
            x1.append(data[rows])
    x1 = jnp.asarray(np.stack(x1))  # [datasets * seeds, B, *grid]
    keys = jnp.stack([jax.random.key(30_000 + s) for _ in fam.datasets for s in seeds])

    @functools.partial(jax.jit, compiler_options=FAST_COMPILE)
    @jax.vmap
    def measure(x1, key):
        k0, k1 = jax.random.split(key)
        x0 = gp.sample(k0, sizes.batch)
        axes = tuple(range(1, x0.ndim))
        cost = lambda a, b: jnp.mean(jnp.mean((a - b) ** 2, axis=axes))
        out = {"ffm": (jnp.asarray(1.0), cost(x0, x1))}
        for name, pairing in zip(OT_PAIRINGS, pairings, strict=True):
            plan = pairing(x0, x1, key=k1).coupling
            for draw, replace in DRAWS:
                idx = draw_indices(k1, plan, replace)
                distinct = jnp.sum(jnp.zeros(sizes.batch).at[idx].set(1.0)) / sizes.batch
                out[f"{name}/{draw}"] = (distinct, cost(x0, x1[idx]))
        return out

    res = jax.tree.map(np.asarray, measure(x1, keys))
    n_s = len(seeds)
    return {
        name: {
            row: {
                "distinct": [float(v) for v in d[d_i * n_s : (d_i + 1) * n_s]],
                "cost": [float(v) for v in c[d_i * n_s : (d_i + 1) * n_s]],
            }
            for row, (d, c) in res.items()
        }
        for d_i, name in enumerate(fam.datasets)
    }
