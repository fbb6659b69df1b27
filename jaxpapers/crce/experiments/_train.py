"""Training of small GAP CNNs with CE, Grad-CAM-regularised CE and CR-CE.

One model at a time, one jitted Adam step per Python iteration. Measured on XLA:CPU (jax 0.10.2,
widths (8, 16), batch 64): the step called from Python costs ~14 ms; the same step inside
``lax.scan`` / ``fori_loop`` / ``lax.map`` with the weights loop-carried ~220 ms (15x), and vmapped
over the weights of 4 models ~2x per model (grouped convolutions). Every method shares one compiled
step (its penalty weights are arguments), so a paper run compiles the step once per class count.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.nn.cnn import CNNConfig, ConvNet
from jaxpapers.core.pytrees import FAST_COMPILE
from jaxpapers.crce import CRCE, cell_fractions, cr_ce_loss
from jaxpapers.crce.experiments._data import Labelled


class Penalties(NamedTuple):
    """Weights of the three context penalties of one model (all zero = plain cross-entropy)."""

    contrastive: float
    gradcam: float
    estimated: float


#: Rows of the context-shift table and the penalty weights (times ``beta``) that define them.
METHODS: dict[str, Penalties] = {
    "CE": Penalties(0.0, 0.0, 0.0),
    "Grad-CAM-regularised CE": Penalties(0.0, 1.0, 0.0),
    "CR-CE (known context)": Penalties(1.0, 0.0, 0.0),
    "CR-CE (estimated context)": Penalties(0.0, 0.0, 1.0),
}


#: Penalty weight ``beta`` of each method, chosen among 0.3, 1, 3, 10 (estimated context: 1, 3) by
#: worst-group accuracy on a balanced validation set (seed 17, never the test sets) at quick size,
#: training seed 0 (table in :mod:`jaxpapers.crce`); ``--full`` uses the same values.
BETAS: dict[str, float] = {
    "CE": 0.0,
    "Grad-CAM-regularised CE": 3.0,
    "CR-CE (known context)": 1.0,
    "CR-CE (estimated context)": 3.0,
}


def penalties(name: str) -> Penalties:
    """The penalty weights of method ``name``: its selector in :data:`METHODS` times its beta."""
    return Penalties(*(BETAS[name] * x for x in METHODS[name]))


class Trained(NamedTuple):
    """Parameters after training, the last loss and whether every loss was finite."""

    params: nnx.State
    final_loss: float
    finite: bool


def _jit(fn, fast: bool, **kwargs):
    return jax.jit(fn, compiler_options=FAST_COMPILE if fast else None, **kwargs)


def _init_impl(cfg: CNNConfig, seed: jax.Array) -> nnx.State:
    return nnx.split(ConvNet(cfg, rngs=nnx.Rngs(seed)))[1]


_INIT = {f: _jit(_init_impl, f, static_argnums=0) for f in (False, True)}


def init_model(cfg: CNNConfig, seed: int, *, fast: bool = False) -> tuple[nnx.GraphDef, nnx.State]:
    """Graph definition and (jitted, so compiled once per ``cfg``) initial parameters."""
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: ConvNet(cfg, rngs=nnx.Rngs(0))))
    return graphdef, _INIT[fast](cfg, jax.random.key(seed))


def _loss(params, graphdef, x, y, context, w: tuple[jax.Array, ...]) -> jax.Array:
    net = nnx.merge(graphdef, params)
    a = net.features(x)
    base = cr_ce_loss(net.classify, a, y, context, config=CRCE(beta=w[0]))
    grad_pen = cr_ce_loss(
        net.classify, a, y, context, config=CRCE(beta=1.0, attribution="gradcam")
    ).penalty
    est_pen = cr_ce_loss(net.classify, a, y, config=CRCE(beta=1.0, context="estimated")).penalty
    return base.loss + w[1] * grad_pen + w[2] * est_pen


def _step_impl(graphdef, grid, lr, params, opt_state, ok, data: Labelled, idx, w):
    opt = optax.adam(lr)
    ctx = 1.0 - cell_fractions(data.objects[idx], grid)
    val, g = jax.value_and_grad(_loss)(params, graphdef, data.images[idx], data.labels[idx], ctx, w)
    updates, opt_state = opt.update(g, opt_state, params)
    ok = ok & jnp.isfinite(val)
    new = optax.apply_updates(params, updates)
    params = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, params)
    return params, opt_state, ok, val


_STEP = {
    f: _jit(_step_impl, f, static_argnums=(0, 1, 2), donate_argnums=(3, 4)) for f in (False, True)
}


def train_model(
    graphdef: nnx.GraphDef,
    params: nnx.State,
    data: Labelled,
    weights: Penalties,
    *,
    seed: int,
    steps: int,
    batch: int,
    grid: tuple[int, int],
    lr: float = 3e-3,
    fast: bool = False,
) -> Trained:
    """Adam on ``CE + sum_i weights_i * penalty_i`` over minibatches drawn with ``seed``.

    A step whose loss is not finite leaves the parameters unchanged and marks the run.
    """
    opt_state = optax.adam(lr).init(params)
    idx = np.random.default_rng(seed).integers(0, data.labels.shape[0], (steps, batch))
    w = tuple(jnp.asarray(x, jnp.float32) for x in weights)
    ok, val = jnp.array(True), jnp.array(jnp.nan)
    params = jax.tree.map(jnp.copy, params)
    step = _STEP[fast]
    for i in range(steps):
        params, opt_state, ok, val = step(
            graphdef, grid, lr, params, opt_state, ok, data, jnp.asarray(idx[i]), w
        )
    return Trained(params, float(val), bool(ok))


def _logits_impl(graphdef, params, images):
    return nnx.merge(graphdef, params)(images)


_LOGITS = {f: _jit(_logits_impl, f, static_argnums=0) for f in (False, True)}


def predict(graphdef: nnx.GraphDef, params: nnx.State, images, *, fast: bool = False) -> np.ndarray:
    """Predicted classes ``[N]``."""
    return np.asarray(jnp.argmax(_LOGITS[fast](graphdef, params, images), -1))


def group_accuracies(pred: np.ndarray, data: Labelled, groups: int) -> np.ndarray:
    """``[groups]`` accuracy on each group (NaN for an empty group)."""
    correct = np.asarray(pred) == np.asarray(data.labels)
    g = np.asarray(data.groups)
    return np.array([correct[g == i].mean() if (g == i).any() else np.nan for i in range(groups)])


__all__ = [
    "BETAS",
    "METHODS",
    "Penalties",
    "Trained",
    "group_accuracies",
    "init_model",
    "penalties",
    "predict",
    "train_model",
]
