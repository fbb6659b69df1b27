"""Ground-truth CCEs by linear programming (``scipy.optimize.linprog``), for small games.

A distribution ``x`` over joint actions is a CCE of a normal-form game ``u`` when no player gains
by committing to a fixed action before the draw:

.. math:: \\sum_j x_j\\,\\big(u_i(b, a_{-i}(j)) - u_i(a(j))\\big) \\le 0 \\quad \\forall i, b.

:func:`lp_cce` maximises the welfare :math:`\\sum_j x_j \\sum_i u_i(a(j))` over this polytope.
:func:`markov_lp_cce` solves one such LP per (step, state) on the stage game
``r_h + P_h V_{h+1}`` by backward induction; the resulting Markov correlated policy has CCE gap
zero (a deviation that is better at some state would be better in that state's stage game).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.optimize import linprog

from jaxpapers.markov_games._game import MarkovGame, joint_actions


class LPResult(NamedTuple):
    """A welfare-maximising CCE of a normal-form game.

    Attributes:
      weights: ``[J]`` distribution over joint actions (row-major).
      welfare: expected sum of payoffs under ``weights``.
      values: ``[m]`` expected payoff of each player.
    """

    weights: np.ndarray
    welfare: float
    values: np.ndarray


def lp_cce(payoffs) -> LPResult:
    """Welfare-maximising CCE of a normal-form game ``payoffs`` ``[A_1, ..., A_m, m]``.

    Examples:
        >>> from jaxpapers.markov_games import CHICKEN_PAYOFFS
        >>> res = lp_cce(CHICKEN_PAYOFFS)
        >>> round(res.welfare, 6), res.weights.round(6).tolist()
        (10.5, [0.0, 0.25, 0.25, 0.5])
    """
    u = np.asarray(payoffs, dtype=np.float64)
    num_actions = u.shape[:-1]
    m = u.shape[-1]
    if m != len(num_actions) or m < 2:
        raise ValueError(f"payoffs has shape {u.shape}; expected [A_1, ..., A_m, m] with m >= 2")
    J = math.prod(num_actions)
    table = joint_actions(num_actions)
    flat = u.reshape(J, m)
    rows = []
    for i in range(m):
        for b in range(num_actions[i]):
            dev = table.copy()
            dev[:, i] = b
            dev_j = np.ravel_multi_index(tuple(dev.T), num_actions)
            rows.append(flat[dev_j, i] - flat[:, i])
    res = linprog(
        -flat.sum(-1),
        A_ub=np.array(rows),
        b_ub=np.zeros(len(rows)),
        A_eq=np.ones((1, J)),
        b_eq=[1.0],
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        raise RuntimeError(f"linprog failed: {res.message}")
    x = np.clip(res.x, 0.0, None)
    x = x / x.sum()
    return LPResult(x, float(x @ flat.sum(-1)), x @ flat)


def markov_lp_cce(game: MarkovGame) -> np.ndarray:
    """A Markov correlated CCE ``[H, S, J]`` by backward induction of stage-game LPs.

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> from jaxpapers.markov_games import cce_gap, random_game
        >>> g = random_game(2, 2, (2, 2), key=jax.random.key(0))
        >>> abs(float(cce_gap(g, jnp.asarray(markov_lp_cce(g))).gap)) < 1e-5
        True
    """
    if not isinstance(game, MarkovGame):
        raise ValueError(f"game is a {type(game).__name__}; expected a MarkovGame")
    P = np.asarray(game.P, np.float64)
    R = np.asarray(game.R, np.float64)
    H, S, J, m = R.shape
    policy = np.zeros((H, S, J))
    v_next = np.zeros((S, m))
    for h in reversed(range(H)):
        v = np.zeros((S, m))
        for s in range(S):
            q = R[h, s] + P[h, s] @ v_next
            res = lp_cce(q.reshape(*game.num_actions, m))
            policy[h, s] = res.weights
            v[s] = res.values
        v_next = v
    return policy
