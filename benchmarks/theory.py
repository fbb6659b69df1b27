"""Learning-theory benchmarks (P15, P16; P14's rows come from ``_theory_markov_games.py``).

``vmap_over_loop_seeds256_<algorithm>``: seconds of a Python loop over 256 seeds of the jitted
single-seed run divided by seconds of one vmapped run over the same 256 seeds (a speed-up; the
issue aims at >= 20). ``numpy_over_jax_<algorithm>``: seconds of a plain NumPy implementation of
one seed written here divided by the jitted JAX single-seed run (report only). Ratios are medians
of ABBA-paired repeats (``core.bench.paired_time_ratio``), float32 JAX on the default backend.
``numpy_vs_jax_<algorithm>`` (agreement): the relative difference of the final regret (Gaptron:
expected mistakes) of the NumPy port run on the JAX run's own uniforms against the JAX run, so
the ports check the current algorithms (EXP3-LDP drawing each context's arm with the learner's
coins; UCBVI-LDP's Hoeffding term at constant 0.1 plus the privacy term at constant 1).

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


def _inverse_cdf(probs: np.ndarray, u: float) -> int:
    """``jaxpapers.ldp_rl``'s draw from given uniforms: the count of CDF values ``<= u``."""
    return min(int(np.sum(np.cumsum(probs) <= u)), len(probs) - 1)


def _unary_debiased(index: int, d: int, p: float, u: np.ndarray) -> np.ndarray:
    """The debiased unary encoding of ``index`` among ``d`` symbols: bit ``j`` flips when
    ``u[j] < 1 - p``."""
    onehot = np.zeros(d)
    onehot[index] = 1.0
    bits = np.where(u < 1 - p, 1 - onehot, onehot)
    return (bits - (1 - p)) / (2 * p - 1)


def _numpy_exp3_ldp(means, rho, eps, eta, gamma, uniforms):
    """One seed of :func:`jaxpapers.ldp_rl.exp3_ldp` (``uniforms``: ``[K, 2S + 3]``, one row a
    round, laid out as in the JAX scan); returns the cumulative pseudo-regret.

    Round k: the learner draws an arm ``b_s ~ pi(.|s)`` for every context; the user draws the
    context ``s``, plays ``b_s`` and releases the unary encoding (among ``S + 1`` symbols) of
    ``s`` when the loss is 1, of the spare symbol ``S`` otherwise; the learner adds
    ``1[a = b_s] z_s / pi(a|s)`` to every context's losses.
    """
    S, A = means.shape
    p = 1 / (1 + math.exp(-eps / 2))
    L = np.zeros((S, A))
    regret, best = 0.0, means.max(-1)
    for u in uniforms:
        z = -eta * L
        w = np.exp(z - z.max(-1, keepdims=True))
        pi = (1 - gamma) * w / w.sum(-1, keepdims=True) + gamma / A
        arms = [_inverse_cdf(pi[c], u[2 + c]) for c in range(S)]
        s = _inverse_cdf(rho, u[0])
        loss = u[1] >= means[s, arms[s]]
        msg = _unary_debiased(s if loss else S, S + 1, p, u[2 + S :])
        L[np.arange(S), arms] += msg[:S] / pi[np.arange(S), arms]
        regret += float(rho @ (best - (pi * means).sum(-1)))
    return regret


def _numpy_ucbvi_ldp(P, R, H, eps, bonus_scale, privacy_bonus_scale, uniforms):
    """One seed of :func:`jaxpapers.ldp_rl.ucbvi_ldp` (``uniforms``: ``[K, H, 2 + D]``, one block
    an episode, as in the JAX scan); returns the cumulative regret.

    Every step's ``(s, a, s', r)`` is unary-encoded among ``D = 2 S^2 A`` symbols at
    ``eps / H``; the plan is backward induction on the clipped debiased counts with the bonus
    ``c H sqrt(L / n) + c_sigma H sigma sqrt(2 S H k L) / n``, ``L = log(2 S A H K)``.
    """
    S, A = R.shape
    K = len(uniforms)
    D = S * A * S * 2
    step_eps = eps / H
    p = 1 / (1 + math.exp(-step_eps / 2))
    sigma = math.sqrt(p * (1 - p)) / (2 * p - 1)
    log_term = math.log(2 * S * A * H * K)

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
    for k, episode in enumerate(uniforms):
        n_sas = np.maximum(counts.sum(-1), 0)
        n = np.maximum(counts.sum((-1, -2)), 1)
        mass = n_sas.sum(-1, keepdims=True)
        Pm = np.where(mass > 0, n_sas / np.where(mass > 0, mass, 1), 1 / S)
        Rm = np.clip(counts[..., 1].sum(-1) / n, 0, 1)
        noise = sigma * math.sqrt(2 * S * H * (k + 1) * log_term)
        bonus = bonus_scale * H * np.sqrt(log_term / n) + privacy_bonus_scale * H * noise / n
        pol, _ = plan(Pm, Rm, bonus)
        s = 0
        for h, u in enumerate(episode):
            a = pol[h, s]
            r = int(u[0] < R[s, a])
            s2 = _inverse_cdf(P[s, a], u[1])
            msg = _unary_debiased(((s * A + a) * S + s2) * 2 + r, D, p, u[2:])
            counts += msg.reshape(S, A, S, 2)
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


def _exp3_uniforms(key, K: int, S: int) -> np.ndarray:
    """The ``[K, 2S + 3]`` uniforms :func:`~jaxpapers.ldp_rl.exp3_ldp` draws (round ``k`` from
    ``fold_in(key, k)``)."""
    draw = lambda k: jax.random.uniform(jax.random.fold_in(key, k), (2 * S + 3,))
    return np.asarray(jax.vmap(draw)(jnp.arange(K)), np.float64)


def _ucbvi_uniforms(key, K: int, S: int, A: int, H: int) -> np.ndarray:
    """The ``[K, H, 2 + 2 S^2 A]`` uniforms :func:`~jaxpapers.ldp_rl.ucbvi_ldp` draws."""
    draw = lambda k: jax.random.uniform(jax.random.fold_in(key, k), (H, 2 + 2 * S * S * A))
    return np.asarray(jax.vmap(draw)(jnp.arange(K)), np.float64)


def _cases(quick: bool):
    """The JAX runs (one seed: ``key -> final value``), their NumPy ports drawing from NumPy
    generators (timed), and agreement checks ``() -> (numpy, jax)``: the port on the JAX run's
    own uniforms (EXP3-LDP, UCBVI-LDP) or stream (Gaptron's expected mistakes need no draws)."""
    scale = 1 if quick else 4
    S_b, A_b, eps_b = 4, 4, 1.0
    bandit = random_contextual_bandit(S_b, A_b, key=jax.random.key(0))
    K_b = 1000 * scale
    params = exp3_params(S_b, A_b, K_b, eps_b)
    S, A, H, eps_rl = 3, 2, 3, 4.0
    mdp = random_episodic_mdp(S, A, H, key=jax.random.key(0))
    K_rl = 200 * scale
    T_g = 1000 * scale
    stream, _ = linear_stream(T_g, 20, 5, key=jax.random.key(0), noise=0.1)
    learner = gaptron(0.3, 0.3)

    def exp3(key):
        return exp3_ldp(bandit, K_b, eps_b, key=key, params=params).regret[-1]

    def ucbvi(key):
        # the default bonus constants: c = 0.1 (Hoeffding), c_sigma = 1 (privacy)
        return ucbvi_ldp(mdp, K_rl, eps_rl, key=key).regret[-1]

    def gap(key):
        # each seed draws its own stream: with one shared stream Gaptron's updates (full
        # feedback) would not depend on the seed and vmap would not batch them
        seed_stream, _ = linear_stream(T_g, 20, 5, key=key, noise=0.1)
        return run_online(learner, seed_stream, 5, key=key, radius=1.0).mistakes.sum()

    means = np.asarray(bandit.means, np.float64)
    rho = np.asarray(bandit.context_probs, np.float64)
    eta, gamma = float(params.eta), float(params.gamma)
    P = np.asarray(mdp.P, np.float64)
    R = np.asarray(mdp.R, np.float64)
    x, y = np.asarray(stream.x, np.float64), np.asarray(stream.y)
    rngs = {k: np.random.default_rng(0) for k in ("b", "r", "g")}
    numpy_runs = {
        "exp3_ldp": lambda: _numpy_exp3_ldp(
            means, rho, eps_b, eta, gamma, rngs["b"].random((K_b, 2 * S_b + 3))
        ),
        "ucbvi_ldp": lambda: _numpy_ucbvi_ldp(
            P, R, H, eps_rl, 0.1, 1.0, rngs["r"].random((K_rl, H, 2 + 2 * S * S * A))
        ),
        "gaptron": lambda: _numpy_gaptron(x, y, 5, 0.3, 0.3, rngs["g"]),
    }
    key = jax.random.key(1)
    agreements = {
        "exp3_ldp": lambda: (
            _numpy_exp3_ldp(means, rho, eps_b, eta, gamma, _exp3_uniforms(key, K_b, S_b)),
            float(exp3(key)),
        ),
        "ucbvi_ldp": lambda: (
            _numpy_ucbvi_ldp(P, R, H, eps_rl, 0.1, 1.0, _ucbvi_uniforms(key, K_rl, S, A, H)),
            float(ucbvi(key)),
        ),
        "gaptron": lambda: (
            _numpy_gaptron(x, y, 5, 0.3, 0.3, np.random.default_rng(0)),
            float(run_online(learner, stream, 5, key=key, radius=1.0).expected_mistakes.sum()),
        ),
    }
    return {"exp3_ldp": exp3, "ucbvi_ldp": ucbvi, "gaptron": gap}, numpy_runs, agreements


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
    runs, numpy_runs, agreements = _cases(quick)
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
        ours, theirs = agreements[name]()
        rows.append(
            row(
                f"numpy_vs_jax_{name}",
                "agreement",
                abs(ours - theirs) / max(abs(theirs), 1e-12),
                "relative difference of the final value, the NumPy port (float64) against the "
                "JAX run (float32) on the same draws (0 up to float32 round-off)",
                numpy=ours,
                jax=theirs,
            )
        )
        print(rows[-1], flush=True)
    rows += _markov_games_rows(quick)
    return rows


if __name__ == "__main__":
    bench_main("theory", run)
