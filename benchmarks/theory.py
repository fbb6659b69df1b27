"""Learning-theory benchmarks (P15, P16; P14's rows come from ``_theory_markov_games.py``).

``vmap_over_loop_seeds256_<algorithm>``: seconds of a Python loop over 256 seeds of the jitted
single-seed run divided by seconds of one vmapped run over the same 256 seeds (a speed-up; the
issue aims at >= 20). ``numpy_over_jax_<algorithm>``: seconds of a plain NumPy implementation of
one seed written here divided by the jitted JAX single-seed run (report only). Ratios are medians
of ABBA-paired repeats (``core.bench.paired_time_ratio``), float32 JAX on the default backend.

Sizes: EXP3-LDP with S = A = 4 and K = 1000 rounds at eps = 1; UCBVI-LDP with S = 3, A = 2,
H = 3 and K = 200 episodes at eps = 4; Gaptron (hinge, eta = exploration = 0.3) on a noisy
linear stream of T = 1000 rounds, d = 20, C = 5, drawn per seed (the NumPy run reuses one
stream; stream drawing is inside the timed JAX runs). ``--full`` multiplies the horizons by 4.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.bench import bench_main, paired_time_ratio, row
from jaxpapers.ldp_rl import (
    exp3_ldp,
    exp3_params,
    random_contextual_bandit,
    random_episodic_mdp,
    ucbvi_ldp,
)
from jaxpapers.multiclass import gaptron, linear_stream, run_online

SEEDS = 256


# ------------------------------------------------------------------ plain NumPy implementations


def _numpy_exp3_ldp(means, rho, K, eps, eta, gamma, rng):
    """One seed of EXP3-IX on unary-encoded losses; returns the cumulative pseudo-regret."""
    S, A = means.shape
    D = S * A + 1
    p = math.exp(eps / 2) / (1 + math.exp(eps / 2))
    L = np.zeros((S, A))
    regret, best = 0.0, means.max(-1)
    for _ in range(K):
        z = -eta * L
        pi = np.exp(z - z.max(-1, keepdims=True))
        pi /= pi.sum(-1, keepdims=True)
        s = rng.choice(S, p=rho / rho.sum())
        a = rng.choice(A, p=pi[s])
        loss = rng.random() >= means[s, a]
        onehot = np.zeros(D)
        onehot[s * A + a if loss else S * A] = 1.0
        bits = np.where(rng.random(D) < 1 - p, 1 - onehot, onehot)
        msg = (bits - (1 - p)) / (2 * p - 1)
        L += msg[: S * A].reshape(S, A) / (pi + gamma)
        regret += float(rho @ (best - (pi * means).sum(-1)))
    return regret


def _numpy_ucbvi_ldp(P, R, H, K, eps, bonus_scale, rng):
    """One seed of UCBVI on unary-encoded (s, a, s', r) counts; returns the cumulative regret."""
    S, A = R.shape
    P = P / P.sum(-1, keepdims=True)  # float32 rows, renormalised for Generator.choice
    D = S * A * S * 2
    step_eps = eps / H
    p = math.exp(step_eps / 2) / (1 + math.exp(step_eps / 2))
    sigma = math.sqrt(p * (1 - p)) / (2 * p - 1)
    L = math.log(2 * S * A * H * K)

    def plan(Pm, Rm, bonus):
        V, pol = np.zeros(S), np.zeros((H, S), int)
        for h in range(H - 1, -1, -1):
            Q = np.minimum(Rm + bonus + Pm @ V, H - h)
            pol[h], V = Q.argmax(-1), Q.max(-1)
        return pol, V

    def value(pol):
        V = np.zeros(S)
        for h in range(H - 1, -1, -1):
            V = (R + P @ V)[np.arange(S), pol[h]]
        return V[0]

    v_star = plan(P, R, 0.0)[1][0]
    counts = np.zeros((S, A, S, 2))
    regret = 0.0
    for k in range(K):
        n_sas = np.maximum(counts.sum(-1), 0)
        n = np.maximum(counts.sum((-1, -2)), 1)
        mass = n_sas.sum(-1, keepdims=True)
        Pm = np.where(mass > 0, n_sas / np.where(mass > 0, mass, 1), 1 / S)
        Rm = np.clip(counts[..., 1].sum(-1) / n, 0, 1)
        noise = sigma * math.sqrt(2 * S * H * (k + 1) * L)
        pol, _ = plan(Pm, Rm, bonus_scale * (H * np.sqrt(L / n) + H * noise / n))
        s = 0
        for h in range(H):
            a = pol[h, s]
            r = int(rng.random() < R[s, a])
            s2 = rng.choice(S, p=P[s, a])
            onehot = np.zeros(D)
            onehot[((s * A + a) * S + s2) * 2 + r] = 1
            bits = np.where(rng.random(D) < 1 - p, 1 - onehot, onehot)
            counts += ((bits - (1 - p)) / (2 * p - 1)).reshape(S, A, S, 2)
            s = s2
        regret += v_star - value(pol)
    return regret


def _numpy_gaptron(x, y, C, eta, a, rng):
    """One seed of Gaptron (hinge, OGD); returns the expected number of mistakes."""
    W = np.zeros((C, x.shape[1]))
    expected = 0.0
    for t in range(len(y)):
        s = W @ x[t]
        gamma = min(0.5, a * float(x[t] @ x[t]))
        y_star = int(s.argmax())
        rng.random()  # the exploration draw
        expected += (1 - gamma) * (y_star != y[t]) + gamma * (1 - 1 / C)
        others = np.where(np.arange(C) == y[t], -np.inf, s)
        j = int(others.argmax())
        if s[y[t]] - s[j] < 1:
            W[y[t]] += eta * x[t]
            W[j] -= eta * x[t]
    return expected


# ------------------------------------------------------------------ the three algorithms


def _cases(quick: bool):
    scale = 1 if quick else 4
    bandit = random_contextual_bandit(jax.random.key(0), 4, 4)
    K_b = 1000 * scale
    params = exp3_params(4, 4, K_b, 1.0)
    mdp = random_episodic_mdp(jax.random.key(0), 3, 2, 3)
    K_rl = 200 * scale
    T_g = 1000 * scale
    stream, _ = linear_stream(jax.random.key(0), T_g, 20, 5, noise=0.1)
    learner = gaptron(0.3, 0.3)

    def exp3(key):
        return exp3_ldp(bandit, K_b, 1.0, key=key, params=params).regret[-1]

    def ucbvi(key):
        return ucbvi_ldp(mdp, K_rl, 4.0, key=key).regret[-1]

    def gap(key):
        # each seed draws its own stream: with one shared stream Gaptron's updates (full
        # feedback) would not depend on the seed and vmap would not batch them
        seed_stream, _ = linear_stream(key, T_g, 20, 5, noise=0.1)
        return run_online(learner, seed_stream, 5, key=key, radius=1.0).mistakes.sum()

    rngs = {}
    numpy_runs = {
        "exp3_ldp": lambda: _numpy_exp3_ldp(
            np.asarray(bandit.means, np.float64),
            np.asarray(bandit.context_probs, np.float64),
            K_b,
            1.0,
            float(params.eta),
            float(params.gamma),
            rngs.setdefault("b", np.random.default_rng(0)),
        ),
        "ucbvi_ldp": lambda: _numpy_ucbvi_ldp(
            np.asarray(mdp.P, np.float64),
            np.asarray(mdp.R, np.float64),
            3,
            K_rl,
            4.0,
            0.1,
            rngs.setdefault("r", np.random.default_rng(0)),
        ),
        "gaptron": lambda: _numpy_gaptron(
            np.asarray(stream.x, np.float64),
            np.asarray(stream.y),
            5,
            0.3,
            0.3,
            rngs.setdefault("g", np.random.default_rng(0)),
        ),
    }
    return {"exp3_ldp": exp3, "ucbvi_ldp": ucbvi, "gaptron": gap}, numpy_runs


def _markov_games_rows(quick: bool) -> list[dict]:
    """P14's rows, when its helper file is present."""
    path = Path(__file__).with_name("_theory_markov_games.py")
    if not path.exists():
        return []
    spec = importlib.util.spec_from_file_location("jaxpapers_bench_theory_markov_games", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return list(module.bench_rows(quick=quick))
    except TypeError:  # a bench_rows() without the quick flag
        return list(module.bench_rows())


def run(quick: bool = True) -> list[dict]:
    rows: list[dict] = []
    runs, numpy_runs = _cases(quick)
    keys = jax.random.split(jax.random.key(1), SEEDS)
    repeats = 3 if quick else 7
    for name, fn in runs.items():
        single = jax.jit(fn)
        batched = jax.jit(jax.vmap(fn))

        def loop(single=single):
            return jnp.stack([single(k) for k in keys])

        def vmapped(batched=batched):
            return batched(keys)

        r = paired_time_ratio(loop, vmapped, repeats=repeats)
        rows.append(
            row(
                f"vmap_over_loop_seeds{SEEDS}_{name}",
                "ratio",
                r["ratio"],
                f"x (loop {r['time']:.3g} s / vmap {r['baseline_time']:.3g} s; "
                f"IQR {r['q25']:.3g}-{r['q75']:.3g})",
            )
        )
        print(rows[-1], flush=True)
        key0 = keys[0]
        r = paired_time_ratio(
            numpy_runs[name], lambda single=single, key0=key0: single(key0), repeats=repeats
        )
        rows.append(
            row(
                f"numpy_over_jax_{name}",
                "ratio",
                r["ratio"],
                f"x (NumPy {r['time']:.3g} s / JAX {r['baseline_time']:.3g} s, one seed)",
            )
        )
        print(rows[-1], flush=True)
    rows += _markov_games_rows(quick)
    return rows


if __name__ == "__main__":
    bench_main("theory", run)
