"""Runs behind P14's experiments: seeds and both methods vmapped, one compile per game shape.

Each ``run_*(ctx, config)`` is one experiment's ``run`` (``config``: ``SIZES`` in ``__init__``).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context, Outcome
from jaxpapers.core.pytrees import stack_trees
from jaxpapers.core.stats import fit_loglog_slope
from jaxpapers.markov_games import (
    CHICKEN_PAYOFFS,
    bernstein_regret_bound,
    cce_gap,
    chicken,
    congestion_game,
    lp_cce,
    markov_lp_cce,
    mixture_cce_gap,
    online_cce,
    random_game,
    run_bandit,
    shapley_game,
    simulator_cce,
)
from jaxpapers.markov_games._game import pad_horizon

METHODS = ("paper", "baseline")


def _batch(learner, games, keys, horizons, **kwargs):
    run = lambda g, k, h: learner(g, key=k, horizon=h, **kwargs)
    return jax.vmap(run)(games, keys, horizons)


def simulator_cce_batch(games, keys, horizons, *, epsilon, method, cap, stop=None):
    """:func:`simulator_cce` over stacked games, keys and horizons (one compile per shape and
    stopping rule: the method and the horizon are traced inside)."""
    return _batch(
        simulator_cce,
        games,
        keys,
        horizons,
        epsilon=epsilon,
        method=method,
        stop=stop,
        max_rounds=cap,
    )


def online_cce_batch(games, keys, horizons, *, epsilon, method, cap, stop="exact"):
    """:func:`online_cce` over stacked games, keys and horizons (stopped on the exact gap of
    the output alone by default: the certificates, scaled by ``bonus_scale``, are no valid
    bound, and stopping on them would set the counts by the bonus formulas)."""
    return _batch(
        online_cce,
        games,
        keys,
        horizons,
        epsilon=epsilon,
        method=method,
        max_episodes=cap,
        stop=stop,
    )


def run_bandit_batch(losses, keys, adaptive: bool):
    """Pseudo-regret curves ``[seeds, T]`` of :func:`run_bandit` over stacked loss sequences."""
    run = lambda x, k: run_bandit(x, key=k, variance_adaptive=adaptive).regret
    return jax.vmap(run)(losses, keys)


def run_bandit_certificates(losses, keys, *, delta: float = 0.1):
    """Final pseudo-regret and :func:`bernstein_regret_bound` of the empirical-Bernstein
    bandit over stacked loss sequences ``[seeds, T, A]``: two ``[seeds]`` arrays."""

    def one(x, k):
        r = run_bandit(x, key=k)
        return r.regret[-1], bernstein_regret_bound(r.state, x.shape[1], delta=delta)

    return jax.vmap(one)(losses, keys)


def rare_switch_losses(rounds: int, arms: int, switch: int = 200):
    """A non-stationary sequence: every arm at 0.5, except the last at 1.0 for ``switch``
    rounds and 0.2 after (it becomes the best arm once its estimate has been buried)."""
    L = np.full((rounds, arms), 0.5, np.float32)
    L[:switch, -1] = 1.0
    L[switch:, -1] = 0.2
    return jnp.asarray(L)


class LearnRuns(NamedTuple):
    """Both methods' runs for every (horizon, seed): arrays ``[methods, horizons, seeds]``
    (methods in the order of ``METHODS``)."""

    samples: np.ndarray
    gap: np.ndarray
    certificate: np.ndarray
    converged: np.ndarray


def _learn(
    setting: str, seeds: list[int], config: Any, horizons, players: int, epsilon: float
) -> LearnRuns:
    """Samples, certificates and exact gaps of both methods for every (horizon, seed), all in one
    vmapped call per method (games padded to the longest horizon). Both methods stop by the same
    rule: in the simulator the exact stage gaps and value errors (``stop="exact"``), online the
    exact gap of the output (``stop="exact"``); the online certificates are reported only."""
    longest = max(horizons)
    games, hs = [], []
    for H in horizons:
        for s in seeds:
            key = jax.random.key(1000 + s + 97 * H)
            g = random_game(config.states, H, (config.actions,) * players, key=key)
            games.append(pad_horizon(g, longest))
            hs.append(H)
    games = stack_trees(games)
    hs = jnp.asarray(hs)
    keys = jax.random.split(jax.random.key(7 + 31 * players), len(hs))
    if setting == "simulator":
        learner = partial(simulator_cce_batch, stop="exact")
    else:
        learner = online_cce_batch
    fields = []
    for method in METHODS:
        res = learner(games, keys, hs, epsilon=epsilon, method=method, cap=config.cap)
        gaps = jax.vmap(lambda g, p: cce_gap(g, p).gap)(games, res.policy)
        fields.append((res.samples, gaps, res.certificate, res.converged))
    shape = (len(METHODS), len(horizons), len(seeds))
    return LearnRuns(
        *(np.stack([np.asarray(f[i]) for f in fields]).reshape(shape) for i in range(4))
    )


def _by_horizon(runs: LearnRuns, horizons) -> dict[str, Any]:
    """``{str(float(H)): {method: {field: [per seed]}}}`` (the extras' and plots' layout)."""
    return {
        str(float(H)): {
            method: {name: np.asarray(v)[k, n].tolist() for name, v in runs._asdict().items()}
            for k, method in enumerate(METHODS)
        }
        for n, H in enumerate(horizons)
    }


def _slopes(x: list[float], runs: dict, method: str) -> list[float]:
    """One log-log slope of samples against ``x`` per seed (least squares over the points)."""
    y = np.array([runs[str(v)][method]["samples"] for v in x], float).T  # [seeds, points]
    return [fit_loglog_slope(x, np.maximum(row, 1.0), num_bootstrap=1).slope for row in y]


def _worst_gap(runs: dict, epsilon: float) -> float:
    """The largest exact CCE gap of any stopped output, over epsilon (<= 1 by the rule)."""
    return max(max(r[mm]["gap"]) for r in runs.values() for mm in METHODS) / epsilon


def _all_converged(runs: dict) -> bool:
    return all(all(r[mm]["converged"]) for r in runs.values() for mm in METHODS)


def run_players(ctx: Context, config: Any) -> Outcome:
    seeds = ctx.seed_list
    sum_a = [float(config.actions * m) for m in config.players]
    runs = {}
    for m, x in zip(config.players, sum_a, strict=True):
        learn = partial(
            _learn, "simulator", seeds, config, [config.horizon], m, config.epsilon_players
        )
        runs[str(x)] = _by_horizon(ctx.cached(f"players_{m}", learn), [config.horizon])[
            str(float(config.horizon))
        ]
    values = {f"{method}_slope": _slopes(sum_a, runs, method) for method in METHODS}
    values["worst exact gap / epsilon"] = [_worst_gap(runs, config.epsilon_players)]
    extras = {
        # the bed's difficulty per m: the uniform policy's exact gap on the same games
        "uniform policy exact gap / epsilon (per m, per seed)": {
            str(m): [
                float(cce_gap(g, jnp.full((g.horizon, g.num_states, 2**m), 0.5**m)).gap)
                / config.epsilon_players
                for g in (
                    random_game(
                        config.states,
                        config.horizon,
                        (config.actions,) * m,
                        key=jax.random.key(1000 + s + 97 * config.horizon),
                    )
                    for s in seeds
                )
            ]
            for m in config.players
        },
        "sum_A": sum_a,
        "max_A": config.actions,
        "epsilon": config.epsilon_players,
        "all_converged": _all_converged(runs),
        "runs": runs,
    }
    return Outcome(values, extras)


def run_horizon(ctx: Context, config: Any) -> Outcome:
    seeds = ctx.seed_list
    horizons = [float(h) for h in config.horizons]
    values: dict[str, list[float]] = {}
    extras: dict[str, Any] = {"horizons": horizons, "runs": {}, "epsilon": {}}
    worst = []
    # one epsilon for both settings: with the online learners stopped on the exact gap alone,
    # the larger ``config.epsilon`` (0.5 in quick) is met by the first episode's near-uniform
    # policy at H = 2 and 3 (nothing learned, the slope set by the bed)
    for setting, eps in (("simulator", config.epsilon_horizon), ("online", config.epsilon_horizon)):
        learn = partial(_learn, setting, seeds, config, list(config.horizons), 2, eps)
        runs = _by_horizon(ctx.cached(setting, learn), list(config.horizons))
        extras["runs"][setting] = runs
        extras["epsilon"][setting] = eps
        extras[f"{setting}_all_converged"] = _all_converged(runs)
        worst.append(_worst_gap(runs, eps))
        for method in METHODS:
            values[f"{setting}_{method}_slope"] = _slopes(horizons, runs, method)
    values["worst exact gap / epsilon"] = [max(worst)]
    return Outcome(values, extras)


def run_bandit_variance(ctx: Context, config: Any) -> Outcome:
    seeds = ctx.seed_list
    means = np.full(config.arms, 0.5)
    means[0] = 0.5 - config.gap
    values, curves = {}, {}
    for noise in ("low_variance", "bernoulli"):

        def losses_for(seed, noise=noise):
            k = jax.random.key(seed)
            if noise == "low_variance":
                u = jax.random.uniform(k, (config.rounds, config.arms), minval=-1.0, maxval=1.0)
                return jnp.asarray(means)[None, :] + config.spread * u
            probs = jnp.broadcast_to(jnp.asarray(means), (config.rounds, config.arms))
            return jax.random.bernoulli(k, probs).astype(jnp.float32)

        losses = jnp.stack([losses_for(s) for s in seeds])
        keys = jax.random.split(jax.random.key(3), len(seeds))
        for name, adaptive in (("bernstein", True), ("exp3", False)):
            regret = run_bandit_batch(losses, keys, adaptive)
            values[f"{name}_{noise}"] = (np.asarray(regret[:, -1], float) / config.rounds).tolist()
            stride = max(1, config.rounds // 100)
            curves[f"{name}_{noise}"] = np.asarray(regret.mean(0)[::stride], float).tolist()
    # the certificate on a non-stationary sequence (reported, not judged: see the claim)
    rare = jnp.broadcast_to(
        rare_switch_losses(config.rounds, config.arms), (len(seeds), config.rounds, config.arms)
    )
    regret, bound = run_bandit_certificates(rare, jax.random.split(jax.random.key(5), len(seeds)))
    extras = {
        "curves": curves,
        "means": means.tolist(),
        "spread": config.spread,
        "non-stationary (rare switch): bernstein regret": np.asarray(regret, float).tolist(),
        "non-stationary (rare switch): certificate (delta 0.1)": np.asarray(bound, float).tolist(),
    }
    return Outcome(values, extras)


def run_sanity(ctx: Context, config: Any) -> Outcome:
    seeds = ctx.seed_list
    lp = lp_cce(CHICKEN_PAYOFFS)
    values: dict[str, list[float]] = {"chicken_lp_welfare_error": [abs(lp.welfare - 10.5)]}
    lp_gaps, mix_diff, sim_ratio = [], [], []
    for s in seeds:
        g = random_game(2, 2, (2, 2), key=jax.random.key(2000 + s))
        pol = markov_lp_cce(g)
        lp_gaps.append(abs(float(cce_gap(g, jnp.asarray(pol)).gap)))
        uniform = np.full_like(pol, 1.0 / pol.shape[-1])
        markov = float(cce_gap(g, jnp.asarray(uniform)).gap)
        mix_diff.append(abs(mixture_cce_gap(g, uniform[None], np.ones(1)) - markov))
    for g in (chicken(), shapley_game(), congestion_game(3)):
        keys = jax.random.split(jax.random.key(11), len(seeds))
        batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(seeds), *x.shape)), g)
        hs = jnp.ones(len(seeds), int)
        res = simulator_cce_batch(
            batch, keys, hs, epsilon=config.epsilon, method="paper", cap=config.cap
        )
        gaps = jax.vmap(lambda gg, p: cce_gap(gg, p).gap)(batch, res.policy)
        sim_ratio.append(float(jnp.max(gaps)) / config.epsilon)
    values["random_game_lp_gap"] = lp_gaps
    values["mixture_vs_markov_gap_diff"] = mix_diff
    values["matrix_games_gap_over_epsilon"] = sim_ratio
    return Outcome(values, {"chicken_lp_weights": lp.weights.tolist()})


def plot_slopes(outcome: Outcome, path, *, xkey: str, xlabel: str, groups) -> None:
    import matplotlib.pyplot as plt

    x = outcome.extras[xkey]
    fig, ax = plt.subplots(figsize=(5, 4))
    for label, runs in groups(outcome.extras):
        for method, marker in (("paper", "o"), ("baseline", "s")):
            ys = [np.mean(runs[k][method]["samples"]) for k in sorted(runs, key=float)]
            ax.loglog(x, ys, marker=marker, label=f"{label} {method}")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("samples to a certified epsilon-CCE")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_players(outcome: Outcome, path) -> None:
    plot_slopes(
        outcome,
        path,
        xkey="sum_A",
        xlabel="sum_i A_i (max_i A_i fixed)",
        groups=lambda e: [("simulator", e["runs"])],
    )


def plot_horizon(outcome: Outcome, path) -> None:
    plot_slopes(
        outcome, path, xkey="horizons", xlabel="horizon H", groups=lambda e: list(e["runs"].items())
    )


def plot_bandit(outcome: Outcome, path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4))
    for name, curve in outcome.extras["curves"].items():
        ax.plot(np.linspace(0, 1, len(curve)), curve, label=name)
    ax.set_xlabel("fraction of rounds")
    ax.set_ylabel("pseudo-regret")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
