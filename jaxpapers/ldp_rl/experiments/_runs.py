"""Vmapped runs behind the P15 experiments: seeds x privacy levels in one compiled call each."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.stats import fit_loglog_slope
from jaxpapers.ldp_rl import (
    exp3_ldp,
    exp3_params,
    random_contextual_bandit,
    random_episodic_mdp,
    ucbvi_ldp,
)


def minimax_bandit_rate(S: int, A: int, K, epsilon: float) -> np.ndarray:
    r"""The minimax LDP contextual-bandit regret rate (no constants):
    :math:`\min(K, \sqrt{\max(S, e^\epsilon + 1) S A K (e^\epsilon + 1)} / (e^\epsilon - 1))`."""
    e = np.exp(epsilon)
    K = np.asarray(K, np.float64)
    return np.minimum(K, np.sqrt(max(S, e + 1) * S * A * K * (e + 1)) / (e - 1))


def bandit_regret(S: int, A: int, K: int, epsilons, seeds, *, private: bool) -> np.ndarray:
    """Cumulative regret curves ``[len(epsilons), len(seeds), K]``; seed i draws the bandit and
    the run from ``key(i)`` (the same bandit for every epsilon)."""
    eps = list(epsilons) if private else [None]
    params = [exp3_params(S, A, K, e) for e in eps]
    eta = jnp.stack([p.eta for p in params])
    gamma = jnp.stack([p.gamma for p in params])
    eps_arr = jnp.asarray([1.0 if e is None else e for e in eps], jnp.float32)

    def one(seed, e, et, g):
        kb, kr = jax.random.split(jax.random.key(seed))
        bandit = random_contextual_bandit(kb, S, A)
        p = type(params[0])(et, g)
        return exp3_ldp(bandit, K, e if private else None, key=kr, params=p).regret

    per_eps = jax.vmap(one, in_axes=(None, 0, 0, 0))
    run = jax.jit(jax.vmap(per_eps, in_axes=(0, None, None, None)))
    out = run(jnp.asarray(seeds), eps_arr, eta, gamma)  # [seeds, eps, K]
    return np.asarray(jnp.swapaxes(out, 0, 1), np.float64)


def rl_regret(S: int, A: int, H: int, K: int, epsilons, seeds, *, private: bool) -> np.ndarray:
    """UCBVI(-LDP) cumulative regret curves ``[len(epsilons), len(seeds), K]``."""
    eps = jnp.asarray(list(epsilons) if private else [1.0], jnp.float32)

    def one(seed, e):
        km, kr = jax.random.split(jax.random.key(seed))
        mdp = random_episodic_mdp(km, S, A, H)
        return ucbvi_ldp(mdp, K, e if private else None, key=kr).regret

    run = jax.jit(jax.vmap(jax.vmap(one, in_axes=(None, 0)), in_axes=(0, None)))
    return np.asarray(jnp.swapaxes(run(jnp.asarray(seeds), eps), 0, 1), np.float64)


def checkpoints(K: int, count: int = 5) -> np.ndarray:
    """``count`` geometrically spaced horizons ending at ``K``."""
    return np.unique(np.geomspace(K / 2 ** (count - 1), K, count).astype(int))


def per_seed_slopes(curves: np.ndarray, ks: np.ndarray) -> list[float]:
    """Least-squares exponent of regret in K for each seed (rows of ``curves[:, ks - 1]``)."""
    y = np.maximum(curves[:, ks - 1], 1e-9)
    return [float(np.polyfit(np.log(ks), np.log(row), 1)[0]) for row in y]


def slope_summary(curves: np.ndarray, ks: np.ndarray) -> dict[str, float]:
    """Bootstrap (over seeds) log-log fit of the mean regret curve."""
    fit = fit_loglog_slope(ks.astype(float), np.maximum(curves[:, ks - 1], 1e-9))
    return fit._asdict()
