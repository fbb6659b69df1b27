"""P14 peer rows: welfare-maximising CCEs by linear programming, and the exact CCE gap vmapped.

``peer_over_ours_time_cce_lp``: OpenSpiel's maximum-welfare CCE (``jpsro._mwcce``, the meta-solver
behind JPSRO's ``"mwcce"``: the CCE constraints of ``jpsro._cce_constraints`` solved with cvxpy +
ECOS) against our :func:`jaxpapers.markov_games.lp_cce` (the same LP: maximise the sum of payoffs
over distributions on joint actions subject to every player's CCE constraints, built in NumPy and
solved with SciPy's HiGHS), on 16 random 3-player games with 4 actions each (payoffs U[0, 1]),
all 16 solved in each timed call. Agreement rows: the largest CCE gap of either side's solution
(from :func:`jaxpapers.markov_games.cce_gap`: 0 at a CCE) and the largest difference of the two
optimal welfares (the LP's value is unique even when its solution is not).

``vmapped_gap_over_loop_time``: :func:`~jaxpapers.markov_games.cce_gap` of 256 random Markov
correlated policies (Dirichlet(1) rows) on one random game (S = 4, H = 3, 3 players with 4
actions), a Python loop of the jitted public call over one ``jit(vmap(...))`` call (a speed-up);
the agreement row is the largest difference of the 256 gaps between the two. Times are
ABBA-paired median ratios (:func:`jaxpapers.core.bench.paired_time_ratio`).

    python benchmarks/markov_games.py [--full] [--out DIR]      or      jaxpapers bench markov_games
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.bench import bench_main, paired_time_ratio, row
from jaxpapers.markov_games import cce_gap, lp_cce, matrix_game, random_game

GAMES = 16
ACTIONS = (4, 4, 4)
POLICIES = 256


def _games(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.random((*ACTIONS, len(ACTIONS))) for _ in range(n)]


def _open_spiel_mwcce(payoffs: np.ndarray) -> np.ndarray:
    from open_spiel.python.algorithms import jpsro

    dist, _ = jpsro._mwcce(np.moveaxis(payoffs, -1, 0), [1] * len(ACTIONS))
    return np.asarray(dist, np.float64).reshape(-1)


def _gap(payoffs: np.ndarray, weights: np.ndarray) -> float:
    policy = jnp.asarray(np.clip(weights, 0.0, None) / np.clip(weights, 0.0, None).sum())
    return float(cce_gap(matrix_game(payoffs), policy[None, None]).gap)


def _lp_rows(quick: bool) -> list[dict]:
    games = _games(GAMES)
    peer = lambda: [_open_spiel_mwcce(u) for u in games]
    ours = lambda: [lp_cce(u).weights for u in games]
    repeats = 5 if quick else 11
    m = paired_time_ratio(peer, ours, repeats=repeats)
    peer_sol, our_sol = peer(), ours()
    gaps = {"peer": [], "ours": []}
    welfare_diff = []
    for u, xp, xo in zip(games, peer_sol, our_sol, strict=True):
        gaps["peer"].append(_gap(u, xp))
        gaps["ours"].append(_gap(u, xo))
        welfare = u.sum(-1).reshape(-1)
        welfare_diff.append(abs(float(xp @ welfare - xo @ welfare)))
    rows = [
        row(
            "peer_over_ours_time_cce_lp",
            "ratio",
            m["ratio"],
            f"OpenSpiel jpsro._mwcce (cvxpy + ECOS) / lp_cce (HiGHS), {GAMES} random 3-player "
            "4-action games per call; median of ABBA-paired ratios",
            q25=m["q25"],
            q75=m["q75"],
            peer_s=m["time"],
            ours_s=m["baseline_time"],
            repeats=repeats,
        ),
        row(
            "cce_lp_max_gap",
            "agreement",
            max(max(gaps["peer"]), max(gaps["ours"])),
            "largest CCE gap of either side's solution (0 at a CCE; float32 cce_gap)",
            peer=max(gaps["peer"]),
            ours=max(gaps["ours"]),
        ),
        row(
            "cce_lp_max_welfare_difference",
            "agreement",
            max(welfare_diff),
            "largest |optimal welfare, OpenSpiel - ours| over the games (welfare is 0..3)",
        ),
    ]
    print(rows, flush=True)
    return rows


def _gap_rows(quick: bool) -> list[dict]:
    game = random_game(4, 3, ACTIONS, key=jax.random.key(0))
    shape = (POLICIES, game.horizon, game.num_states, game.num_joint)
    policies = jax.random.dirichlet(jax.random.key(1), jnp.ones(game.num_joint), shape[:-1])
    one = [policies[i] for i in range(POLICIES)]
    batched = jax.jit(jax.vmap(lambda p: cce_gap(game, p).gap))
    loop = lambda: jnp.stack([cce_gap(game, p).gap for p in one])
    m = paired_time_ratio(loop, lambda: batched(policies), repeats=5 if quick else 11)
    diff = float(jnp.abs(loop() - batched(policies)).max())
    rows = [
        row(
            "vmapped_gap_over_loop_time",
            "ratio",
            m["ratio"],
            f"x: loop of {POLICIES} cce_gap calls / one vmapped call (speed-up; loop "
            f"{m['time']:.3g} s, vmap {m['baseline_time']:.3g} s)",
            q25=m["q25"],
            q75=m["q75"],
        ),
        row(
            "vmapped_gap_vs_loop_max_abs_diff",
            "agreement",
            diff,
            f"largest |gap(loop) - gap(vmap)| over {POLICIES} policies",
        ),
    ]
    print(rows, flush=True)
    return rows


def run(quick: bool = True) -> list[dict]:
    import cvxpy  # noqa: F401 (imported before any timed call)
    from open_spiel.python.algorithms import jpsro  # noqa: F401

    return _lp_rows(quick) + _gap_rows(quick)


if __name__ == "__main__":
    bench_main("markov_games", run)
