"""Vmapped runs behind the P15 experiments: seeds x privacy levels in one compiled call each."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.stats import fit_loglog_slope
from jaxpapers.ldp_rl import (
    Exp3Params,
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


def bandit_final_regret(S: int, A: int, ks, epsilons, seeds, *, private: bool) -> np.ndarray:
    """Final regret of separate runs, one per horizon: ``[len(epsilons), len(seeds), len(ks)]``.

    The run for horizon ``K`` uses :func:`exp3_params` tuned for that ``K`` and is read after
    ``K`` rounds (it never sees a later round, so it is the run of horizon ``K``); all runs go
    through one vmapped program over (seed, epsilon, horizon). ``ks`` must be multiples of
    ``ks[0]``. Seed i draws the bandit and the run from ``key(i)`` (one bandit for every epsilon
    and horizon).
    """
    ks = [int(k) for k in ks]
    if any(k % ks[0] for k in ks):
        raise ValueError(f"ks={ks}; expected multiples of ks[0]")
    eps = list(epsilons) if private else [None]
    params = [[exp3_params(S, A, k, e) for k in ks] for e in eps]
    eta = jnp.asarray([[p.eta for p in row] for row in params])
    gamma = jnp.asarray([[p.gamma for p in row] for row in params])
    eps_arr = jnp.asarray([1.0 if e is None else e for e in eps], jnp.float32)
    k_max, block = max(ks), ks[0]
    read = jnp.asarray([k // block - 1 for k in ks])

    def one(seed, e, et, g, at):
        kb, kr = jax.random.split(jax.random.key(seed))
        bandit = random_contextual_bandit(S, A, key=kb)
        p = Exp3Params(et, g)
        out = exp3_ldp(bandit, k_max, e if private else None, key=kr, params=p, record_every=block)
        return out.regret[at]

    per_k = jax.vmap(one, in_axes=(None, None, 0, 0, 0))
    per_eps = jax.vmap(per_k, in_axes=(None, 0, 0, 0, None))
    run = jax.jit(jax.vmap(per_eps, in_axes=(0, None, None, None, None)))
    out = run(jnp.asarray(seeds), eps_arr, eta, gamma, read)  # [seeds, eps, ks]
    return np.asarray(jnp.swapaxes(out, 0, 1), np.float64)


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
        bandit = random_contextual_bandit(S, A, key=kb)
        return exp3_ldp(bandit, K, e if private else None, key=kr, params=Exp3Params(et, g)).regret

    per_eps = jax.vmap(one, in_axes=(None, 0, 0, 0))
    run = jax.jit(jax.vmap(per_eps, in_axes=(0, None, None, None)))
    out = run(jnp.asarray(seeds), eps_arr, eta, gamma)  # [seeds, eps, K]
    return np.asarray(jnp.swapaxes(out, 0, 1), np.float64)


def rl_final_regret(
    S: int,
    A: int,
    H: int,
    ks,
    epsilons,
    seeds,
    *,
    private: bool,
    privacy_bonus_scale: float = 1.0,
) -> np.ndarray:
    """UCBVI(-LDP) final regret of separate runs, one per horizon (its own confidence level
    ``L = log(2 SAHK)``), ``[len(epsilons), len(seeds), len(ks)]``; one vmapped program as in
    :func:`bandit_final_regret`."""
    ks = [int(k) for k in ks]
    if any(k % ks[0] for k in ks):
        raise ValueError(f"ks={ks}; expected multiples of ks[0]")
    eps = jnp.asarray(list(epsilons) if private else [1.0], jnp.float32)
    k_max, block = max(ks), ks[0]
    read = jnp.asarray([k // block - 1 for k in ks])

    def one(seed, e, k, at):
        km, kr = jax.random.split(jax.random.key(seed))
        mdp = random_episodic_mdp(S, A, H, key=km)
        out = ucbvi_ldp(
            mdp,
            k_max,
            e if private else None,
            key=kr,
            confidence_episodes=k,
            record_every=block,
            privacy_bonus_scale=privacy_bonus_scale,
        )
        return out.regret[at]

    per_k = jax.vmap(one, in_axes=(None, None, 0, 0))
    per_eps = jax.vmap(per_k, in_axes=(None, 0, None, None))
    run = jax.jit(jax.vmap(per_eps, in_axes=(0, None, None, None)))
    out = run(jnp.asarray(seeds), eps, jnp.asarray(ks, jnp.float32), read)
    return np.asarray(jnp.swapaxes(out, 0, 1), np.float64)


def per_seed_slopes(finals: np.ndarray, ks: np.ndarray) -> list[float]:
    """Least-squares exponent of the final regret in K for each seed (``finals[seed, j]``: the
    run of horizon ``ks[j]``)."""
    y = np.maximum(finals, 1e-9)
    return [float(np.polyfit(np.log(ks), np.log(row), 1)[0]) for row in y]


def slope_summary(finals: np.ndarray, ks: np.ndarray) -> dict[str, float]:
    """Bootstrap (over seeds) log-log fit of the seed-mean final regret over horizons."""
    fit = fit_loglog_slope(np.asarray(ks, float), np.maximum(finals, 1e-9))
    return fit._asdict()
