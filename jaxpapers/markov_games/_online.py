"""Online CCE learning from trajectories: V-learning with per-(h, s) bandits.

Episode ``k`` starts at ``s_0 ~ rho``; at each step the players draw own actions from their
bandits at ``(h, s_h)``, the game returns rewards and ``s_{h+1}``, and with ``t = N_h(s_h)`` and
``alpha_t = (H + 1) / (H + t)`` (Jin et al. 2021) each player updates an optimistic value

.. math:: \\bar V_{h,i}(s) \\leftarrow \\min\\big(H - h,\\ (1 - \\alpha_t)\\bar V_{h,i}(s)
   + \\alpha_t (r_i + \\bar V_{h+1,i}(s') + \\beta_t)\\big)

and a pessimistic one (``- beta_t``, floored at 0), and feeds its bandit the loss
``1 - (r_i + \\bar V_{h+1,i}(s')) / (H - h)``. Both methods stop by the same rule, chosen by
``stop``:

* ``"exact"`` (the rule the experiments apply): after the first episode where the output
  policy's exact CCE gap (computed with the true model, an oracle check) is at most
  ``epsilon``. The sample count then measures what each learner needs, not what its bonus
  formula asks for; the certificate at the stop is returned as an extra.
* ``"certificate"`` (the default): the learner's own certificate
  ``max_i rho^T (\\bar V_{0,i} - \\underline V_{0,i}) <= epsilon`` *and* the exact gap
  ``<= epsilon``; the bonuses' constants are scaled down (``bonus_scale``), so the certificate
  alone is not a valid bound (and with a small ``bonus_scale`` it, not the gap, decides when
  the run stops: counts then follow the bonus formulas).

The methods differ in the bandit and the bonus (which shapes the values the bandits learn on):

* ``"baseline"`` (V-learning, EXP3-IX): ``beta_t = c sqrt(H^3 iota A_i / t)``, the bonus
  behind the ``H^6 S max_i A_i / epsilon^2`` rate.
* ``"paper"`` (empirical-Bernstein bandits): ``beta_t = c (sqrt(H iota A_i (var_t + 1) / t)
  + H iota A_i / t)`` with ``var_t`` the running empirical variance of the targets
  ``r_i + \\bar V_{h+1,i}(s')`` at ``(h, s)``; the targets' total variance over an episode is
  ``O(H^2)`` rather than ``H^3``, the source of the ``H^5`` rate. ``c`` is ``bonus_scale``.

The output policy is the Markov correlated policy that weights the played product
distributions at ``(h, s)`` by V-learning's ``alpha``-weights (the Markov projection of
V-learning's history-dependent certified policy; its exact gap is what the experiments report).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jaxtyping import PRNGKeyArray

from jaxpapers.core.checks import check_key, check_positive, is_concrete
from jaxpapers.markov_games._bandits import make_bandit
from jaxpapers.markov_games._exact import best_response_values, policy_values
from jaxpapers.markov_games._game import MarkovGame
from jaxpapers.markov_games._players import PlayerTables, is_paper
from jaxpapers.markov_games._simulator import CCEResult, check_horizon, iota

ONLINE_STOPS = ("certificate", "exact")


def exact_gap(game: MarkovGame, policy):
    """Exact CCE gap of a Markov correlated policy (jittable; no input checks)."""
    v = game.initial @ policy_values(game, policy)[0]
    return jnp.max(game.initial @ best_response_values(game, policy)[0] - v)


def _bonus(paper, H, t, log_i, arms, var, c):
    bernstein = jnp.sqrt(H * log_i * arms * (var + 1.0) / t) + H * log_i * arms / t
    return c * jnp.where(paper, bernstein, jnp.sqrt(H**3 * log_i * arms / t))


@partial(jax.jit, static_argnames=("max_episodes", "stop"))
def _learn(game, key, epsilon, delta, bonus_scale, paper, horizon, max_episodes, stop):
    tables = PlayerTables(game.num_actions)
    bandit = make_bandit(paper)
    S, m = game.num_states, game.num_players
    J = tables.table.shape[0]
    dtype = game.R.dtype
    H = horizon.astype(dtype)
    log_i = iota(game, H, delta)
    arms = jnp.asarray(tables.arms, dtype)
    caps = jnp.maximum(H - jnp.arange(game.horizon + 1), 0.0).astype(dtype)[:, None, None]

    def step(h, c):
        s, kr, states, upper, lower, count, mean, m2, pol = c
        kr, ka, ks = jax.random.split(kr, 3)
        st = jax.tree.map(lambda x: x[h, s], states)
        probs = tables.probs(bandit, st)
        acts, j = tables.sample(ka, probs)
        s2 = jax.random.categorical(ks, jnp.log(game.P[h, s, j]))
        r = game.R[h, s, j]
        t = count[h, s] + 1.0
        alpha = (H + 1.0) / (H + t)
        y_up = r + upper[h + 1, s2]
        y_lo = r + lower[h + 1, s2]
        d = y_up - mean[h, s]
        new_mean = mean[h, s] + d / t
        new_m2 = m2[h, s] + d * (y_up - new_mean)
        beta = _bonus(paper, H, t, log_i, arms, new_m2 / t, bonus_scale)
        cap = (H - h).astype(dtype)
        upper = upper.at[h, s].set(
            jnp.minimum(cap, (1 - alpha) * upper[h, s] + alpha * (y_up + beta))
        )
        lower = lower.at[h, s].set(
            jnp.maximum(0.0, (1 - alpha) * lower[h, s] + alpha * (y_lo - beta))
        )
        st = tables.update(bandit, st, acts, jnp.clip(1.0 - y_up / cap, 0.0, 1.0))
        states = jax.tree.map(lambda x, v: x.at[h, s].set(v), states, st)
        pol = pol.at[h, s].set((1 - alpha) * pol[h, s] + alpha * tables.joint(probs))
        count = count.at[h, s].set(t)
        mean = mean.at[h, s].set(new_mean)
        m2 = m2.at[h, s].set(new_m2)
        return s2, kr, states, upper, lower, count, mean, m2, pol

    def episode(c):
        k, key, *rest, _, _ = c
        key, k0, kr = jax.random.split(key, 3)
        s = jax.random.categorical(k0, jnp.log(game.initial))
        _, _, *rest = jax.lax.fori_loop(0, horizon, step, (s, kr, *rest))
        upper, lower, pol = rest[1], rest[2], rest[-1]
        cert = jnp.max(game.initial @ (upper[0] - lower[0]))
        done = exact_gap(game, pol) <= epsilon
        if stop == "certificate":
            done = done & (cert <= epsilon)
        return (k + 1, key, *rest, cert, done)

    def cond(c):
        return (c[0] < max_episodes) & ~c[-1]

    zeros = jnp.zeros((game.horizon, S, m), dtype)
    init = (
        jnp.zeros((), jnp.int32),
        key,
        tables.init(bandit, (game.horizon, S), dtype),
        jnp.broadcast_to(caps, (game.horizon + 1, S, m)),
        jnp.zeros((game.horizon + 1, S, m), dtype),
        jnp.zeros((game.horizon, S), dtype),
        zeros,
        zeros,
        jnp.full((game.horizon, S, J), 1.0 / J, dtype),
        jnp.asarray(jnp.inf, dtype),
        jnp.zeros((), bool),
    )
    k, _, _, upper, _, _, _, _, pol, cert, done = jax.lax.while_loop(cond, episode, init)
    return CCEResult(pol, k * horizon, cert, upper[:-1], done)


def online_cce(
    game: MarkovGame,
    *,
    key: PRNGKeyArray,
    epsilon: float,
    method: str = "paper",
    delta: float = 0.1,
    bonus_scale: float = 0.05,
    max_episodes: int = 1 << 16,
    horizon: int | None = None,
    stop: str = "certificate",
) -> CCEResult:
    """Learn an ``epsilon``-CCE from trajectories only (V-learning with the chosen bandit).

    Args:
      game: the game.
      key: PRNG key.
      epsilon: target certified gap (absolute).
      method: ``"paper"`` (empirical-Bernstein bandits and bonus) or ``"baseline"``
        (V-learning with EXP3-IX and the ``H^3`` bonus).
      delta: failure probability in the bonuses.
      bonus_scale: the constant ``c`` of the bonuses (theory's constants are loose).
      max_episodes: cap on the episodes.
      horizon: play only the first ``horizon`` steps (default: all; the steps after it must
        be reward-free padding, as in :func:`simulator_cce`).
      stop: ``"certificate"`` (own certificate and exact gap ``<= epsilon``) or ``"exact"``
        (the exact gap alone); see the module docstring.

    Returns:
      :class:`CCEResult`; ``samples`` counts transitions (``H`` per episode), ``certificate``
      the learner's own certificate at the stop.

    Examples:
        >>> import jax
        >>> from jaxpapers.markov_games import chicken
        >>> res = online_cce(chicken(), key=jax.random.key(0), epsilon=0.2)
        >>> bool(res.converged), int(res.samples) > 0
        (True, True)
    """
    check_key("key", key)
    check_positive("epsilon", epsilon)
    check_positive("delta", delta)
    check_positive("bonus_scale", bonus_scale)
    check_positive("max_episodes", max_episodes)
    if stop not in ONLINE_STOPS:
        raise ValueError(f"stop={stop!r}; expected one of {ONLINE_STOPS}")
    dtype = game.R.dtype
    paper = jnp.asarray(is_paper(method))
    return _learn(
        game,
        key,
        jnp.asarray(epsilon, dtype),
        jnp.asarray(delta, dtype),
        jnp.asarray(bonus_scale, dtype),
        paper,
        jnp.asarray(check_horizon(game, horizon) if is_concrete(horizon) else horizon),
        max_episodes,
        stop,
    )
