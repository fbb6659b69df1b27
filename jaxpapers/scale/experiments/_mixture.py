"""The Gaussian-mixture test beds (2-D and 8-D): train every method over seeds, sample, score.

One call of :func:`mixture_study` trains the conditional model (for CFG), GFT, MG and SCALE for
the same number of Adam steps on fresh exact samples, vmapped over seeds, then draws labelled
samples with deterministic DDIM and scores them against exact samples of the same labels. The
guidance scale of CFG and GFT (chosen at sampling time) is picked per seed on a separate
validation draw from ``W_GRID``; MG and SCALE train one fixed scale each. SCALE's Diffusion-DPO
fine-tuning (pairs ranked by the true class log-likelihood) runs on the 2-D bed.

The study is three jitted programs, plus two more on the 2-D bed: training, as two programs run at
once on two threads (every method vmapped over seeds; conditional, GFT and MG in one shared loop,
``fit_many``, SCALE in its own; compiled with full optimisation, since it is where the compute
is), on the 2-D bed SCALE's Diffusion-DPO
(its pair draws and fine-tuning loop: inside the evaluation program it added ~14 CPU-s of
compile, alone it costs ~8; measured under load), evaluation (every sampler over the scale grid
and both draws, scoring; little compute, but compiling it with ``FAST_COMPILE`` slowed its run
more than it saved, so only smoke sizes do, ``Sizes.fast_compile_light``) and, on the 2-D bed,
the ``sanity_limits`` loss limits and guided-target errors of the trained conditional model (a
few forward passes: always ``FAST_COMPILE``; measured under load, 5.2 CPU-s of compile alone
against ~16 CPU-s added to the evaluation program's full-optimisation compile). The last three
compile on a worker thread while the training programs compile and run, SCALE's training runs on
a thread of its own (:class:`Ahead`). No op-by-op dispatch. Each sampler
appears once in the evaluation program, vmapped over one flat (job x seed) axis: every inlined
copy of a DDIM sampler, and every vmap level around one, costs tracing and compile time of its
own (measured on a loaded machine: a vmapped sampler ~3 CPU-s of compile, each of the four
training loops 6-11 CPU-s). :func:`study_methods` and :func:`train_methods` (the four methods
and their training, one program) serve the digits bed too.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.metrics import sliced_wasserstein
from jaxpapers.core.pytrees import FAST_COMPILE
from jaxpapers.scale import (
    Method,
    checkerboard_mixture,
    dpo_fit,
    fit,
    fit_many,
    mixture_metrics,
    mlp_denoiser,
    rank_pairs,
    sample_cfg,
    sample_one_pass,
)
from jaxpapers.scale.experiments._sanity import sanity_numbers

W_GRID = (1.0, 1.5, 2.0, 3.0)  # W_GRID[0] = 1 is also the sanity check's CFG(w=1) draw
METRICS = ("log_lik", "precision", "recall", "sw")
N_SHOWN = 256  # samples per row kept for the 2-D bed's scatter plot (first seed)

Array = jax.Array


def study_jit(fn: Any, sizes: Any, *, light: bool = False) -> Any:
    """``jax.jit(fn)``, with the fast-compile XLA options where ``sizes.fast_compile`` says so
    (small CPU runs, where the compile costs more than the compute it would speed up) and, for a
    ``light`` program (evaluation: samplers, scoring, DPO), where
    ``sizes.fast_compile_light`` does. Measured on the 2-D mixture's training loops: FAST_COMPILE
    halves their compile time and doubles their run time, so heavy programs keep full
    optimisation."""
    fast = sizes.fast_compile or (light and sizes.fast_compile_light)
    return jax.jit(fn, compiler_options=FAST_COMPILE if fast else None)


class Ahead:
    """Compiles programs on a worker thread, and runs one more program on a thread of its own,
    while the main thread compiles and runs the baselines' training.

    A study compiles its later programs (DPO, evaluation, sanity) here, from the abstract shapes
    of the training programs' outputs (``Traced.out_info``), while the main thread compiles and
    runs the training: XLA:CPU compiles one program on about one core, so two compiles on two
    threads use both. SCALE's training runs beside the baselines' on :meth:`run`'s thread: one
    training program alone keeps about 1.5 of the 2 cores busy. Tracing must not wait on a
    running program, so every array a traced function closes over is computed before the
    training starts. (Written when every program holding a DDIM sampler carried diffrax's
    ``StepTo`` host callback and so ran synchronously on the calling thread; the core's samplers
    have had none since, and the threads still pay for the overlap of compiles and runs.)
    """

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="p04-compile")
        self._runner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="p04-run")

    def compile(self, jitted: Any, *args: Any) -> Future:
        """A future of ``jitted.trace(*args).lower().compile()`` (``args``: arrays or
        ``jax.ShapeDtypeStruct`` trees); jobs run in submission order."""
        return self._pool.submit(lambda: jitted.trace(*args).lower().compile())

    def run(self, traced: Any, *args: Any) -> Future:
        """A future of ``traced.lower().compile()(*args)``, compiled and run on a thread of its
        own (``traced``: a ``jax.jit(...).trace(...)``; ``args``: concrete arrays)."""
        return self._runner.submit(lambda: traced.lower().compile()(*args))

    def close(self) -> None:
        """End the worker threads (after their queued jobs)."""
        self._pool.shutdown()
        self._runner.shutdown()


def study_methods(
    sizes: Any, steps: int, self_batch: int, clip: float, x0_range: float | None = None
) -> dict[str, Method]:
    """The four methods of a study trained for ``steps`` Adam steps: conditional (for CFG), GFT,
    MG and SCALE (its self samples drawn with the evaluation sampler, its ``x0_range`` included,
    and clipped to ``clip``)."""
    return {
        "conditional": Method("conditional"),
        "gft": Method("gft"),
        "mg": Method("mg", w=sizes.mg_w, warmup=steps // 2),
        "scale": Method(
            "scale",
            w=sizes.scale_w,
            warmup=steps // 2,
            refresh=sizes.refresh,
            self_steps=sizes.sample_steps,
            self_batch=self_batch,
            clip=clip,
            x0_range=x0_range,
        ),
    }


def train_parts(net: Any, methods: dict[str, Method], data: Any, steps: int, batch: int) -> Any:
    """``(baselines, scale)``: two functions of ``(init, keys)``, vmapped over seeds, training
    :func:`study_methods`' methods. ``baselines`` returns ``{"conditional", "gft", "mg": params
    [seeds, ...]}`` from one loop (``fit_many``: the same batches at the same key, one compiled
    network pass for the three); ``scale`` returns SCALE's guided parameters from its own loop.
    The two are independent, so they can run as two programs at once (the 2-D bed does)."""
    names = ("conditional", "gft", "mg")

    def baselines(init, keys):
        res = jax.vmap(
            lambda p, k: fit_many(
                net, tuple(methods[n] for n in names), p, data, key=k, steps=steps, batch=batch
            )
        )(init, keys)  # leaves [seeds, methods, ...]
        return {n: jax.tree.map(lambda a, i=i: a[:, i], res.params) for i, n in enumerate(names)}

    def scale(init, keys):
        return jax.vmap(
            lambda p, k: fit(net, methods["scale"], p, data, key=k, steps=steps, batch=batch)
        )(init, keys).params[0]

    return baselines, scale


def train_methods(net: Any, methods: dict[str, Method], data: Any, steps: int, batch: int) -> Any:
    """``train(init, keys) -> {name: params [seeds, ...]}``: both of :func:`train_parts` in one
    function (one program)."""
    baselines, scale = train_parts(net, methods, data, steps, batch)
    return lambda init, keys: {**baselines(init, keys), "scale": scale(init, keys)}


def _score(mix, x, labels, ref, key) -> dict[str, Array]:
    m = mixture_metrics(mix, x, labels, ref)
    sw = sliced_wasserstein(x, ref, key=key)
    return {"log_lik": m.log_lik, "precision": m.precision, "recall": m.recall, "sw": sw}


def _pick_w(test: dict[str, Array], val: Array) -> tuple[dict[str, Array], Array]:
    """Per seed, the scores at the scale with the best validation log-likelihood
    (``test[k]`` and ``val`` are ``[w, seeds]``)."""
    best = jnp.argmax(val, axis=0)
    idx = jnp.arange(best.shape[0])
    return {k: test[k][best, idx] for k in METRICS}, jnp.asarray(W_GRID)[best]


def mixture_study(
    sizes: Any,
    dim: int,
    seeds: list[int],
    *,
    with_dpo: bool,
    with_sanity: bool = False,
) -> dict[str, Any]:
    """Train all methods on the ``dim``-D checkerboard mixture; return per-seed metrics.

    The DPO, evaluation and sanity programs compile on a worker thread (:class:`Ahead`) while
    the training program runs.

    Returns:
      ``{"rows": {row: {metric: [per seed]}}, "w": {...}, "nfe": {...}}`` (JSON-ready), plus
      ``"sanity"`` (see ``_sanity``) when ``with_sanity``.
    """
    mix = checkerboard_mixture(dim)
    seeds_arr = jnp.asarray(seeds)
    net, init = mlp_denoiser(
        dim, mix.num_classes, seeds=seeds_arr, hidden=sizes.hidden, depth=sizes.depth
    )
    train_keys = jax.vmap(lambda s: jax.random.key(1000 + s))(seeds_arr)
    n, steps = sizes.n_eval, sizes.sample_steps
    labels = jnp.arange(n, dtype=jnp.int32) % mix.num_classes
    ws = jnp.asarray(W_GRID)
    clip = float(jnp.max(jnp.abs(mix.means))) + 3.0 * float(jnp.sqrt(mix.var))
    methods = study_methods(sizes, sizes.steps, sizes.self_batch, clip)

    def evaluate(trained, tuned_dpo):
        ref = mix.sample(jax.random.key(7), labels)
        val_ref = mix.sample(jax.random.key(8), labels)
        k_test, k_val, k_sw = jax.random.key(11), jax.random.key(12), jax.random.key(13)
        nw, ns = len(W_GRID), len(seeds)

        # Every sampler appears once in the program, vmapped over one flat (job x seed) axis:
        # each inlined copy of a DDIM sampler, and each vmap level around it, costs compile time.
        def flat_sample(draw, params, scalars, keys):
            """``params`` [jobs, seeds, ...], ``scalars`` and ``keys`` [jobs] -> [jobs, seeds,
            n, d]."""
            jobs = scalars.shape[0]
            flat = jax.tree.map(lambda a: a.reshape(jobs * ns, *a.shape[2:]), params)
            rep = np.repeat(np.arange(jobs), ns)
            x = jax.vmap(draw)(flat, scalars[rep], keys[rep])
            return x.reshape(jobs, ns, *x.shape[1:])

        one = lambda p, s, k: sample_one_pass(net, p, labels, key=k, num_steps=steps, scalar=s).x
        stack = lambda *ps: jax.tree.map(lambda *a: jnp.stack(a), *ps)
        jobs = [trained["conditional"], *[trained["gft"]] * (2 * nw), trained["mg"]]
        jobs += [trained["scale"], *([tuned_dpo] if with_dpo else [])]
        scalars = jnp.concatenate([jnp.ones(1), 1.0 / ws, 1.0 / ws, jnp.ones(2 + with_dpo)])
        keys = jnp.stack([k_test, *[k_test] * nw, *[k_val] * nw, *[k_test] * (2 + with_dpo)])
        xs_one = flat_sample(one, stack(*jobs), scalars, keys)

        def cfg_grid(num_steps):  # [2 * w (test, then val), seeds, n, d]
            draw = lambda p, w, k: sample_cfg(net, p, labels, key=k, num_steps=num_steps, w=w).x
            cond = stack(*[trained["conditional"]] * (2 * nw))
            wk = jnp.concatenate([ws, ws]), jnp.stack([k_test] * nw + [k_val] * nw)
            return flat_sample(draw, cond, *wk)

        xs_cfg = cfg_grid(steps)
        xs_half = cfg_grid(max(steps // 2, 1))
        xs = jnp.concatenate([xs_one, xs_cfg, xs_half])  # [jobs, seeds, n, d]
        n_one = len(jobs)
        # Validation draws are scored against the validation reference.
        is_val = np.zeros(xs.shape[0], bool)
        is_val[1 + nw : 1 + 2 * nw] = True
        for base in (n_one, n_one + 2 * nw):
            is_val[base + nw : base + 2 * nw] = True
        refs = jnp.where(jnp.asarray(is_val)[:, None, None], val_ref, ref)
        sc = jax.vmap(lambda x, r: jax.vmap(lambda y: _score(mix, y, labels, r, k_sw))(x))(xs, refs)
        at = lambda i: {k: v[i] for k, v in sc.items()}
        span = lambda i, j: {k: v[i:j] for k, v in sc.items()}
        rows, chosen_w = {}, {}
        rows["conditional (no guidance)"] = at(0)
        rows["GFT"], chosen_w["GFT"] = _pick_w(span(1, 1 + nw), sc["log_lik"][1 + nw : 1 + 2 * nw])
        rows["MG"], rows["SCALE"] = at(1 + 2 * nw), at(2 + 2 * nw)
        for row, base in (("CFG", n_one), ("CFG at SCALE's NFE", n_one + 2 * nw)):
            rows[row], chosen_w[row] = _pick_w(
                span(base, base + nw), sc["log_lik"][base + nw : base + 2 * nw]
            )
        if with_dpo:
            rows["SCALE+DPO"] = at(3 + 2 * nw)
        exact = _score(mix, mix.sample(jax.random.key(99), labels), labels, ref, k_sw)
        # CFG at w = 1 (grid entry 0, test key) against the conditional one-pass sampler.
        cfg1 = jnp.max(jnp.abs(xs_cfg[0] - xs_one[0]), axis=(1, 2))
        # The first seed's first test samples of every row (at its chosen scale), for the plot.
        pick = lambda base: xs[base + jnp.argmax(sc["log_lik"][base + nw : base + 2 * nw, 0]), 0]
        shown = {"exact": ref, "conditional (no guidance)": xs_one[0, 0], "CFG": pick(n_one)}
        shown |= {"GFT": pick(1), "MG": xs_one[1 + 2 * nw, 0], "SCALE": xs_one[2 + 2 * nw, 0]}
        if with_dpo:
            shown["SCALE+DPO"] = xs_one[3 + 2 * nw, 0]
        shown = {k: v[:N_SHOWN] for k, v in shown.items()}
        return rows, chosen_w, exact, cfg1, shown

    ahead = Ahead()
    # Two training programs, run at once on two threads: one program alone keeps ~1.5 of the 2
    # cores busy (measured: CPU timeline of the quick run).
    train_baselines, train_scale = train_parts(net, methods, mix, sizes.steps, sizes.batch)
    training = study_jit(train_baselines, sizes).trace(init, train_keys)
    scale_training = study_jit(train_scale, sizes).trace(init, train_keys)
    scale_run = ahead.run(scale_training, init, train_keys)
    # The trained parameters' abstract shapes.
    shapes = {**training.out_info, "scale": scale_training.out_info}
    # DPO (its sampler draws and its fine-tuning loop) is a program of its own: inside the
    # evaluation program it added more compile time than it costs alone.
    dpo = lambda p: _dpo(net, mix, p, sizes)
    if with_dpo:
        dpo_program = ahead.compile(study_jit(dpo, sizes, light=True), shapes["scale"])
    tuned_shape = shapes["scale"] if with_dpo else None  # DPO keeps the parameters' shapes
    eval_program = ahead.compile(study_jit(evaluate, sizes, light=True), shapes, tuned_shape)
    if with_sanity:
        # The loss limits and the guided-target errors: a few forward passes, so their own
        # program compiled with FAST_COMPILE at every size (inside the evaluation program they
        # cost ~16 CPU-s of full-optimisation compile; alone: 11.8 full, 5.2 fast).
        limits = jax.jit(
            lambda p: sanity_numbers(net, mix, p, sizes, seeds_arr), compiler_options=FAST_COMPILE
        )
        limits_program = ahead.compile(limits, shapes["conditional"])
    trained = {**training.lower().compile()(init, train_keys), "scale": scale_run.result()}
    tuned = dpo_program.result()(trained["scale"]) if with_dpo else None
    rows, chosen_w, exact, cfg1, shown = eval_program.result()(trained, tuned)
    if with_sanity:
        sanity = {"cfg": cfg1, **limits_program.result()(trained["conditional"])}
    ahead.close()
    nfe = {
        "CFG": 2 * steps,
        "CFG at SCALE's NFE": 2 * max(steps // 2, 1),
        "GFT": steps,
        "MG": steps,
        "SCALE": steps,
    }
    out = {
        "rows": {r: {k: np.asarray(v).tolist() for k, v in s.items()} for r, s in rows.items()},
        "w": {r: np.asarray(v).tolist() for r, v in chosen_w.items()},
        "nfe": nfe,
        "exact_samples": {k: float(v) for k, v in exact.items()},
        "trained_w": {"MG": sizes.mg_w, "SCALE": sizes.scale_w},
    }
    if with_sanity:
        out["sanity"] = {k: np.asarray(v).tolist() for k, v in sanity.items()}
    if dim == 2:
        out["samples"] = {
            "seed": seeds[0],
            "labels": np.asarray(labels[:N_SHOWN]).tolist(),
            "x": {r: np.round(np.asarray(v), 3).tolist() for r, v in shown.items()},
        }
    return out


def _dpo(net, mix, params, sizes):
    """Diffusion-DPO on pairs of SCALE's own samples ranked by the true log p(x | c)."""
    n = sizes.dpo_pairs
    labels = jnp.arange(n, dtype=jnp.int32) % mix.num_classes

    def one_seed(p, seed):
        ka, kb, kf = jax.random.split(jax.random.fold_in(jax.random.key(21), seed), 3)
        draw = lambda k: sample_one_pass(net, p, labels, key=k, num_steps=sizes.sample_steps).x
        xa, xb = jax.vmap(draw)(jnp.stack([ka, kb]))  # one sampler copy for both draws
        reward = lambda x: jax.vmap(mix.log_prob)(x, labels)
        pairs = rank_pairs(xa, xb, labels, reward(xa), reward(xb))
        out, _ = dpo_fit(
            net, p, pairs, key=kf, steps=sizes.dpo_steps, batch=sizes.batch, beta=sizes.dpo_beta
        )
        return out

    return jax.vmap(one_seed)(params, jnp.arange(jax.tree.leaves(params)[0].shape[0]))
