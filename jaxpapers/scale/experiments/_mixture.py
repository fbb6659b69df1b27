"""The Gaussian-mixture test beds (2-D and 8-D): train every method over seeds, sample, score.

One call of :func:`mixture_study` trains the conditional model (for CFG), GFT, MG and SCALE for
the same number of Adam steps on fresh exact samples, vmapped over seeds, then draws labelled
samples with deterministic DDIM and scores them against exact samples of the same labels. The
guidance scale of CFG and GFT (chosen at sampling time) is picked per seed on a separate
validation draw from ``W_GRID``; MG and SCALE train one fixed scale each. SCALE's Diffusion-DPO
fine-tuning (pairs ranked by the true class log-likelihood) runs on the 2-D bed.

The study is a few jitted programs, called in turn without waiting for their results (JAX
dispatches each asynchronously, so a program compiles while the previous ones run): training, as
two programs (every method vmapped over seeds; conditional, GFT and MG in one shared loop,
:func:`~jaxpapers.scale.fit_many`, SCALE in its own); on the 2-D bed SCALE's Diffusion-DPO (its
pair draws and fine-tuning loop); evaluation (every sampler over the scale grid and both draws,
scoring); and, on the 2-D bed, the ``sanity_limits`` loss limits and guided-target errors of the
trained conditional model (a few forward passes). Each sampler appears once in the evaluation
program, vmapped over one flat (job x seed) axis: every inlined copy of a DDIM sampler, and every
vmap level around one, costs tracing and compile time of its own. :func:`study_methods` and
:func:`train_methods` serve the digits bed too.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.metrics import sliced_wasserstein
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
from jaxpapers.scale.experiments._config import Config
from jaxpapers.scale.experiments._sanity import sanity_numbers

W_GRID = (1.0, 1.5, 2.0, 3.0)  # W_GRID[0] = 1 is also the sanity check's CFG(w=1) draw
METRICS = ("log_lik", "precision", "recall", "sw")
N_SHOWN = 256  # samples per row kept for the 2-D bed's scatter plot (first seed)

Array = jax.Array


def study_methods(
    config: Config, steps: int, self_batch: int, clip: float, x0_range: float | None = None
) -> dict[str, Method]:
    """The four methods of a study trained for ``steps`` Adam steps: conditional (for CFG), GFT,
    MG and SCALE (its self samples drawn with the evaluation sampler, its ``x0_range`` included,
    and clipped to ``clip``)."""
    return {
        "conditional": Method("conditional"),
        "gft": Method("gft"),
        "mg": Method("mg", w=config.mg_w, warmup=steps // 2),
        "scale": Method(
            "scale",
            w=config.scale_w,
            warmup=steps // 2,
            refresh=config.refresh,
            self_steps=config.sample_steps,
            self_batch=self_batch,
            clip=clip,
            x0_range=x0_range,
        ),
    }


BASELINES = ("conditional", "gft", "mg")


def train_methods(
    net: Any,
    methods: dict[str, Method],
    data: Any,
    init: Any,
    keys: Array,
    *,
    steps: int,
    batch: int,
) -> dict[str, Any]:
    """``{name: params [seeds, ...]}`` of :func:`study_methods`' methods trained from ``init``
    (``[seeds, ...]``) at ``keys`` (``[seeds]``), vmapped over seeds, as two programs: the
    baselines in one loop (``fit_many``: the same batches at the same key, one compiled network
    pass for the three) and SCALE's guided network in its own."""

    def baselines(init, keys):
        res = jax.vmap(
            lambda p, k: fit_many(
                net, tuple(methods[n] for n in BASELINES), p, data, key=k, steps=steps, batch=batch
            )
        )(init, keys)  # leaves [seeds, methods, ...]
        return {
            n: jax.tree.map(lambda a, i=i: a[:, i], res.params) for i, n in enumerate(BASELINES)
        }

    def scale(init, keys):
        return jax.vmap(
            lambda p, k: fit(net, methods["scale"], p, data, key=k, steps=steps, batch=batch)
        )(init, keys).params[0]

    return {**jax.jit(baselines)(init, keys), "scale": jax.jit(scale)(init, keys)}


class MixtureStudy(NamedTuple):
    """What :func:`mixture_study` measures (per-seed lists, ready for ``result.json``).

    Attributes:
      rows: ``{row: {metric: [per seed]}}`` (metrics ``log_lik``, ``precision``, ``recall``,
        ``sw``).
      w: the guidance scale chosen per seed for CFG, GFT and CFG at SCALE's NFE.
      nfe: network passes per sample of each row.
      exact_samples: the metrics of exact samples.
      trained_w: the scales trained into MG and SCALE.
      sanity: the ``sanity_limits`` numbers (``_sanity``), or ``None``.
      samples: the first seed's first test samples of every row (2-D bed), or ``None``.
    """

    rows: dict[str, dict[str, list[float]]]
    w: dict[str, list[float]]
    nfe: dict[str, int]
    exact_samples: dict[str, float]
    trained_w: dict[str, float]
    sanity: dict[str, list[float]] | None = None
    samples: dict[str, Any] | None = None

    def extras(self, *, samples: bool = False) -> dict[str, Any]:
        """The fields as ``result.json`` extras (``None`` ones left out; ``samples`` only when
        asked for: one experiment keeps them)."""
        out = {k: v for k, v in self._asdict().items() if v is not None}
        if not samples:
            out.pop("samples", None)
        return out


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
    config: Config,
    dim: int,
    seeds: list[int],
    *,
    with_dpo: bool,
    with_sanity: bool = False,
) -> MixtureStudy:
    """Train all methods on the ``dim``-D checkerboard mixture; return per-seed metrics (with
    the ``sanity_limits`` numbers when ``with_sanity``, SCALE+DPO's row when ``with_dpo``)."""
    mix = checkerboard_mixture(dim)
    seeds_arr = jnp.asarray(seeds)
    net, init = mlp_denoiser(
        dim, mix.num_classes, seeds=seeds_arr, hidden=config.hidden, depth=config.depth
    )
    train_keys = jax.vmap(lambda s: jax.random.key(1000 + s))(seeds_arr)
    n, steps = config.n_eval, config.sample_steps
    labels = jnp.arange(n, dtype=jnp.int32) % mix.num_classes
    ws = jnp.asarray(W_GRID)
    clip = float(jnp.max(jnp.abs(mix.means))) + 3.0 * float(jnp.sqrt(mix.var))
    methods = study_methods(config, config.steps, config.self_batch, clip)

    def evaluate(trained, tuned_dpo):
        ref = mix.sample(labels, key=jax.random.key(7))
        val_ref = mix.sample(labels, key=jax.random.key(8))
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
        exact = _score(mix, mix.sample(labels, key=jax.random.key(99)), labels, ref, k_sw)
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

    trained = train_methods(
        net, methods, mix, init, train_keys, steps=config.steps, batch=config.batch
    )
    tuned = jax.jit(lambda p: _dpo(net, mix, p, config))(trained["scale"]) if with_dpo else None
    rows, chosen_w, exact, cfg1, shown = jax.jit(evaluate)(trained, tuned)
    sanity = None
    if with_sanity:
        limits = jax.jit(lambda p: sanity_numbers(net, mix, p, config, seeds_arr))
        sanity = {"cfg": cfg1, **limits(trained["conditional"])}
    nfe = {
        "CFG": 2 * steps,
        "CFG at SCALE's NFE": 2 * max(steps // 2, 1),
        "GFT": steps,
        "MG": steps,
        "SCALE": steps,
    }
    lists = lambda d: {k: np.asarray(v).tolist() for k, v in d.items()}
    samples = None
    if dim == 2:
        samples = {
            "seed": seeds[0],
            "labels": np.asarray(labels[:N_SHOWN]).tolist(),
            "x": {r: np.round(np.asarray(v), 3).tolist() for r, v in shown.items()},
        }
    return MixtureStudy(
        rows={r: lists(s) for r, s in rows.items()},
        w=lists(chosen_w),
        nfe=nfe,
        exact_samples={k: float(v) for k, v in exact.items()},
        trained_w={"MG": config.mg_w, "SCALE": config.scale_w},
        sanity=None if sanity is None else lists(sanity),
        samples=samples,
    )


def _dpo(net, mix, params, config):
    """Diffusion-DPO on pairs of SCALE's own samples ranked by the true log p(x | c)."""
    n = config.dpo_pairs
    labels = jnp.arange(n, dtype=jnp.int32) % mix.num_classes

    def one_seed(p, seed):
        ka, kb, kf = jax.random.split(jax.random.fold_in(jax.random.key(21), seed), 3)
        draw = lambda k: sample_one_pass(net, p, labels, key=k, num_steps=config.sample_steps).x
        xa, xb = jax.vmap(draw)(jnp.stack([ka, kb]))  # one sampler copy for both draws
        reward = lambda x: jax.vmap(mix.log_prob)(x, labels)
        pairs = rank_pairs(xa, xb, labels, reward(xa), reward(xb))
        return dpo_fit(
            net, p, pairs, key=kf, steps=config.dpo_steps, batch=config.batch, beta=config.dpo_beta
        ).params

    return jax.vmap(one_seed)(params, jnp.arange(jax.tree.leaves(params)[0].shape[0]))
