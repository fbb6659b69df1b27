"""P06 training: every data set x pairing x seed of a family in one jitted program."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers.core.experiment import Context
from jaxpapers.kffm import FNO1d, FNO2d, regression_loss
from jaxpapers.kffm.experiments._data import Config, Family, Sizes, dataset, make_pairing, prior


def make_models(sizes: Sizes, seeds: list[int], n_copies: int, ndim: int = 1):
    """``n_copies x len(seeds)`` FNOs, stacked; copy ``c`` of seed ``s`` starts from ``Rngs(s)``.

    One jitted initialiser builds every seed's model (built eagerly, every parameter
    initialiser would compile a small program of its own). The draws are the same threefry bits
    as an eager build; the truncated-normal weights may differ from it by one float32 ulp (the
    ``erf_inv`` is compiled differently).
    """
    from flax import nnx

    graphdefs = []

    def init(key):
        kw = dict(width=sizes.width, modes=sizes.modes, depth=sizes.depth, rngs=nnx.Rngs(key))
        model = FNO1d(**kw) if ndim == 1 else FNO2d(periodic=True, **kw)
        graphdef, state = nnx.split(model, nnx.Param)
        graphdefs.append(graphdef)
        return state

    init = jax.jit(init)
    states = [init(jax.random.key(s)) for s in seeds]
    per_seed = jax.tree.map(lambda *xs: np.stack(xs), *states)
    stacked = jax.tree.map(lambda p: np.tile(p, (n_copies,) + (1,) * (p.ndim - 1)), per_seed)
    graphdef = graphdefs[-1]

    def apply(params, x, t):
        return nnx.merge(graphdef, params)(x[..., None], t)[..., 0]

    return apply, stacked


class Trained(NamedTuple):
    apply: Callable[..., jax.Array]
    params: Any  # stacked over (dataset, method, seed), in that order
    test: np.ndarray  # [datasets, n_test, *grid]
    prior: Any


def model_index(d: int, m: int, j: int, n_seeds: int, n_methods: int) -> int:
    """Position of data set ``d``, method ``m``, seed ``j`` in the stacked models."""
    return (d * n_methods + m) * n_seeds + j


def train_all(ctx: Context, config: Config, fam: Family) -> Trained:
    """Train every data set x method x seed of ``fam`` in one jitted program (package docstring),
    with orbax checkpoints in ``ctx.checkpoint_dir``."""
    from jaxpapers.core.train import train

    sizes = config.sizes(fam)
    seeds = ctx.seed_list
    n_d, n_m, n_s = len(fam.datasets), len(fam.methods), len(seeds)
    gshape = (sizes.grid,) * fam.ndim
    pairings = [make_pairing(name, fam) for name in fam.methods]
    data = np.stack(
        [dataset(ctx, name, sizes.n_train + sizes.n_test, sizes.grid) for name in fam.datasets]
    )
    train_x, test_x = data[:, : sizes.n_train], data[:, sizes.n_train :]
    gp = prior(fam, sizes.grid)
    if gp.grid_shape != data.shape[2:]:
        raise ValueError(
            f"prior grid {gp.grid_shape} does not match the data grid {data.shape[2:]}"
        )
    apply, params = make_models(sizes, seeds, n_d * n_m, fam.ndim)

    def loss_fn(params, batch, key):
        x1 = jnp.swapaxes(batch, 0, 1)  # [datasets * seeds, B, *grid], group g = d * S + s
        groups = jnp.arange(n_d * n_s)
        keys = jax.vmap(lambda g: jax.random.split(jax.random.fold_in(key, g % n_s), 3))(groups)
        x0 = jax.vmap(lambda k: gp.sample(sizes.batch, key=k))(keys[:, 0])
        t = jax.vmap(lambda k: jax.random.uniform(k, (sizes.batch,)))(keys[:, 1])
        x0s, x1s = [], []
        for pairing in pairings:
            p = jax.vmap(lambda a, b, k, pairing=pairing: pairing(a, b, key=k))(x0, x1, keys[:, 2])
            x0s.append(p.x0)
            x1s.append(p.x1)

        def order(xs):  # [M, D*S, ...] -> [D*M*S, ...] in (dataset, method, seed) order
            x = jnp.stack(xs).reshape((n_m, n_d, n_s, *xs[0].shape[1:]))
            return jnp.swapaxes(x, 0, 1).reshape((n_d * n_m * n_s, *xs[0].shape[1:]))

        ts = order([t] * n_m)
        per_model = jax.vmap(functools.partial(regression_loss, apply))(
            params, order(x0s), order(x1s), ts
        )
        # Each model's gradient is that of its own mean loss: the sum decouples them under Adam.
        return jnp.sum(per_model)

    def batch_fn(step: int) -> np.ndarray:
        rng = np.random.default_rng([7, step])
        idx = rng.integers(0, sizes.n_train, size=(sizes.batch, n_d, n_s))
        rows = train_x[np.arange(n_d)[None, :, None], idx]  # [B, D, S, *grid]
        return rows.reshape(sizes.batch, n_d * n_s, *gshape)

    schedule = optax.cosine_decay_schedule(sizes.lr, sizes.steps, alpha=0.1)
    result = train(
        loss_fn,
        params,
        optax.adam(schedule),
        batch_fn,
        steps=sizes.steps,
        key=jax.random.key(42),
        checkpoint_dir=ctx.checkpoint_dir(f"train_{fam.name}"),
        checkpoint_every=config.checkpoint_every,
        desc=f"P06 train ({fam.name})",
    )
    return Trained(apply, result.params, test_x, gp)
