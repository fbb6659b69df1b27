"""P15 peer rows: frequency estimation under local differential privacy, pure-ldp against ours.

10^6 users each hold one of ``d`` categories (d = 64 and d = 2^10; a Zipf(1.1) law truncated to
``d``, one fixed draw), privacy level epsilon = 1. Each side privatises every user's value with a
local randomiser and aggregates the releases into unbiased count estimates for all ``d``
categories; the whole pipeline (clients + aggregation + estimates) is timed.

* ``ue``: symmetric unary encoding (every bit of the one-hot kept w.p.
  ``p = e^{eps/2} / (1 + e^{eps/2})``). pure-ldp: ``UEClient.privatise`` per user and
  ``UEServer.aggregate`` / ``estimate_all`` (its only interface: one Python call per user).
  Ours: :func:`jaxpapers.ldp_rl.unary_encode` and :func:`~jaxpapers.ldp_rl.unary_debias` on
  blocks of 4000 users inside one jitted ``lax.map`` (the ``(n, d)`` bits of 10^6 users at
  d = 2^10 would be 4 GB). Closed-form variance of each count estimate:
  ``n p q / (p - q)^2`` (``q = 1 - p``).
* ``rr``: ``d``-ary randomised response (direct encoding: keep the value w.p.
  ``p = e^eps / (e^eps + d - 1)``, else report one of the other ``d - 1`` uniformly). pure-ldp:
  ``DEClient`` / ``DEServer``. :mod:`jaxpapers.ldp_rl` exposes only Warner's binary
  :func:`~jaxpapers.ldp_rl.randomized_response`, so our side is the same ``d``-ary mechanism
  written here in JAX (``_krr_counts``: uniforms, ``randint``, ``bincount``). Closed-form
  variance: ``(n_i p (1 - p) + (n - n_i) q (1 - q)) / (p - q)^2`` with ``q = 1 / (e^eps + d - 1)``.

Agreement rows ``{side}_variance_over_closed_form_{mech}_d{d}``: the mean over categories (and
over every timed run) of ``(estimate - true count)^2 / closed-form variance``; 1 when the
estimates have the closed-form variance and no bias (standard error about ``sqrt(2 / (d runs))``).
Times: ABBA-paired (:func:`jaxpapers.core.bench.paired_time_ratio`), ours compiled beforehand.
pure-ldp's unary encoding costs one Python call and ``d`` NumPy draws per user (16-35 us per user
on an idle core, minutes per 10^6 users under load), so in quick mode its runs privatise the first
10^5 users and their time is multiplied by 10 (its per-user cost does not depend on how many users
came before); ours always runs all 10^6. ``--full`` times pure-ldp on all 10^6 users too.

    python benchmarks/ldp_rl.py [--full] [--out DIR]      or      jaxpapers bench ldp_rl
"""

from __future__ import annotations

import math
import random
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.bench import bench_main, paired_time_ratio, row
from jaxpapers.ldp_rl import unary_debias, unary_encode

USERS = 10**6
EPSILON = 1.0
BLOCK = 4000  # divides USERS


def _users(d: int, n: int | None = None) -> np.ndarray:
    """One fixed draw of ``n`` (default ``USERS``) users' categories from Zipf(1.1) truncated
    to ``d``."""
    n = USERS if n is None else n
    w = 1.0 / np.arange(1, d + 1) ** 1.1
    return np.random.default_rng(d).choice(d, size=n, p=w / w.sum()).astype(np.int32)


@partial(jax.jit, static_argnames=("d",))
def _ue_counts(key, values, d: int):
    """Unbiased count estimates from unary encoding, ``BLOCK`` users at a time."""
    n = values.shape[0]
    blocks = values.reshape(n // BLOCK, BLOCK)
    keys = jax.random.split(key, n // BLOCK)

    def block(args):
        k, v = args
        return unary_debias(unary_encode(v, d, EPSILON, key=k), EPSILON).sum(0)

    return jax.lax.map(block, (keys, blocks)).sum(0)


@partial(jax.jit, static_argnames=("d",))
def _krr_counts(key, values, d: int):
    """Unbiased count estimates from ``d``-ary randomised response."""
    n = values.shape[0]
    e = math.exp(EPSILON)
    p, q = e / (e + d - 1), 1.0 / (e + d - 1)
    k1, k2 = jax.random.split(key)
    keep = jax.random.uniform(k1, (n,)) < p
    other = jax.random.randint(k2, (n,), 0, d - 1)
    other = other + (other >= values)  # uniform over the d - 1 other categories
    released = jnp.where(keep, values, other)
    counts = jnp.zeros(d, jnp.float32).at[released].add(1.0)
    return (counts - n * q) / (p - q)


def _peer(mech: str, d: int, values: np.ndarray):
    """pure-ldp's client + server over every user; returns the ``d`` count estimates."""
    from pure_ldp.frequency_oracles.direct_encoding import DEClient, DEServer
    from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer

    Client, Server = (UEClient, UEServer) if mech == "ue" else (DEClient, DEServer)
    client = Client(EPSILON, d, index_mapper=lambda x: x)
    server = Server(EPSILON, d, index_mapper=lambda x: x)
    for v in values.tolist():
        server.aggregate(client.privatise(v))
    return np.asarray(server.estimate_all(range(d), suppress_warnings=True), np.float64)


def closed_form_variance(mech: str, d: int, true_counts: np.ndarray) -> np.ndarray:
    """Variance of each category's count estimate (module docstring)."""
    n = float(true_counts.sum())
    if mech == "ue":
        p = math.exp(EPSILON / 2) / (1 + math.exp(EPSILON / 2))
        q = 1.0 - p
        return np.full(d, n * p * q / (p - q) ** 2)
    e = math.exp(EPSILON)
    p, q = e / (e + d - 1), 1.0 / (e + d - 1)
    return (true_counts * p * (1 - p) + (n - true_counts) * q * (1 - q)) / (p - q) ** 2


def run(quick: bool = True) -> list[dict]:
    import pure_ldp.frequency_oracles  # noqa: F401 (imported before any timed call)

    rows = []
    random.seed(0)
    np.random.seed(0)  # noqa: NPY002 (pure-ldp draws from the global generators)
    for d in (64, 1024):
        values = _users(d)
        truth = np.bincount(values, minlength=d).astype(np.float64)
        vj = jnp.asarray(values)
        for mech, ours_fn in (("ue", _ue_counts), ("rr", _krr_counts)):
            repeats = (2 if quick else 5) if mech == "ue" else (5 if quick else 11)
            # pure-ldp's UE in quick mode: the first 10^5 users, time scaled by 10 (docstring)
            scale = 10 if (quick and mech == "ue") else 1
            peer_values = values[: USERS // scale]
            peer_truth = np.bincount(peer_values, minlength=d).astype(np.float64)
            outputs = {"peer": [], "ours": []}
            keys = iter(jax.random.split(jax.random.key(d), 4 * repeats + 4))
            jax.block_until_ready(ours_fn(next(keys), vj, d))  # compile

            def peer(mech=mech, d=d, values=peer_values, out=outputs["peer"]):
                out.append(_peer(mech, d, values))
                return out[-1]

            def ours(ours_fn=ours_fn, d=d, vj=vj, out=outputs["ours"], keys=keys):
                out.append(ours_fn(next(keys), vj, d))
                return out[-1]

            m = paired_time_ratio(peer, ours, repeats=repeats, warmup=0)
            m = {k: v * scale if k in ("ratio", "q25", "q75", "time") else v for k, v in m.items()}
            who = "pure-ldp" if scale == 1 else f"pure-ldp (first {USERS // scale} users, x{scale})"
            rows.append(
                row(
                    f"pure_ldp_over_ours_time_{mech}_n1e6_d{d}",
                    "ratio",
                    m["ratio"],
                    f"{who} / ours, {mech}, 10^6 users, d={d}, eps={EPSILON}; "
                    "median of ABBA-paired ratios",
                    q25=m["q25"],
                    q75=m["q75"],
                    peer_s=m["time"],
                    ours_s=m["baseline_time"],
                    repeats=repeats,
                )
            )
            for side, ests in outputs.items():
                counts = peer_truth if side == "peer" else truth
                var = closed_form_variance(mech, d, counts)
                est = np.stack([np.asarray(e, np.float64) for e in ests])
                z2 = (est - counts) ** 2 / var
                rows.append(
                    row(
                        f"{side}_variance_over_closed_form_{mech}_d{d}",
                        "agreement",
                        float(z2.mean()),
                        f"mean (estimate - count)^2 / closed-form variance over {d} categories "
                        f"x {len(ests)} runs (1 expected; s.e. {math.sqrt(2 / z2.size):.2g})",
                        mean_z=float(((est - counts) / np.sqrt(var)).mean()),
                        users=int(counts.sum()),
                    )
                )
            print(rows[-3:], flush=True)
    return rows


if __name__ == "__main__":
    bench_main("ldp_rl", run)
