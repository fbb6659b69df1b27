"""Measurements behind the P19 experiments (one function per experiment).

Every seed's random restarts run in one ``vmap``-ed program per problem; the programs are plain
``jax.jit`` functions of module level, so an experiment that builds a program of the same
configuration and shapes as an earlier one (the tails' training, the initial graphons) reuses it
through jit's own cache.
"""

from __future__ import annotations

import functools
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.graphons import (
    NeuralGraphon,
    TailObjective,
    TuranObjective,
    best_reference,
    clique,
    constant_construction,
    cycle,
    edge,
    evaluate_tail,
    evaluate_turan,
    optimise_graphon,
    plain_mc_density,
    shifted_matrix,
    solve_shift,
    step_density,
    symmetric_mc_density,
    triangle,
)

#: Turan problems: (maximised graph, forbidden graph, known optimum).
TURAN = (
    ("triangle_free_edge", edge(), triangle(), 0.5),
    ("k4_free_triangle", triangle(), clique(4), 2 / 9),
)


@functools.partial(jax.jit, static_argnames="sharpness")
def _init_graphons(ids: jax.Array, *, sharpness: float) -> NeuralGraphon:
    """The restarts' initial graphons from their integer seeds (vmapped; one program instead of
    an eager vmapped ``uniform`` per parameter shape)."""
    init = lambda seed: NeuralGraphon(key=jax.random.key(seed), sharpness=sharpness)
    return jax.vmap(init)(ids)


def restart_ids(ctx: Context, restarts: int) -> np.ndarray:
    """The integer ids of every seed's random restarts, ``(seeds * restarts,)`` seed-major:
    restart ``r`` of seed ``s`` is ``s + 100 r`` (its initial graphon and its training points
    come from this id; restart 0 of seed ``s`` is the single run of seed ``s``)."""
    seeds = np.asarray(ctx.seed_list, np.int32)
    return (seeds[:, None] + 100 * np.arange(restarts, dtype=np.int32)[None, :]).reshape(-1)


def initial_graphons(ctx: Context, config, ids=None) -> NeuralGraphon:
    """The initial graphons of ``ids`` (default: one per seed, id = seed), stacked."""
    ids = np.asarray(ctx.seed_list, np.int32) if ids is None else ids
    return _init_graphons(ids, sharpness=config.sharpness)


@functools.partial(jax.jit, static_argnames=("steps", "num_points", "learning_rate", "offset"))
def _train(objective, graphons, ids, *, steps, num_points, learning_rate, offset):
    """Adam on ``objective`` for every restart (vmapped), restart ``s`` drawing its points from
    key ``offset + s``; the objective is an argument, so problems that differ only in arrays
    (the tails' ``p``, ``delta``, ``sign``) share the program. Adam's step decays from
    ``learning_rate`` to 0 by a cosine over the steps: at a constant 2e-2 the K4-free training's
    own objective (the sampled triangle density) peaked near 2/9 around step 150-300 and then fell
    (to 0.02-0.07 by step 1500)."""
    schedule = optax.cosine_decay_schedule(learning_rate, steps)

    def train(graphon, seed):
        return optimise_graphon(
            objective,
            graphon,
            key=jax.random.key(offset + seed),
            steps=steps,
            num_points=num_points,
            learning_rate=schedule,
        ).graphon

    return jax.vmap(train)(graphons, ids)


@functools.partial(jax.jit, static_argnames=("grid", "heatmap"))
def _evaluate(objective, graphons, *, grid, heatmap):
    """Grid values of every restart (:func:`evaluate_turan` or :func:`evaluate_tail`) and its
    heatmap (``W`` with the grid shift on ``heatmap`` points), vmapped."""
    evaluate = evaluate_turan if isinstance(objective, TuranObjective) else evaluate_tail

    def one(graphon):
        values = evaluate(objective, graphon, grid)
        shift = values[-1]
        return values, shifted_matrix(graphon, shift, heatmap)

    return jax.vmap(one)(graphons)


def _train_and_evaluate(objective, graphons, ids, *, train: dict, evaluate: dict):
    """Train every restart ``ids`` (``train``: the keyword arguments of :func:`_train`), then
    evaluate it on the grid (``evaluate``: those of :func:`_evaluate`); the evaluation compiles
    while the training runs (dispatch is asynchronous). Returns the host values and heatmaps."""
    trained = _train(objective, graphons, ids, **train)
    values, maps = _evaluate(objective, trained, **evaluate)
    return jax.tree.map(np.asarray, values), np.asarray(maps)


@jax.jit
def _step_estimates(a, values, reps):
    """Both Monte Carlo estimators of ``t(C4)`` for the two-block step graphon (``a``: the
    first block's size), repetitions vmapped; jitted once for all seeds."""

    def step_graphon(x, y):
        return values[(x >= a).astype(int), (y >= a).astype(int)]

    sym = jax.vmap(lambda k: symmetric_mc_density(cycle(4), step_graphon, key=k, num_points=64))
    plain = jax.vmap(lambda k: plain_mc_density(cycle(4), step_graphon, key=k, num_tuples=512))
    return sym(reps), plain(reps)


@functools.partial(jax.jit, static_argnames="reps")
def _sanity_values(seed, *, reps: int):
    """One seed's step densities and Monte Carlo estimates (one program for all seeds; the eager
    version compiled some 30 small programs)."""
    k1, k2, _ = jax.random.split(jax.random.key(seed), 3)
    pab = jax.random.uniform(k1, (3,), minval=0.1, maxval=0.9)
    p, a, b = pab
    densities = jnp.stack(
        [
            step_density(cycle(5), jnp.ones(1), jnp.full((1, 1), p)),
            step_density(triangle(), jnp.array([a, 1 - a]), jnp.array([[1.0, 0], [0, 0]])),
            step_density(triangle(), jnp.array([b, 1 - b]), jnp.array([[1.0, 1], [1, 0]])),
        ]
    )
    values = jnp.array([[0.9, p], [p, 0.2]])
    exact = step_density(cycle(4), jnp.array([a, 1 - a]), values)
    sym, plain = _step_estimates(a, values, jax.random.split(k2, reps))
    return pab, densities, exact, sym, plain


def _shift_residual(seed: int) -> float:
    """The shift solver's residual for an edge-density target on random symmetric logits
    (eager, as the solver is used outside the experiments)."""
    k1, _, k3 = jax.random.split(jax.random.key(seed), 3)
    p = np.asarray(jax.random.uniform(k1, (3,), minval=0.1, maxval=0.9))[0]
    L = jax.random.normal(k3, (32, 32))
    return abs(float(solve_shift(edge(), L + L.T, float(p)).residual))


def sanity(ctx: Context, config) -> Outcome:
    """Exact step densities against closed forms; both Monte Carlo estimators against exact
    values; the shift solver's residual."""
    closed, zs = [], []
    for seed in ctx.seed_list:
        pab, densities, exact, sym, plain = _sanity_values(np.int32(seed), reps=config.sanity_reps)
        p, a, b = np.asarray(pab)
        t_c5, t_clique, t_hub = (float(d) for d in densities)
        errs = [t_c5 - p**5, t_clique - a**3, t_hub - (3 * b**2 - 2 * b**3)]
        closed.append(float(np.max(np.abs(errs))))
        for est in (sym, plain):
            zs.append(
                abs(float(est.mean()) - float(exact))
                / (float(est.std()) / np.sqrt(config.sanity_reps))
            )
    resid = [_shift_residual(seed) for seed in ctx.seed_list]
    return Outcome(
        {
            "step_closed_form_error": closed,
            "mc_zscore_max": [max(zs[2 * i : 2 * i + 2]) for i in range(len(closed))],
            "shift_residual": resid,
        },
        {},
    )


def turan_rows(name: str, dens, rdens, rforb, optimum: float, shape: tuple[int, int]):
    """Rows of one Turan problem from its restarts' grid values (flat, seed-major): each seed's
    restart with the largest training objective ``dens`` (selection never reads the judged
    rounded values), its distance to ``optimum`` and rounded forbidden density, and each seed's
    share of restarts whose rounded forbidden density is below 0.005. Returns the rows, the
    chosen restart per seed and its flat index."""
    dens, rdens, rforb = (np.asarray(v).reshape(-1) for v in (dens, rdens, rforb))
    best = np.argmax(dens.reshape(shape), axis=1)
    flat = np.arange(shape[0]) * shape[1] + best
    values = {
        name: np.abs(rdens[flat] - optimum).tolist(),
        f"{name}_forbidden": rforb[flat].tolist(),
        f"{name}_restart_pass_share": (rforb < 0.005).reshape(shape).mean(1).tolist(),
    }
    return values, best, flat


def turan(ctx: Context, config) -> Outcome:
    """Train neural graphons on the Turan problems (every seed's restarts vmapped); grid values
    at the end. A seed's value is its best restart's: the restart with the best training
    objective (the largest density ``t(K_r, W)`` with the forbidden density held at the slack,
    re-solved on the grid), never selected on the judged rounded values;
    ``{name}_restart_pass_share`` reports, per seed, the share of its restarts whose rounded
    forbidden density is below 0.005."""
    ids = restart_ids(ctx, config.restarts)
    graphons = initial_graphons(ctx, config, ids)
    shape = (len(ctx.seed_list), config.restarts)
    values, extras = {}, {"heatmaps": {}, "restarts": config.restarts}
    for (name, hmax, hforb, optimum), points in zip(TURAN, config.turan_points, strict=True):
        obj = TuranObjective(hmax, hforb, slack=config.slack)
        train = dict(
            steps=config.turan_steps,
            num_points=points,
            learning_rate=config.learning_rate,
            offset=1000,
        )
        evaluate = dict(grid=config.turan_grid, heatmap=config.heatmap)
        (dens, forb, rdens, rforb, _), maps = _train_and_evaluate(
            obj, graphons, ids, train=train, evaluate=evaluate
        )
        vals, best, flat = turan_rows(name, dens, rdens, rforb, optimum, shape)
        values.update(vals)
        extras[name] = {
            "value": dens.reshape(shape),
            "forbidden_density": forb.reshape(shape),
            "rounded_value": rdens.reshape(shape),
            "rounded_forbidden_density": rforb.reshape(shape),
            "best_restart": best,
            "optimum": optimum,
        }
        extras["heatmaps"][name] = maps[flat[0]]
    return Outcome(values, extras)


#: relative grid-density error up to which a tail candidate counts as meeting its constraint
FEASIBLE = 1e-2


def _tail(ctx: Context, config, settings, upper: bool) -> tuple[dict, dict]:
    """The tail problems ``settings`` (one training program for all, upper and lower alike). Per
    setting, row ``label`` is each seed's best rate over its restarts that meet the density
    constraint on the grid, divided by the reference rate (``inf`` for a seed with no such
    restart), and row ``label_reference`` the reference's own ratio, 1."""
    ids = restart_ids(ctx, config.restarts)
    graphons = initial_graphons(ctx, config, ids)
    n_seeds = len(ctx.seed_list)
    train = dict(
        steps=config.tail_steps,
        num_points=config.points,
        learning_rate=config.learning_rate,
        offset=2000,
    )
    evaluate = dict(grid=config.grid, heatmap=config.heatmap)
    values, extras = {}, {"heatmaps": {}, "references": {}, "rates": {}}
    extras["restarts"] = config.restarts
    shape = (n_seeds, config.restarts)
    for p, delta in settings:
        obj = TailObjective(triangle(), p, delta, upper=upper)
        (rate, dens, _), maps = _train_and_evaluate(
            obj, graphons, ids, train=train, evaluate=evaluate
        )
        target = float(obj.target)
        ref = best_reference(p, delta) if upper else constant_construction(p, delta, upper=False)
        label = f"p{p:g}_d{delta:g}"
        # a seed's answer is its best restart among those meeting the density constraint on the
        # grid (|t - target| <= 1% of target)
        feasible = (np.abs(dens - target) <= FEASIBLE * target).reshape(shape)
        candidates = np.where(feasible, rate.reshape(shape), np.inf)
        best = np.argmin(candidates, axis=1)
        values[label] = (candidates.min(axis=1) / ref.rate).tolist()
        values[f"{label}_reference"] = [1.0] * n_seeds
        extras["feasible"] = {**extras.get("feasible", {}), label: feasible.tolist()}
        extras["ratios_per_restart"] = {
            **extras.get("ratios_per_restart", {}),
            label: (rate / ref.rate).reshape(shape),
        }
        extras["rates"][label] = rate.reshape(shape)
        extras["references"][label] = ref._asdict()
        extras["heatmaps"][label] = maps[int(best[0])]
        extras[f"{label}_density_error"] = float(np.max(np.abs(dens - target)))
    return values, extras


def upper_tail(ctx: Context, config) -> Outcome:
    values, extras = _tail(ctx, config, config.upper, upper=True)
    return Outcome(values, extras)


def lower_tail(ctx: Context, config) -> Outcome:
    values, extras = _tail(ctx, config, config.lower, upper=False)
    return Outcome(values, extras)


CONTROL_GRID = 16  # step control variate: 136 more evaluations on a 16 x 16 grid


@functools.partial(jax.jit, static_argnames=("m", "control", "tuples", "reps"))
def _variance_estimates(H, graphons, seeds, *, m: int, control: int, tuples, reps: int):
    """For stacked graphons and integer seeds: the symmetric estimates with and without the step
    control variate (the same sampled points) and plain Monte Carlo at each budget in
    ``tuples``, seeds and repetitions vmapped (one compile per pattern); seed ``s``'s
    repetitions use the keys ``split(key(10000 + s), reps)``."""

    def one(g, k):
        sym = symmetric_mc_density(H, g, key=k, num_points=m)
        sym_cv = symmetric_mc_density(H, g, key=k, num_points=m, control_grid=control)
        plain = [plain_mc_density(H, g, key=k, num_tuples=n) for n in tuples]
        return sym, sym_cv, jnp.stack(plain)

    def over_reps(g, seed):
        return jax.vmap(one, in_axes=(None, 0))(g, jax.random.split(jax.random.key(seed), reps))

    return jax.vmap(over_reps)(graphons, seeds)


def estimator_variance(ctx: Context, config) -> Outcome:
    """Variance of symmetric vs plain Monte Carlo at equal sampled points and at equal graphon
    evaluations (``m`` points: ``m (m - 1) / 2`` unordered pairs)."""
    m, grid = config.variance_points, CONTROL_GRID
    graphons = initial_graphons(ctx, config)
    seeds = 10_000 + np.asarray(ctx.seed_list, np.int32)
    ratios = {}
    for name, H in (("K3", triangle()), ("C4", cycle(4))):
        # plain Monte Carlo budgets: m / k tuples (equal points), and as many graphon
        # evaluations as the U-statistic without and with the control grid
        evals = m * (m - 1) // 2
        tuples = (
            m // H.num_nodes,
            evals // H.num_edges,
            (evals + grid * (grid + 1) // 2) // H.num_edges,
        )
        sym, sym_cv, plain = _variance_estimates(
            H, graphons, seeds, m=m, control=grid, tuples=tuples, reps=config.variance_reps
        )
        plain_var = np.asarray(jnp.var(plain, axis=1))  # [seeds, budgets]
        ratios[name] = {}
        for cv, est, at_evals in (("_cv", sym_cv, 2), ("", sym, 1)):
            sym_var = np.asarray(jnp.var(est, axis=1))
            ratios[name][cv] = {
                "equal_points": (sym_var / plain_var[:, 0]).tolist(),
                "equal_evaluations": (sym_var / plain_var[:, at_evals]).tolist(),
            }
    rows = {
        f"{name}{cv}_{budget}": ratios[name][cv][budget]
        for cv in ("_cv", "")
        for name in ("K3", "C4")
        for budget in ("equal_points", "equal_evaluations")
    }
    extras = {
        "points": m,
        "control_grid": grid,
        "evaluations": m * (m - 1) // 2,
        "evaluations_with_control": m * (m - 1) // 2 + grid * (grid + 1) // 2,
    }
    return Outcome(rows, extras)


def plot_heatmaps(outcome: Outcome, path: Path) -> None:
    import matplotlib.pyplot as plt

    maps = outcome.extras["heatmaps"]
    fig, axes = plt.subplots(1, len(maps), figsize=(3.2 * len(maps), 3.2), squeeze=False)
    for ax, (name, W) in zip(axes[0], maps.items(), strict=True):
        im = ax.imshow(np.asarray(W), origin="lower", extent=(0, 1, 0, 1), cmap="viridis")
        ax.set_title(name, fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
