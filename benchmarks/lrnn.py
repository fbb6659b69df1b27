"""P13 speed and memory: forward+backward of one recurrent layer, every mixer and scan order.

Layer ``x [batch 16, T, width 256] -> y`` (``d_model = d_state = 256``; the LRU state is complex),
loss ``sum(y^2)``, gradient with respect to the parameters and ``x``; median wall time of repeats
after a compile warm-up, all cases of one ``T`` timed interleaved. Memory is XLA's compiled
``memory_analysis()`` of the same executable (default ``XLA_FLAGS``: XLA:CPU may fuse buffers it
does not count; ``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=`` turns that off).

Ratio rows (batch 16, T 4096, width 256, forward+backward; fastest mode of each layer unless the
name says otherwise): ``hlru2_over_lru_time``, ``bdlru4_over_lru_time``,
``assoc_over_seq_time_T4096`` (LRU, associative over sequential scan), plus
``chunked_over_assoc_temp_memory_T4096`` (LRU, compiled temporary bytes).

Quick mode: T = 4096 only, 3 repeats; every mode for LRU, H-LRU K=2 and BD-LRU b=2, 4, but only
the sequential and chunked modes for H-LRU K=4 and BD-LRU b=8: their associative scans at T = 4096
need several GB of temporaries and minutes of compilation on a 2-core, 23 GB machine (a first run
was killed for memory). ``--full``: T in {1024, 4096}, every mode, 7 repeats.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from jaxpapers.core.bench import (
    bench_main,
    executable_memory,
    interleaved_median_times,
    paired_time_ratio,
    row,
)
from jaxpapers.lrnn import make_mixer

MIXERS = ("lru", "hlru2", "hlru4", "bdlru2", "bdlru4", "bdlru8")
MODES = ("sequential", "associative", "chunked")
BATCH, WIDTH, CHUNK = 16, 256, 64


def _compiled_step(mixer: str, mode: str, x: jax.Array):
    layer = make_mixer(mixer, WIDTH, WIDTH, mode=mode, rngs=nnx.Rngs(0))
    if mode == "chunked":
        layer.chunk = CHUNK
    graphdef, params = nnx.split(layer, nnx.Param)

    def loss(p, x_):
        return jnp.sum(nnx.merge(graphdef, p)(x_) ** 2)

    compiled = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(params, x).compile()
    return (lambda: compiled(params, x)), executable_memory(compiled)


def _cases(quick: bool) -> list[tuple[str, str]]:
    heavy = {"hlru4", "bdlru8"}
    return [
        (m, mode)
        for m in MIXERS
        for mode in MODES
        if not (quick and m in heavy and mode == "associative")
    ]


def _minimal_lru_layer(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """The LRU layer as its authors' minimal JAX version writes it, reimplemented here from the
    published recurrence (not their code): one sequence ``x [T, H]`` at a time (vmapped over the
    batch), complex ``B_norm = (B_re + i B_im) * gamma`` of shape ``[N, H]``, the pairs
    ``(lambda, B u_t)`` combined by ``lax.associative_scan`` with
    ``(a_i, b_i) . (a_j, b_j) = (a_j a_i, a_j b_i + b_j)``, output ``Re(C h_t) + D x_t``."""
    lam = jnp.exp(-jnp.exp(params["nu_log"]) + 1j * jnp.exp(params["theta_log"]))
    b_norm = (params["b_re"] + 1j * params["b_im"]).T * jnp.exp(params["gamma_log"])[:, None]
    c = (params["c_re"] + 1j * params["c_im"]).T

    def binary_operator_diag(e_i, e_j):
        a_i, bu_i = e_i
        a_j, bu_j = e_j
        return a_j * a_i, a_j * bu_i + bu_j

    def one(seq):
        lam_elements = jnp.repeat(lam[None, :], seq.shape[0], axis=0)
        bu_elements = jax.vmap(lambda u: b_norm @ u)(seq)
        _, hidden = jax.lax.associative_scan(binary_operator_diag, (lam_elements, bu_elements))
        return jax.vmap(lambda h, u: (c @ h).real + params["d"] * u)(hidden, seq)

    return jax.vmap(one)(x)


def _minimal_lru_rows(quick: bool) -> list[dict[str, Any]]:
    """``minimal_lru_over_ours_time_T4096``: the minimal-LRU formulation's forward+backward over
    our LRU layer's (fastest mode on this backend: ``mode="auto"``), same parameters and input."""
    t = 4096
    x = jax.random.normal(jax.random.key(0), (BATCH, t, WIDTH))
    layer = make_mixer("lru", WIDTH, WIDTH, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(layer, nnx.Param)
    flat = {k: v[...] for k, v in nnx.to_flat_state(params)}
    named = {path[-1]: value for path, value in flat.items()}

    ours = jax.jit(jax.grad(lambda p, x_: jnp.sum(nnx.merge(graphdef, p)(x_) ** 2), (0, 1)))
    peer = jax.jit(jax.grad(lambda p, x_: jnp.sum(_minimal_lru_layer(p, x_) ** 2), (0, 1)))
    y_ours = nnx.merge(graphdef, params)(x)
    y_peer = jax.jit(_minimal_lru_layer)(named, x)
    rel = float(jnp.max(jnp.abs(y_ours - y_peer)) / jnp.max(jnp.abs(y_peer)))
    m = paired_time_ratio(
        lambda: peer(named, x), lambda: ours(params, x), repeats=5 if quick else 11
    )
    return [
        row(
            "minimal_lru_over_ours_time_T4096",
            "ratio",
            m["ratio"],
            "minimal-LRU formulation / our LRU layer, forward+backward (B 16, T 4096, W 256;"
            " median of paired ratios)",
            q25=m["q25"],
            q75=m["q75"],
            outputs_max_rel_diff=rel,
            ours_s=m["baseline_time"],
            peer_s=m["time"],
        )
    ]


def run(quick: bool = True) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = _minimal_lru_rows(quick)
    lengths = (4096,) if quick else (1024, 4096)
    repeats = 3 if quick else 7
    for t in lengths:
        x = jax.random.normal(jax.random.key(0), (BATCH, t, WIDTH))
        fns, mems = {}, {}
        for mixer, mode in _cases(quick):
            fns[(mixer, mode)], mems[(mixer, mode)] = _compiled_step(mixer, mode, x)
            print(f"compiled {mixer} {mode} T={t}", file=sys.stderr, flush=True)
        times = interleaved_median_times(fns, repeats=repeats)
        for (mixer, mode), sec in times.items():
            case = f"{mixer}_{mode}_B{BATCH}_T{t}_W{WIDTH}_fwdbwd"
            rows.append(row(case, "time", sec, "s"))
            rows.append(row(case, "throughput", BATCH * t / sec, "tokens/s"))
            rows.append(row(case, "peak_memory", mems[(mixer, mode)]["peak"], "bytes"))
            rows.append(row(case, "temp_memory", mems[(mixer, mode)]["temp"], "bytes"))
        best = {
            m: min(
                (mode for (mm, mode) in times if mm == m), key=lambda mode, m=m: times[(m, mode)]
            )
            for m in MIXERS
        }
        for m in MIXERS:
            rows.append(
                row(f"{m}_fastest_mode_T{t}", "mode", MODES.index(best[m]), "index", mode=best[m])
            )
        if t == 4096:
            lru = times[("lru", best["lru"])]
            rows.append(
                row(
                    "hlru2_over_lru_time",
                    "ratio",
                    times[("hlru2", best["hlru2"])] / lru,
                    "x",
                    modes=[best["hlru2"], best["lru"]],
                )
            )
            rows.append(
                row(
                    "bdlru4_over_lru_time",
                    "ratio",
                    times[("bdlru4", best["bdlru4"])] / lru,
                    "x",
                    modes=[best["bdlru4"], best["lru"]],
                )
            )
            rows.append(
                row(
                    "assoc_over_seq_time_T4096",
                    "ratio",
                    times[("lru", "associative")] / times[("lru", "sequential")],
                    "x",
                )
            )
            rows.append(
                row(
                    "chunked_over_assoc_temp_memory_T4096",
                    "ratio",
                    mems[("lru", "chunked")]["temp"] / max(mems[("lru", "associative")]["temp"], 1),
                    "x",
                )
            )
        del fns
    rows.append(row("xla_flags", "setting", 0, "", xla_flags=os.environ.get("XLA_FLAGS", "")))
    return rows


if __name__ == "__main__":
    bench_main("lrnn", run)
