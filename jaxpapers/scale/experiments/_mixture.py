"""The Gaussian-mixture test beds (2-D and 8-D): train every method over seeds, sample, score.

One call of :func:`mixture_study` trains the conditional model (for CFG), GFT, MG and SCALE for
the same number of Adam steps on fresh exact samples, vmapped over seeds, then draws labelled
samples with deterministic DDIM and scores them against exact samples of the same labels. The
guidance scale of every guided method is picked per seed on a separate validation draw from
``W_GRID``: CFG, GFT and the oracle SCG (``_oracle.sample_scg``: the conditional model and a self
network fitted offline to its samples, two passes a step) at sampling time, MG and SCALE from one
trained model per scale in ``TRAINED_GRID`` (``w = 1`` is the conditional model's draw). SCALE's
self-score diagnostic (``_oracle.self_score_error``) is taken at ``config.scale_w``, and SCALE's
Diffusion-DPO fine-tuning (pairs ranked by the true class log-likelihood) of the SCALE model at
that scale runs on the 2-D bed, at every beta of ``config.dpo_betas`` in one vmapped loop (beta a
traced input), the beta picked per seed by the validation draw's sliced Wasserstein distance to
the validation reference (never by the ranking signal). The diagnostic also fits a second
offline self network on fresh samples of the same likelihood model: its distance to the first is
the floor of what the diagnostic's error can show.

The study is four jitted programs, called in turn without waiting for their results (JAX
dispatches each asynchronously, so a program compiles while the previous ones run; the samplers
build their time grid inside the program, so tracing never waits for a running program): training,
as three programs (every method vmapped over seeds; conditional, GFT and MG at every trained scale
in one shared loop, :func:`~jaxpapers.scale.fit_many`; SCALE at every trained scale in one loop,
the scale a traced input; the two offline self networks, the oracle's and the diagnostic's
reference, in one loop); and one program for the rest: on the 2-D bed SCALE's Diffusion-DPO (its
pair draws and fine-tuning loop), the evaluation (every sampler over the scale grid and both
draws, scoring) and, on the 2-D bed, the ``sanity_limits`` loss limits and guided-target errors of
the trained conditional model (a few forward passes). The keys, the split of the trained
parameters by scale and the constants are made inside the programs or in NumPy (every small eager
operation is a program of its own to compile). Each sampler appears once in the evaluation
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
from jaxpapers.scale._network import DEFAULT_SCHEDULE as SCHEDULE
from jaxpapers.scale._oracle import fit_self_score, sample_scg, self_score_error
from jaxpapers.scale._sampling import _likelihood_model
from jaxpapers.scale.experiments._config import Config
from jaxpapers.scale.experiments._sanity import sanity_numbers

W_GRID = (1.0, 1.5, 2.0, 3.0)  # W_GRID[0] = 1 is also the sanity check's CFG(w=1) draw
#: The trained scales of MG and SCALE: ``W_GRID``'s entries after ``w = 1`` (where each of them
#: is the conditional model, ``sanity_limits``, whose draws stand in for it) up to 2. Every trained
#: scale is a training run of its own (the quick bed's costliest part), so the two trained methods
#: share the first three scales of the grid that CFG, GFT and the oracle tune at sampling time.
TRAINED_GRID = W_GRID[1:3]
#: The grid of MG and SCALE: ``w = 1`` (the conditional model) and ``TRAINED_GRID``.
TRAINED_ROWS_GRID = (W_GRID[0], *TRAINED_GRID)
#: The row of SCALE at the configured ``scale_w`` (the model Diffusion-DPO fine-tunes).
SCALE_AT_W = "SCALE at its configured w"
ORACLE = "oracle SCG (two passes)"
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
            replay=config.replay,
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
      w: the guidance scale chosen per seed for each tuned row (CFG, CFG at SCALE's NFE, GFT,
        MG, SCALE, oracle SCG).
      nfe: network passes per sample of each row.
      exact_samples: the metrics of exact samples.
      trained_w: the scales trained into MG and SCALE (and SCALE's replay buffer, in
        refreshes).
      sanity: the ``sanity_limits`` numbers (``_sanity``), or ``None``.
      samples: the first seed's first test samples of every row (2-D bed), or ``None``.
      self_score_fit: SCALE's (at ``scale_w``) self network against a self network refitted
        offline on fresh samples of its final likelihood model (``_oracle.self_score_error``):
        per-seed ``error``, ``contrast`` and ``floor`` (a second refit against the first)
        (mean squared eps norms on noised real data).
      dpo_beta: Diffusion-DPO's beta chosen per seed (2-D bed), by the validation draw's sliced
        Wasserstein distance, or ``None``.
    """

    rows: dict[str, dict[str, list[float]]]
    w: dict[str, list[float]]
    nfe: dict[str, int]
    exact_samples: dict[str, float]
    trained_w: dict[str, float]
    sanity: dict[str, list[float]] | None = None
    samples: dict[str, Any] | None = None
    self_score_fit: dict[str, list[float]] | None = None
    dpo_beta: list[float] | None = None

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


def _pick_w(test: dict[str, Array], val: Array, grid: tuple[float, ...]) -> tuple[dict, Array]:
    """Per seed, the scores at the scale of ``grid`` with the best validation log-likelihood
    (``test[k]`` and ``val`` are ``[w, seeds]``)."""
    best = jnp.argmax(val, axis=0)
    idx = jnp.arange(best.shape[0])
    return {k: test[k][best, idx] for k in METRICS}, jnp.asarray(grid)[best]


def _train_tuned(net, mix, config, methods, init, seeds, labels):
    """The 2-D/8-D beds' training, as three programs: the baselines with MG at every trained
    scale in one loop (``fit_many``); SCALE at every trained scale in one loop (the scale a traced
    input, vmapped with the seeds); the two offline self networks (``_oracle.fit_self_score``, one
    loop vmapped over both): the oracle's, fitted to samples of the conditional model, and the
    diagnostic's reference, fitted to samples of SCALE's final likelihood model at ``scale_w``.
    Returns ``(trained, diagnostic)``: ``trained`` maps ``conditional``, ``gft``, ``mg@w``,
    ``scale@w`` (``w`` in ``TRAINED_GRID``) and ``oracle_psi`` to parameters ``[seeds, ...]``;
    ``diagnostic`` holds ``error``, ``contrast`` and ``floor`` ``[seeds]``
    (``_oracle.self_score_error``; ``floor``: a second refit, on fresh samples of the same
    likelihood model with a fresh key, against the first: the error of an offline refit itself,
    the least the online self network's error can be measured at).
    The keys are derived from ``seeds`` inside the programs, and every split of their outputs
    happens there too (no small eager programs between them)."""
    steps, batch = config.steps, config.batch
    train_keys = lambda seeds: jax.vmap(lambda s: jax.random.key(1000 + s))(seeds)
    mg = {w: Method("mg", w=w, warmup=steps // 2) for w in TRAINED_GRID}
    base = (methods["conditional"], methods["gft"], *mg.values())
    names = ("conditional", "gft", *(f"mg@{w}" for w in TRAINED_GRID))

    def baselines(init, seeds):
        res = jax.vmap(lambda p, k: fit_many(net, base, p, mix, key=k, steps=steps, batch=batch))(
            init, train_keys(seeds)
        )
        return {n: jax.tree.map(lambda a, i=i: a[:, i], res.params) for i, n in enumerate(names)}

    trained = jax.jit(baselines)(init, seeds)
    at_w = lambda tree, i: jax.tree.map(lambda a: a[i], tree)

    def scale(init, seeds):
        """``({scale@w: guided params [seeds, ...]}, (guided, self) pair at scale_w)``."""

        def at(w):
            run = lambda p, k: (
                fit(net, methods["scale"], p, mix, key=k, steps=steps, batch=batch, w=w).params
            )
            return jax.vmap(run)(init, train_keys(seeds))

        pairs = jax.vmap(at)(jnp.asarray(TRAINED_GRID))  # leaves [w, seeds, ...]
        per_w = {f"scale@{w}": at_w(pairs[0], i) for i, w in enumerate(TRAINED_GRID)}
        return per_w, at_w(pairs, TRAINED_GRID.index(config.scale_w))

    per_w, pair = jax.jit(scale)(init, seeds)
    trained |= per_w
    n_fit, fit_steps = config.self_fit_samples, config.self_fit_steps

    def self_fits(pair, cond, p0, kd, ko):
        """The diagnostic's error, contrast and floor and the oracle's self network (one seed)."""
        # Made inside the program: a device array made here after the training programs were
        # dispatched would be a constant of this program, whose value tracing waits for until
        # the queued training has run (measured: 70 s of the quick run's wall).
        fit_labels = jnp.arange(n_fit, dtype=jnp.int32) % mix.num_classes
        ks, kf, ke = jax.random.split(kd, 3)
        ks2, kf2 = jax.random.split(jax.random.fold_in(kd, 2))  # the floor's second refit
        likelihood = lambda k: (
            _likelihood_model(
                net, pair, fit_labels, config.scale_w, k, config.sample_steps, SCHEDULE
            ).x
        )
        x_diag, x_diag2 = jax.vmap(likelihood)(jnp.stack([ks, ks2]))  # one sampler copy
        ks_o, kf_o, _ = jax.random.split(ko, 3)
        x_orc = sample_one_pass(net, cond, fit_labels, key=ks_o, num_steps=config.sample_steps).x
        fitted = jax.vmap(
            lambda x, k: fit_self_score(net, p0, x, fit_labels, key=k, steps=fit_steps, batch=batch)
        )(jnp.stack([x_diag, x_orc, x_diag2]), jnp.stack([kf, kf_o, kf2]))
        ref, psi, ref2 = at_w(fitted, 0), at_w(fitted, 1), at_w(fitted, 2)
        x0 = mix.sample(labels, key=jax.random.fold_in(ke, 1))
        err, contrast = self_score_error(net, pair[1], ref, mix, x0, labels, key=ke)
        floor, _ = self_score_error(net, ref2, ref, mix, x0, labels, key=ke)
        return err, contrast, floor, psi

    def all_self_fits(pair, cond, init, seeds):
        # per seed: the diagnostic's key and the oracle's
        ks = jax.vmap(lambda s: jax.random.split(jax.random.key(2000 + s)))(seeds)
        return jax.vmap(self_fits)(pair, cond, init, ks[:, 0], ks[:, 1])

    err, contrast, floor, psi = jax.jit(all_self_fits)(pair, trained["conditional"], init, seeds)
    trained["oracle_psi"] = psi
    return trained, {"error": err, "contrast": contrast, "floor": floor}


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
    n, steps = config.n_eval, config.sample_steps
    # host-side constants (NumPy): no small eager programs to compile
    labels = jnp.asarray(np.arange(n, dtype=np.int32) % mix.num_classes)
    ws = jnp.asarray(W_GRID)
    nw, nt = len(W_GRID), len(TRAINED_ROWS_GRID)
    means, var = np.asarray(mix.means), np.asarray(mix.var)
    clip = float(np.max(np.abs(means))) + 3.0 * float(np.sqrt(var))
    methods = study_methods(config, config.steps, config.self_batch, clip)
    if config.scale_w not in TRAINED_GRID:
        raise ValueError(f"scale_w={config.scale_w} must be in the trained grid {TRAINED_GRID}")
    tuned_kinds = (("MG", "mg"), ("SCALE", "scale"))

    def evaluate(trained, scale_at_w, seeds_arr):
        """Diffusion-DPO of SCALE at ``scale_w`` (2-D bed), every sampler and score, and the
        ``sanity_limits`` numbers, in one program."""
        tuned_dpo = _dpo(net, mix, scale_at_w, config) if with_dpo else None
        ref = mix.sample(labels, key=jax.random.key(7))
        val_ref = mix.sample(labels, key=jax.random.key(8))
        k_test, k_val, k_sw = jax.random.key(11), jax.random.key(12), jax.random.key(13)
        ns = len(seeds)

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
        # One-pass jobs: the conditional model (test), GFT over the grid (test, then val), then
        # MG and SCALE over the grid (test, then val; w = 1: the conditional model), then
        # SCALE+DPO. ``start[name]`` is the first job of each block.
        jobs, scalars, keys, start = [trained["conditional"]], [1.0], [k_test], {}
        start["GFT"] = len(jobs)
        jobs += [trained["gft"]] * (2 * nw)
        scalars += [1.0 / w for w in W_GRID] * 2
        keys += [k_test] * nw + [k_val] * nw
        for row, kind in tuned_kinds:
            start[row] = len(jobs)
            grid = [trained["conditional"], *(trained[f"{kind}@{w}"] for w in TRAINED_GRID)]
            jobs += grid * 2
            scalars += [1.0] * (2 * nt)
            keys += [k_test] * nt + [k_val] * nt
        nb = len(config.dpo_betas)
        if with_dpo:  # SCALE+DPO at every beta (test, then val)
            start["SCALE+DPO"] = len(jobs)
            dpo_jobs = [jax.tree.map(lambda a, i=i: a[i], tuned_dpo) for i in range(nb)]
            jobs += dpo_jobs * 2
            scalars += [1.0] * (2 * nb)
            keys += [k_test] * nb + [k_val] * nb
        xs_one = flat_sample(one, stack(*jobs), jnp.asarray(scalars), jnp.stack(keys))

        def cfg_grid(num_steps):  # [2 * w (test, then val), seeds, n, d]
            draw = lambda p, w, k: sample_cfg(net, p, labels, key=k, num_steps=num_steps, w=w).x
            cond = stack(*[trained["conditional"]] * (2 * nw))
            wk = jnp.concatenate([ws, ws]), jnp.stack([k_test] * nw + [k_val] * nw)
            return flat_sample(draw, cond, *wk)

        xs_cfg = cfg_grid(steps)
        xs_half = cfg_grid(max(steps // 2, 1))

        def scg(pair, w, k):  # the oracle: SCG at sampling time (conditional + offline psi)
            return sample_scg(net, *pair, labels, key=k, num_steps=steps, w=w).x

        pairs = stack(*[(trained["conditional"], trained["oracle_psi"])] * (2 * nw))
        wk = jnp.concatenate([ws, ws]), jnp.stack([k_test] * nw + [k_val] * nw)
        xs_scg = flat_sample(scg, pairs, *wk)
        n_one = len(jobs)
        start["CFG"], start["CFG at SCALE's NFE"] = n_one, n_one + 2 * nw
        start[ORACLE] = n_one + 4 * nw
        xs = jnp.concatenate([xs_one, xs_cfg, xs_half, xs_scg])  # [jobs, seeds, n, d]
        guided = ("GFT", *(r for r, _ in tuned_kinds), "CFG", "CFG at SCALE's NFE", ORACLE)
        grid_of = {row: W_GRID for row in guided} | {r: TRAINED_ROWS_GRID for r, _ in tuned_kinds}
        # Validation draws are scored against the validation reference.
        is_val = np.zeros(xs.shape[0], bool)
        for row in guided:
            g = len(grid_of[row])
            is_val[start[row] + g : start[row] + 2 * g] = True
        if with_dpo:
            is_val[start["SCALE+DPO"] + nb : start["SCALE+DPO"] + 2 * nb] = True
        refs = jnp.where(jnp.asarray(is_val)[:, None, None], val_ref, ref)
        sc = jax.vmap(lambda x, r: jax.vmap(lambda y: _score(mix, y, labels, r, k_sw))(x))(xs, refs)
        at = lambda i: {k: v[i] for k, v in sc.items()}
        span = lambda i, j: {k: v[i:j] for k, v in sc.items()}
        rows, chosen_w = {}, {}
        rows["conditional (no guidance)"] = at(0)
        for row in guided:
            b, g = start[row], len(grid_of[row])
            rows[row], chosen_w[row] = _pick_w(
                span(b, b + g), sc["log_lik"][b + g : b + 2 * g], grid_of[row]
            )
        at_w = start["SCALE"] + TRAINED_ROWS_GRID.index(config.scale_w)
        rows[SCALE_AT_W] = at(at_w)
        if with_dpo:  # beta by the validation draw's sliced Wasserstein (not the ranking signal)
            b = start["SCALE+DPO"]
            best = jnp.argmin(sc["sw"][b + nb : b + 2 * nb], axis=0)
            rows["SCALE+DPO"] = {k: sc[k][b + best, jnp.arange(ns)] for k in METRICS}
            chosen_w["SCALE+DPO beta"] = jnp.asarray(config.dpo_betas)[best]
        exact = _score(mix, mix.sample(labels, key=jax.random.key(99)), labels, ref, k_sw)
        # CFG at w = 1 (grid entry 0, test key) against the conditional one-pass sampler.
        cfg1 = jnp.max(jnp.abs(xs_cfg[0] - xs_one[0]), axis=(1, 2))
        # The first seed's first test samples of every row (at its chosen scale), for the plot.
        pick = lambda b, g: xs[b + jnp.argmax(sc["log_lik"][b + g : b + 2 * g, 0]), 0]
        shown = {"exact": ref, "conditional (no guidance)": xs_one[0, 0]}
        shown |= {r: pick(start[r], len(grid_of[r])) for r in ("CFG", "GFT", "MG", "SCALE", ORACLE)}
        if with_dpo:
            b = start["SCALE+DPO"]
            shown["SCALE+DPO"] = xs_one[b + jnp.argmin(sc["sw"][b + nb : b + 2 * nb, 0]), 0]
        shown = {k: v[:N_SHOWN] for k, v in shown.items()}
        sanity = None
        if with_sanity:
            sanity = {
                "cfg": cfg1,
                **sanity_numbers(net, mix, trained["conditional"], config, seeds_arr),
            }
        return rows, chosen_w, exact, sanity, shown

    trained, diagnostic = _train_tuned(net, mix, config, methods, init, seeds_arr, labels)
    scale_at_w = trained[f"scale@{config.scale_w}"]
    rows, chosen_w, exact, sanity, shown = jax.jit(evaluate)(trained, scale_at_w, seeds_arr)
    dpo_beta = chosen_w.pop("SCALE+DPO beta", None)
    nfe = {
        "CFG": 2 * steps,
        "CFG at SCALE's NFE": 2 * max(steps // 2, 1),
        "GFT": steps,
        "MG": steps,
        "SCALE": steps,
        ORACLE: 2 * steps,
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
        trained_w={
            "MG": list(TRAINED_GRID),
            "SCALE": list(TRAINED_GRID),
            "DPO's SCALE": config.scale_w,
            "SCALE's replay (refreshes)": config.replay,
        },
        sanity=None if sanity is None else lists(sanity),
        samples=samples,
        self_score_fit=lists(diagnostic),
        dpo_beta=None if dpo_beta is None else np.asarray(dpo_beta).tolist(),
    )


def _dpo(net, mix, params, config):
    """Diffusion-DPO on pairs of SCALE's own samples ranked by the true log p(x | c), at every
    beta of ``config.dpo_betas`` (the same pairs and key per seed; beta a traced input, one loop
    vmapped over betas and seeds): parameters ``[betas, seeds, ...]``."""
    n = config.dpo_pairs
    labels = jnp.arange(n, dtype=jnp.int32) % mix.num_classes

    def one_seed(p, seed):
        ka, kb, kf = jax.random.split(jax.random.fold_in(jax.random.key(21), seed), 3)
        draw = lambda k: sample_one_pass(net, p, labels, key=k, num_steps=config.sample_steps).x
        xa, xb = jax.vmap(draw)(jnp.stack([ka, kb]))  # one sampler copy for both draws
        reward = lambda x: jax.vmap(mix.log_prob)(x, labels)
        pairs = rank_pairs(xa, xb, labels, reward(xa), reward(xb))
        tune = lambda beta: (
            dpo_fit(
                net, p, pairs, key=kf, steps=config.dpo_steps, batch=config.batch, beta=beta
            ).params
        )
        return jax.vmap(tune)(jnp.asarray(config.dpo_betas))

    seeds = jnp.arange(jax.tree.leaves(params)[0].shape[0])
    per_seed = jax.vmap(one_seed)(params, seeds)  # leaves [seeds, betas, ...]
    return jax.tree.map(lambda a: jnp.swapaxes(a, 0, 1), per_seed)
