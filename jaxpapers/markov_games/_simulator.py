"""CCE learning with a simulator: backward induction of per-state multi-player bandit learning.

At step ``h`` (from ``H - 1`` down to 0) and every state ``s`` (vmapped), the ``m`` players run
their bandits on the stage game: each round draws own actions from the players' current
distributions, one next state from the simulator, and feeds each player the loss
``1 - (r_i + V_{h+1,i}(s')) / (H - h)``. The output at ``(h, s)`` is the average of the played
product distributions (a Markov correlated policy) and ``V_{h,i}(s)`` the average payoff.

When to stop at ``(h, s)`` is what separates the methods (target ``epsilon / H`` per step, so the
gaps add up to at most ``epsilon``):

* ``"baseline"`` (Li et al. 2022 style, EXP3-IX bandits) spends the budget its bound prescribes,
  ``t = ceil(2 iota (sum_i A_i) (H (H - h) / epsilon)^2)`` rounds: the sum over players enters
  because that bound pays every player's estimation error.
* ``"paper"`` (empirical-Bernstein bandits) stops as soon as the decomposed certificate
  ``(H - h) max_i B_i(t) / t <= epsilon / H``, ``B_i`` from
  :func:`~jaxpapers.markov_games.bernstein_regret_bound`: a maximum over players, and it uses the
  observed variance of the payoffs, which is ``O(1)`` rather than ``(H - h)^2`` per step
  (law of total variance), whence the lower power of ``H``.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxpapers.core.checks import check_positive, is_concrete
from jaxpapers.markov_games._bandits import bernstein_regret_bound, make_bandit
from jaxpapers.markov_games._game import MarkovGame
from jaxpapers.markov_games._players import PlayerTables, is_paper


class CCEResult(NamedTuple):
    """Output of a CCE learner.

    Attributes:
      policy: ``[H, S, J]`` the output Markov correlated policy.
      samples: number of simulator calls (simulator) or transitions (online) used.
      certificate: the learner's own bound on the CCE gap when it stopped.
      values: ``[H, S, m]`` the learner's value estimates.
      converged: whether the stopping rule fired before the budget cap.
    """

    policy: Float[Array, "H S J"]
    samples: Int[Array, ""]
    certificate: Float[Array, ""]
    values: Float[Array, "H S m"]
    converged: Array


def iota(game: MarkovGame, horizon, delta):
    """Log factor ``log(2 m H S max_i A_i / delta)`` of the union bound over bandits."""
    m, A = game.num_players, max(game.num_actions)
    return jnp.log(2.0 * m * game.num_states * A * horizon / delta)


def check_horizon(game: MarkovGame, horizon: int | None) -> int:
    """The number of steps to play: all by default, else ``1 <= horizon <= game.horizon`` (the
    steps after it must be reward-free padding, see :func:`~jaxpapers.markov_games.pad_horizon`)."""
    if horizon is None:
        return game.horizon
    if not 1 <= int(horizon) <= game.horizon:
        raise ValueError(f"horizon={horizon}; expected 1 <= horizon <= game.horizon={game.horizon}")
    return int(horizon)


def _stage(
    key, P_hs, R_hs, v_next, scale, target, budget, active, *, tables, paper, max_rounds, log_i
):
    """Bandit learning at one (h, s); returns (policy [J], values [m], rounds, certificate)."""
    bandit = make_bandit(paper)
    dtype = R_hs.dtype
    arms = jnp.asarray(tables.arms, dtype)

    def certificate(states, t):
        bounds = jax.vmap(partial(bernstein_regret_bound, delta=1.0))(states, arms)
        bounds = bounds + 2.0 * arms * (log_i - jnp.log(arms))
        return scale * jnp.max(bounds) / jnp.maximum(t, 1.0)

    def cond(c):
        t, _, _, _, _, done = c
        return (~done) & (t < max_rounds) & active

    def body(c):
        t, states, pol, pay, k, _ = c
        k, ka, ks = jax.random.split(k, 3)
        probs = tables.probs(bandit, states)
        acts, j = tables.sample(ka, probs)
        s_next = jax.random.categorical(ks, jnp.log(P_hs[j]))
        y = R_hs[j] + v_next[s_next]
        states = tables.update(bandit, states, acts, jnp.clip(1.0 - y / scale, 0.0, 1.0))
        t = t + 1
        done = jnp.where(paper, certificate(states, t.astype(dtype)) <= target, t >= budget)
        return t, states, pol + tables.joint(probs), pay + y, k, done

    init = (
        jnp.zeros((), jnp.int32),
        tables.init(bandit, (), dtype),
        jnp.zeros((tables.table.shape[0],), dtype),
        jnp.zeros((tables.m,), dtype),
        key,
        jnp.zeros((), bool),
    )
    t, states, pol, pay, _, done = jax.lax.while_loop(cond, body, init)
    tf = jnp.maximum(t, 1).astype(dtype)
    pol = jnp.where(t > 0, pol, 1.0 / pol.shape[0])
    cert = jnp.where(
        paper, certificate(states, tf), scale * jnp.sqrt(2.0 * log_i * arms.sum() / tf)
    )
    cert = jnp.where(active, cert, 0.0)
    return pol / jnp.where(t > 0, tf, 1.0), pay / tf, t, cert, done | ~active


@partial(jax.jit, static_argnames=("max_rounds",))
def _simulate(game, key, epsilon, delta, paper, horizon, max_rounds):
    tables = PlayerTables(game.num_actions)
    H = horizon.astype(game.rewards.dtype)
    log_i = iota(game, H, delta)
    target = epsilon / H
    stage = partial(_stage, tables=tables, paper=paper, max_rounds=max_rounds, log_i=log_i)
    steps = jnp.arange(game.horizon)

    def step(v_next, xs):
        h, P_h, R_h, k = xs
        scale = jnp.maximum(H - h, 1.0)
        budget = jnp.ceil(2.0 * log_i * sum(game.num_actions) * (H * scale / epsilon) ** 2)
        keys = jax.random.split(k, game.num_states)
        pol, v, t, cert, done = jax.vmap(
            lambda kk, P, R: stage(kk, P, R, v_next, scale, target, budget, h < horizon)
        )(keys, P_h, R_h)
        return v, (pol, v, t, cert.max(), done.all())

    keys = jax.random.split(key, game.horizon)
    _, (pol, v, t, cert, done) = jax.lax.scan(
        step,
        jnp.zeros((game.num_states, game.num_players), game.rewards.dtype),
        (steps, game.transitions, game.rewards, keys),
        reverse=True,
    )
    return CCEResult(pol, t.sum(), cert.sum(), v, done.all())


def simulator_cce(
    game: MarkovGame,
    *,
    key: PRNGKeyArray,
    epsilon: float,
    method: str = "paper",
    delta: float = 0.1,
    max_rounds: int = 1 << 16,
    horizon: int | None = None,
) -> CCEResult:
    """Learn an ``epsilon``-CCE with simulator access (sample ``s' ~ P_h(s, a)`` anywhere).

    Args:
      game: the game (its model is used only through sampled transitions and rewards).
      key: PRNG key.
      epsilon: target CCE gap (absolute, values lie in ``[0, H]``).
      method: ``"paper"`` (gap decomposition + empirical-Bernstein bandits, stops on its
        certificate) or ``"baseline"`` (EXP3-IX with the ``sum_i A_i`` budget).
      delta: failure probability in the certificates.
      max_rounds: cap on the rounds per (step, state).
      horizon: play only the first ``horizon`` steps (default: all); with games padded by
        :func:`~jaxpapers.markov_games.pad_horizon` several horizons share one compiled learner.

    Returns:
      :class:`CCEResult`; ``samples`` is the total number of simulator calls.

    Examples:
        >>> import jax
        >>> from jaxpapers.markov_games import cce_gap, chicken
        >>> res = simulator_cce(chicken(), key=jax.random.key(0), epsilon=0.1)
        >>> bool(res.converged), bool(cce_gap(chicken(), res.policy).gap < 0.1)
        (True, True)
    """
    check_positive("epsilon", epsilon)
    check_positive("delta", delta)
    check_positive("max_rounds", max_rounds)
    dtype = game.rewards.dtype
    paper = jnp.asarray(is_paper(method))
    horizon = jnp.asarray(check_horizon(game, horizon) if is_concrete(horizon) else horizon)
    return _simulate(
        game,
        key,
        jnp.asarray(epsilon, dtype),
        jnp.asarray(delta, dtype),
        paper,
        horizon,
        max_rounds,
    )
