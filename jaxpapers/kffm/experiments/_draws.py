"""Pair draws with and without replacement: distinct data functions per batch and pair cost.

With replacement each prior draw picks its data partner from its row of the Sinkhorn plan, so
data functions near many prior draws repeat and others drop out of the batch; without
replacement the draw is a random permutation that follows the plan (``replace=False`` of the
pairings), so every data function of the batch is used exactly once. Both draws here come from
the same plan (one Sinkhorn solve per pairing), so they differ only in the draw.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context
from jaxpapers.kffm import draw_indices
from jaxpapers.kffm.experiments._data import Config, Family, dataset, make_pairing, prior

OT_PAIRINGS = ("ot_euclid", "kffm_rbf", "kffm_sobolev", "kffm_signature")
DRAWS = (("with", True), ("without", False))


class DrawStats(NamedTuple):
    """One pairing and draw on one data set, per seed: the fraction of distinct data functions
    among a batch's pairs and the pairs' mean squared L2 distance per grid point."""

    distinct: list[float]
    cost: list[float]


def draw_stats(ctx: Context, config: Config, fam: Family) -> dict[str, dict[str, DrawStats]]:
    """Per data set and row (``"<pairing>/with"``, ``"<pairing>/without"``; ``"ffm"``:
    independent pairs), the :class:`DrawStats` of one training-size batch per seed. One
    program."""
    sizes = config.sizes(fam)
    seeds = ctx.seed_list
    gp = prior(fam, sizes.grid)
    pairings = [make_pairing(p, fam) for p in OT_PAIRINGS]
    x1 = []
    for name in fam.datasets:
        # The training data (``ctx.cached``: generated once per run).
        data = dataset(ctx, name, sizes.n_train + sizes.n_test, sizes.grid)
        for s in seeds:
            rows = np.random.default_rng([31, s]).choice(sizes.n_train, sizes.batch, replace=False)
            x1.append(data[rows])
    x1 = jnp.asarray(np.stack(x1))  # [datasets * seeds, B, *grid]
    keys = jnp.stack([jax.random.key(30_000 + s) for _ in fam.datasets for s in seeds])

    @jax.jit
    @jax.vmap
    def measure(x1, key):
        k0, k1 = jax.random.split(key)
        x0 = gp.sample(sizes.batch, key=k0)
        axes = tuple(range(1, x0.ndim))
        cost = lambda a, b: jnp.mean(jnp.mean((a - b) ** 2, axis=axes))
        out = {"ffm": (jnp.asarray(1.0), cost(x0, x1))}
        for name, pairing in zip(OT_PAIRINGS, pairings, strict=True):
            plan = pairing(x0, x1, key=k1).coupling
            for draw, replace in DRAWS:
                idx = draw_indices(plan, key=k1, replace=replace)
                distinct = jnp.sum(jnp.zeros(sizes.batch).at[idx].set(1.0)) / sizes.batch
                out[f"{name}/{draw}"] = (distinct, cost(x0, x1[idx]))
        return out

    res = jax.tree.map(np.asarray, measure(x1, keys))
    n_s = len(seeds)
    per = lambda v, d_i: [float(x) for x in v[d_i * n_s : (d_i + 1) * n_s]]
    return {
        name: {row: DrawStats(per(d, d_i), per(c, d_i)) for row, (d, c) in res.items()}
        for d_i, name in enumerate(fam.datasets)
    }
