"""P14 rows of ``jaxpapers bench theory``: the CCE learner vmapped over seeds, and a NumPy port.

The learner is :func:`jaxpapers.markov_games.simulator_cce` (``method="paper"``: per-state
empirical-Bernstein bandits, stopping on the decomposed certificate) on random games with
S = 2, H = 2, two players with 2 actions, epsilon = 1 (``--full``: S = 4, H = 3, epsilon = 0.5).
Seed ``i`` draws its own game and learner key, so the vmapped run's while loops stop at
different rounds (the batch runs until its slowest seed).

``vmap_over_loop_seeds256_cce_simulator``: a Python loop over 256 seeds of the jitted single-seed
run over one vmapped run. ``numpy_over_jax_cce_simulator``: the same algorithm written in plain
NumPy (one seed) over the jitted JAX single seed. ABBA-paired median ratios.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.bench import paired_time_ratio, row
from jaxpapers.markov_games import joint_actions, random_game, simulator_cce

SEEDS = 256
DELTA = 0.1


def _numpy_simulator(P, R, num_actions, epsilon, rng, max_rounds=1 << 16):
    """The paper's simulator learner in NumPy float64 (same estimator, rate and certificate as
    :func:`~jaxpapers.markov_games.simulator_cce` with ``stop="certificate"``: player ``i``'s
    bound ``2 sqrt(V_i iota_i) + 2 A_i iota_i``, ``iota_i = log(A_i / delta')`` at the per-bandit
    confidence ``delta' = delta / (2 m H S)``)."""
    H, S, J, m = R.shape
    table = joint_actions(num_actions)
    A = np.array(num_actions, float)
    width = int(A.max())
    mask = np.arange(width)[None, :] < A[:, None]
    iota = np.log(A / (DELTA / (2.0 * m * H * S)))
    v_next = np.zeros((S, m))
    samples = 0
    policy = np.zeros((H, S, J))
    for h in reversed(range(H)):
        scale = H - h
        v = np.zeros((S, m))
        for s in range(S):
            scores = np.zeros((m, width))
            center = np.zeros(m)
            var = np.zeros(m)
            count = np.zeros(m)
            pol = np.zeros(J)
            pay = np.zeros(m)
            t = 0
            while t < max_rounds:
                eta = np.minimum(1.0, np.sqrt(np.log(np.maximum(A, 2)) / (A + var)))
                logits = np.where(
                    mask, -eta[:, None] * (scores - scores.min(1, keepdims=True)), -np.inf
                )
                probs = np.exp(logits - logits.max(1, keepdims=True))
                probs /= probs.sum(1, keepdims=True)
                acts = np.array([rng.choice(width, p=probs[i]) for i in range(m)])
                j = int(np.ravel_multi_index(tuple(acts), num_actions))
                s2 = rng.choice(S, p=P[h, s, j])
                y = R[h, s, j] + v_next[s2]
                loss = np.clip(1.0 - y / scale, 0.0, 1.0)
                dev = loss - center
                est = dev / (probs[np.arange(m), acts] + eta / 2)
                scores[np.arange(m), acts] += est
                count += 1
                center += (loss - center) / count
                var += dev * est
                pol += np.prod(probs[np.arange(m)[None, :], table], axis=1)
                pay += y
                t += 1
                bounds = 2 * np.sqrt(var * iota) + 2 * A * iota
                if scale * bounds.max() / t <= epsilon / H:
                    break
            policy[h, s] = pol / pol.sum()
            v[s] = pay / t
            samples += t
        v_next = v
    return policy, samples


def bench_rows(quick: bool = True) -> list[dict]:
    S, H, eps = (2, 2, 1.0) if quick else (4, 3, 0.5)
    num_actions = (2, 2)
    keys = jax.random.split(jax.random.key(0), SEEDS)
    games = jax.vmap(lambda k: random_game(S, H, num_actions, key=k))(keys)

    def learn(game, key):
        return simulator_cce(game, key=key, epsilon=eps).policy

    single = jax.jit(learn)
    batched = jax.jit(jax.vmap(learn))
    game_list = [jax.tree.map(lambda x, i=i: x[i], games) for i in range(SEEDS)]

    def loop():
        return jnp.stack([single(g, k) for g, k in zip(game_list, keys, strict=True)])

    repeats = 3 if quick else 7
    rows = []
    r = paired_time_ratio(loop, lambda: batched(games, keys), repeats=repeats)
    rows.append(
        row(
            f"vmap_over_loop_seeds{SEEDS}_cce_simulator",
            "ratio",
            r["ratio"],
            f"x (loop {r['time']:.3g} s / vmap {r['baseline_time']:.3g} s; "
            f"IQR {r['q25']:.3g}-{r['q75']:.3g})",
        )
    )
    g0 = game_list[0]
    P0 = np.asarray(g0.P, np.float64)
    P0 /= P0.sum(-1, keepdims=True)  # float32 rows renormalised for rng.choice
    R0 = np.asarray(g0.R, np.float64)
    rng = np.random.default_rng(0)
    r = paired_time_ratio(
        lambda: _numpy_simulator(P0, R0, num_actions, eps, rng)[0],
        lambda: single(g0, keys[0]),
        repeats=repeats,
    )
    rows.append(
        row(
            "numpy_over_jax_cce_simulator",
            "ratio",
            r["ratio"],
            f"x (NumPy {r['time']:.3g} s / JAX {r['baseline_time']:.3g} s, one seed)",
        )
    )
    return rows


if __name__ == "__main__":
    for r in bench_rows():
        print(r)
