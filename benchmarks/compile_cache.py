"""Report rows (no aim): what the first compile costs, cold and with JAX's persistent cache warm.

A full quick run per paper twice (cold, then warm) would take hours on two shared cores, so this
measures one representative compiled program per paper for the papers listed in ``PROGRAMS``
(the paper's core jitted computation at its quick-mode size): each is lowered and compiled
(``jax.jit(fn).lower(*args).compile()``, nothing is run) in a fresh Python process with
``jax_compilation_cache_dir`` set to an empty folder (cold), then again in a second fresh process
on the same folder (warm: the executable is read back from the cache instead of compiled).
``jax_persistent_cache_min_compile_time_secs = 0`` so every program is cached. Rows:
``compile_cold_s_<paper>``, ``compile_warm_s_<paper>`` (seconds of ``lower + compile``, tracing
included), and ``process_cold_s`` / ``process_warm_s`` (wall of the whole child process: Python
and JAX start-up, imports and all programs). The runner (``jaxpapers reproduce``) does not set a
cache folder yet, so today every run pays the cold figures.

    python benchmarks/compile_cache.py [--out DIR]      or      jaxpapers bench compile_cache
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from jaxpapers.core.bench import bench_main, row

#: paper id -> code defining ``fn`` and ``args`` (the program to compile).
PROGRAMS = {
    "P10": """
from jaxpapers.cfshap import InterventionalGame, Worlds, shapley_values
bg = jax.random.normal(jax.random.key(0), (32, 10))
ref = Worlds(bg, jnp.full(32, 1 / 32), bg)
model = lambda v: jnp.tanh(v[0] * v[-1]) + jnp.sum(jnp.sin(v))
fn = jax.vmap(lambda x: shapley_values(InterventionalGame(model, x, ref)))
args = (jnp.zeros((64, 10)),)
""",
    "P14": """
from jaxpapers.markov_games import random_game, simulator_cce
game = random_game(2, 2, (2, 2), key=jax.random.key(0))
fn = lambda g, k: simulator_cce(g, key=k, epsilon=1.0).policy
args = (game, jax.random.key(1))
""",
    "P15": """
from jaxpapers.ldp_rl import exp3_ldp, exp3_params, random_contextual_bandit
bandit = random_contextual_bandit(4, 4, key=jax.random.key(0))
params = exp3_params(4, 4, 1000, 1.0)
fn = lambda k: exp3_ldp(bandit, 1000, 1.0, key=k, params=params).regret[-1]
args = (jax.random.key(1),)
""",
    "P16": """
from jaxpapers.multiclass import gaptron, linear_stream, run_online
stream, _ = linear_stream(1000, 20, 5, key=jax.random.key(0), noise=0.1)
fn = lambda s, k: run_online(gaptron(0.3, 0.3), s, 5, key=k, radius=1.0).mistakes.sum()
args = (stream, jax.random.key(1))
""",
    "P17": """
from jaxpapers.ievi import a_ie_vi, random_mdp
mdp = random_mdp(100, 8, 0.999, key=jax.random.key(0))
fn = lambda m, v: a_ie_vi(m, m.P, v_star=v, max_queries=200)
args = (mdp, jnp.zeros(100))
""",
    "P19": """
from jaxpapers.graphons import NeuralGraphon, symmetric_mc_density, triangle
g = NeuralGraphon(key=jax.random.key(0), sharpness=2.0)
fn = lambda k: symmetric_mc_density(triangle(), g, key=k, num_points=48, control_grid=16)
args = (jax.random.key(1),)
""",
}

_CHILD = """
import json, sys, time
import jax
import jax.numpy as jnp
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
programs = json.loads(sys.argv[2])
out = {}
for paper, code in programs.items():
    scope = {"jax": jax, "jnp": jnp}
    exec(code, scope)
    t0 = time.perf_counter()
    jax.jit(scope["fn"]).lower(*scope["args"]).compile()
    out[paper] = time.perf_counter() - t0
print("RESULT " + json.dumps(out))
"""


def _child(cache: str) -> tuple[dict[str, float], float]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, cache, json.dumps(PROGRAMS)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"compile child failed:\n{proc.stderr[-3000:]}")
    wall = time.perf_counter() - t0
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :]), wall


def run(quick: bool = True) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="jaxpapers-cache-") as cache:
        cold, cold_wall = _child(cache)
        entries = len(os.listdir(cache))
        warm, warm_wall = _child(cache)
    for paper in PROGRAMS:
        rows.append(row(f"compile_cold_s_{paper}", "time", cold[paper], "s (lower + compile)"))
        rows.append(
            row(
                f"compile_warm_s_{paper}",
                "time",
                warm[paper],
                "s (lower + compile, executable from the persistent cache)",
                cold_over_warm=cold[paper] / warm[paper],
            )
        )
    rows.append(row("process_cold_s", "time", cold_wall, "s (child process, empty cache)"))
    rows.append(
        row("process_warm_s", "time", warm_wall, "s (child process, warm cache)", entries=entries)
    )
    print(rows, flush=True)
    return rows


if __name__ == "__main__":
    bench_main("compile_cache", run)
