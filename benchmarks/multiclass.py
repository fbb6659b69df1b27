"""P16 peer rows: the online multiclass perceptron, river and scikit-learn against ours.

One stream of T = 10^5 rounds (:func:`jaxpapers.multiclass.linear_stream`: d = 64, 10 classes,
5% of labels redrawn). An online learner must predict each example before it sees its label, so
every side runs predict-then-update one example at a time:

* river: ``OneVsRestClassifier(linear_model.Perceptron())``, ``predict_one`` then ``learn_one`` on
  dict rows (the dicts are built before timing, as river's own stream readers hand them over);
* scikit-learn: ``Perceptron().predict`` then ``partial_fit`` on one-row arrays;
* ours: :func:`jaxpapers.multiclass.run_online` with :func:`~jaxpapers.multiclass.perceptron`
  (Crammer-Singer's multiclass perceptron, one ``lax.scan``), the whole call as a user makes it.

The peers' multiclass perceptrons are one-vs-rest (one binary perceptron per class), ours is the
single-machine multiclass update ``W[y] += x, W[y_hat] -= x``: the same protocol and inputs,
different update rules. The agreement rows give each side's online mistake rate on the same
rounds. The peers' per-example cost does not depend on the round (a fixed-size linear model), so
in quick mode river runs the first 10^4 rounds and scikit-learn the first 10^3 (4-5 ms per
``partial_fit`` call) and their times are multiplied by 10 and 100; ``--full`` runs both on all
10^5. Ours always runs all 10^5 rounds.

``ours_vmapped_seeds_over_loop_time``: 16 seeds (each its own stream and key), a Python loop over
the jitted single-seed run over one ``vmap`` of it. Times are ABBA-paired median ratios
(:func:`jaxpapers.core.bench.paired_time_ratio`).

    python benchmarks/multiclass.py [--full] [--out DIR]      or      jaxpapers bench multiclass
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.bench import bench_main, paired_time_ratio, row
from jaxpapers.multiclass import linear_stream, perceptron, run_online

ROUNDS = 10**5
DIM = 64
CLASSES = 10
NOISE = 0.05
SEEDS = 16


def _river(rows_dicts, y) -> int:
    from river import linear_model, multiclass

    model = multiclass.OneVsRestClassifier(linear_model.Perceptron())
    mistakes = 0
    for xi, yi in zip(rows_dicts, y, strict=True):
        mistakes += model.predict_one(xi) != yi
        model.learn_one(xi, yi)
    return mistakes


def _sklearn(x, y) -> int:
    from sklearn.linear_model import Perceptron

    model = Perceptron()
    classes = np.arange(CLASSES)
    mistakes = 0
    for t in range(len(y)):
        xt = x[t : t + 1]
        if t > 0:  # before the first partial_fit sklearn has no model (counted as a mistake)
            mistakes += int(model.predict(xt)[0] != y[t])
        else:
            mistakes += 1
        model.partial_fit(xt, y[t : t + 1], classes=classes)
    return mistakes


def run(quick: bool = True) -> list[dict]:
    import river.multiclass  # noqa: F401 (imported before any timed call)
    import sklearn.linear_model  # noqa: F401

    rows = []
    stream, _ = linear_stream(ROUNDS, DIM, CLASSES, key=jax.random.key(0), noise=NOISE)
    x = np.asarray(stream.x, np.float64)
    y = np.asarray(stream.y).astype(int)
    key = jax.random.key(1)
    learner = perceptron()

    def ours():
        return run_online(learner, stream, CLASSES, key=key)

    ours_mistakes = np.asarray(jax.block_until_ready(ours()).mistakes)
    repeats = 3 if quick else 5
    for name, scale in (("river", 10 if quick else 1), ("sklearn", 100 if quick else 1)):
        n = ROUNDS // scale
        if name == "river":
            dicts = [dict(enumerate(r)) for r in x[:n].tolist()]
            labels = y[:n].tolist()
            peer = lambda dicts=dicts, labels=labels: _river(dicts, labels)
        else:
            peer = lambda n=n: _sklearn(x[:n], y[:n])
        peer_mistakes = []

        def timed_peer(peer=peer, out=peer_mistakes):
            out.append(peer())
            return out[-1]

        m = paired_time_ratio(timed_peer, ours, repeats=repeats, warmup=0)
        who = name if scale == 1 else f"{name} (first {n} rounds, x{scale})"
        rows.append(
            row(
                f"{name}_over_ours_time_perceptron_T1e5",
                "ratio",
                m["ratio"] * scale,
                f"{who} / ours, predict-then-update over 10^5 rounds, d={DIM}, C={CLASSES}; "
                "median of ABBA-paired ratios",
                q25=m["q25"] * scale,
                q75=m["q75"] * scale,
                peer_s=m["time"] * scale,
                ours_s=m["baseline_time"],
                repeats=repeats,
            )
        )
        rows.append(
            row(
                f"{name}_mistake_rate_perceptron",
                "agreement",
                peer_mistakes[-1] / n,
                f"{name}'s one-vs-rest perceptron, online mistakes / rounds over the first {n}",
                ours=float(ours_mistakes[:n].mean()),
                rounds=n,
            )
        )
        print(rows[-2:], flush=True)

    def one_seed(k):
        s, _ = linear_stream(ROUNDS, DIM, CLASSES, key=k, noise=NOISE)
        return run_online(learner, s, CLASSES, key=k).mistakes.sum()

    keys = jax.random.split(jax.random.key(2), SEEDS)
    single = jax.jit(one_seed)
    batched = jax.jit(jax.vmap(one_seed))
    looped = lambda: jnp.stack([single(k) for k in keys])
    m = paired_time_ratio(looped, lambda: batched(keys), repeats=repeats)
    same = bool(np.array_equal(np.asarray(looped()), np.asarray(batched(keys))))
    rows.append(
        row(
            "ours_vmapped_seeds_over_loop_time",
            "ratio",
            m["ratio"],
            f"x: loop over {SEEDS} seeds / one vmapped run (speed-up; loop "
            f"{m['time']:.3g} s, vmap {m['baseline_time']:.3g} s)",
            q25=m["q25"],
            q75=m["q75"],
            same_mistakes=same,
        )
    )
    print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    bench_main("multiclass", run)
