"""sklearn digits (8x8, values in [-1, 1], flattened to 64-D): a held-out classifier trained here,
every method trained over seeds, class accuracy and Frechet distance in the classifier's features.

The classifier (MLP 64-128-128-10, Adam) is trained on the test split of a seeded 75/25 split;
the generative models see only the training split, so the classifier is held out from them. Its
accuracy on real held-out digits is reported in the extras. The Frechet distance compares the
classifier's last hidden features of generated samples with those of the held-out real digits.
The four methods train in the mixture beds' training programs (``_mixture.train_methods``:
conditional, GFT and MG in one ``fit_many`` loop, SCALE in its own). Every sampler here, the
evaluation's and SCALE's self samples alike, clips its predicted x0 to the data range at every
step (``X0_RANGE``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.data.digits import NUM_CLASSES, load_digits, split
from jaxpapers.core.fit import fit
from jaxpapers.core.nn.mlp import MLP
from jaxpapers.scale import (
    ArrayData,
    frechet_distance,
    mlp_denoiser,
    sample_cfg,
    sample_one_pass,
)
from jaxpapers.scale.experiments._config import Config
from jaxpapers.scale.experiments._mixture import study_methods, train_methods

W_GRID = (1.0, 2.0, 3.0)
#: The classifier's hidden width, also the Frechet features' dimension: each Frechet distance
#: takes two eigendecompositions of a width x width covariance, at any sample count, so the
#: width sets the evaluation's cost (``results/P04/NOTES.md``: 256 cost ~50x more than 128 for
#: the same classifier accuracy on real digits).
CLASSIFIER_WIDTH = 128
#: Every digits sampler (evaluation, and SCALE's self samples) clips its predicted x0 to the data
#: range [-1, 1] at every step (static thresholding, ``clip_x0``).
X0_RANGE = 1.0


def _classifier(x: np.ndarray, y: np.ndarray, steps: int):
    """Train the MLP classifier; return ``(params, forward)`` with ``forward(params, x,
    features=False)`` on ``[n, 64]`` inputs (weights stay arguments: no constant folding)."""
    model = MLP([64, CLASSIFIER_WIDTH, CLASSIFIER_WIDTH, NUM_CLASSES], rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)
    xs, ys = jnp.asarray(x), jnp.asarray(y)

    def forward(p, inp, features=False):
        m = nnx.merge(graphdef, p)
        h = inp
        for layer in m.layers[:-1]:
            h = m.act(layer(h))
        return h if features else m.layers[-1](h)

    def loss(p, _batch, k):
        idx = jax.random.randint(k, (128,), 0, xs.shape[0])
        noisy = xs[idx] + 0.1 * jax.random.normal(k, xs[idx].shape)
        return optax.softmax_cross_entropy_with_integer_labels(forward(p, noisy), ys[idx]).mean()

    return fit(loss, params, optax.adam(1e-3), steps=steps, key=jax.random.key(5)).params, forward


class DigitsStudy(NamedTuple):
    """What :func:`digits_study` measures (per-seed lists, ready for ``result.json``).

    Attributes:
      rows: ``{row: {"accuracy": [per seed], "frechet": [per seed]}}``.
      classifier_accuracy_on_generator_training_digits: the held-out classifier's accuracy on
        the generators' training digits.
      grids: 40 samples (labels ``i % 10``) of the first seed, ``[40, 8, 8]``, per row.
    """

    rows: dict[str, dict[str, list[float]]]
    classifier_accuracy_on_generator_training_digits: float
    grids: dict[str, list]


def digits_study(config: Config, seeds: list[int]) -> DigitsStudy:
    """Train all methods on digits; accuracy and Frechet distance per seed."""
    d = load_digits(8, (-1.0, 1.0))
    train_set, held_out = split(d, test_fraction=0.25, seed=0)
    x_tr = jnp.asarray(train_set.images.reshape(-1, 64))
    x_te, y_te = jnp.asarray(held_out.images.reshape(-1, 64)), held_out.labels
    cls_params, classify = _classifier(x_te, y_te, config.classifier_steps)
    data = ArrayData(x_tr, jnp.asarray(train_set.labels))
    seeds_arr = jnp.asarray(seeds)
    net, init = mlp_denoiser(
        64, NUM_CLASSES, seeds=seeds_arr, hidden=config.digits_hidden, depth=config.depth
    )
    keys = jax.vmap(lambda s: jax.random.key(2000 + s))(seeds_arr)
    steps, n = config.sample_steps, config.digits_eval
    labels = jnp.arange(n, dtype=jnp.int32) % NUM_CLASSES
    methods = study_methods(config, config.digits_steps, config.self_batch, 1.0, X0_RANGE)
    key = jax.random.key(31)
    ws = jnp.asarray(W_GRID)

    def evaluate(trained, cls_params, x_te, x_tr):
        real_feats = classify(cls_params, x_te, True)

        def metrics(x):
            acc = jnp.mean(jnp.argmax(classify(cls_params, x), -1) == labels)
            feats = classify(cls_params, x, True)
            return {"accuracy": acc, "frechet": frechet_distance(feats, real_feats)}

        # One copy of each sampler in the program, vmapped over one flat (job x seed) axis: GFT
        # (over the scale grid), MG and SCALE share the one-pass sampler; CFG runs the grid.
        stack = lambda *ps: jax.tree.map(lambda *a: jnp.stack(a), *ps)
        nw, ns = len(W_GRID), len(seeds)

        def flat_sample(draw, params, scalars):  # [jobs, seeds, ...] -> [jobs, seeds, n, 64]
            jobs = scalars.shape[0]
            flat = jax.tree.map(lambda a: a.reshape(jobs * ns, *a.shape[2:]), params)
            x = jax.vmap(draw)(flat, scalars[np.repeat(np.arange(jobs), ns)])
            return x.reshape(jobs, ns, *x.shape[1:])

        jobs = stack(*[trained["gft"]] * nw, trained["mg"], trained["scale"])
        scalars = jnp.concatenate([1.0 / ws, jnp.ones(2)])
        one = lambda p, sc: (
            sample_one_pass(
                net, p, labels, key=key, num_steps=steps, scalar=sc, x0_range=X0_RANGE
            ).x
        )
        x_one = flat_sample(one, jobs, scalars)
        cfg = lambda p, w: (
            sample_cfg(net, p, labels, key=key, num_steps=steps, w=w, x0_range=X0_RANGE).x
        )
        x_cfg = flat_sample(cfg, stack(*[trained["conditional"]] * nw), ws)
        xs = jnp.clip(jnp.concatenate([x_cfg, x_one]), -1.0, 1.0)  # [jobs, seeds, n, 64]
        sc = jax.vmap(jax.vmap(metrics))(xs)

        def best_of(i):
            """Per seed, the guidance scale with the highest accuracy minus Frechet/100."""
            part = {k: v[i : i + nw] for k, v in sc.items()}
            best = jnp.argmax(part["accuracy"] - part["frechet"] / 100.0, 0)
            idx = jnp.arange(best.shape[0])
            return {k: v[best, idx] for k, v in part.items()}

        at = lambda i: {k: v[i] for k, v in sc.items()}
        rows = {"CFG": best_of(0), "GFT": best_of(nw), "MG": at(2 * nw), "SCALE": at(2 * nw + 1)}
        w2 = W_GRID.index(2.0)
        shown = {"CFG (w=2)": xs[w2], "GFT (w=2)": xs[nw + w2], "MG": xs[2 * nw]}
        shown["SCALE"] = xs[2 * nw + 1]
        real_acc = jnp.mean(jnp.argmax(classify(cls_params, x_tr), -1) == data.labels)
        return rows, {k: v[0, :40] for k, v in shown.items()}, real_acc

    trained = train_methods(
        net, methods, data, init, keys, steps=config.digits_steps, batch=config.batch
    )
    rows, shown, real_acc = jax.jit(evaluate)(trained, cls_params, x_te, x_tr)
    return DigitsStudy(
        rows={r: {k: np.asarray(v).tolist() for k, v in s.items()} for r, s in rows.items()},
        classifier_accuracy_on_generator_training_digits=float(real_acc),
        grids={k: np.asarray(v).reshape(40, 8, 8).tolist() for k, v in shown.items()},
    )
