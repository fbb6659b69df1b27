"""Training of small GAP CNNs with CE, Grad-CAM-regularised CE and CR-CE.

One model at a time: one jitted Adam step per Python iteration, with the freeze of
:func:`jaxpapers.core.fit.fit` (a step whose loss, gradient or update is not finite is not
applied, and the run is marked). Not ``fit`` itself: on XLA:CPU the convolutions' gradients inside
a loop body (``lax.scan``, which ``fit`` is) run ~17x slower than in a top-level program
(``results/P09/NOTES.md``). Every method shares one compiled step (its penalty weights are
arguments), so a paper run compiles the step once per class count.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxpapers.core.fit import all_finite, keep_where
from jaxpapers.core.nn.cnn import CNNConfig, ConvNet
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
    """A trained model: its parameters and optimiser state after the last applied step, the loss
    of every step (``[steps]``, before the step's update) and whether every step was finite."""

    params: nnx.State
    opt_state: optax.OptState
    losses: np.ndarray
    finite: bool


@functools.partial(jax.jit, static_argnums=0)
def _init(config: CNNConfig, key: jax.Array) -> nnx.State:
    return nnx.split(ConvNet(config, rngs=nnx.Rngs(key)))[1]


def init_model(config: CNNConfig, seed: int) -> tuple[nnx.GraphDef, nnx.State]:
    """Graph definition and (jitted, so compiled once per ``config``) initial parameters."""
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: ConvNet(config, rngs=nnx.Rngs(0))))
    return graphdef, _init(config, jax.random.key(seed))


def _loss(params, graphdef, x, y, context, w: tuple[jax.Array, ...]) -> jax.Array:
    net = nnx.merge(graphdef, params)
    a = net.features(x)
    base = cr_ce_loss(net.classify, a, y, context, config=CRCE(beta=w[0]))
    grad_pen = cr_ce_loss(
        net.classify, a, y, context, config=CRCE(beta=1.0, attribution="gradcam")
    ).penalty
    est_pen = cr_ce_loss(net.classify, a, y, config=CRCE(beta=1.0, context="estimated")).penalty
    return base.loss + w[1] * grad_pen + w[2] * est_pen


@functools.partial(jax.jit, static_argnums=(0, 1, 2), donate_argnums=(3, 4))
def _step(graphdef, grid, lr, params, opt_state, finite, data: Labelled, idx, w):
    optimizer = optax.adam(lr)
    ctx = 1.0 - cell_fractions(data.objects[idx], grid)
    loss, grads = jax.value_and_grad(_loss)(
        params, graphdef, data.images[idx], data.labels[idx], ctx, w
    )
    updates, new_opt_state = optimizer.update(grads, opt_state, params)
    new_params = optax.apply_updates(params, updates)
    finite = finite & jnp.isfinite(loss) & all_finite(grads) & all_finite(updates)
    params, opt_state = keep_where(finite, (new_params, new_opt_state), (params, opt_state))
    return params, opt_state, finite, loss


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
) -> Trained:
    """Adam on ``CE + sum_i weights_i * penalty_i`` over minibatches drawn with ``seed``.

    A step whose loss, gradient or update is not finite leaves the parameters and the optimiser
    state unchanged and marks the run (the freeze of :func:`jaxpapers.core.fit.fit`).
    """
    opt_state = optax.adam(lr).init(params)
    idx = np.random.default_rng(seed).integers(0, data.labels.shape[0], (steps, batch))
    w = tuple(jnp.asarray(x, jnp.float32) for x in weights)
    finite, losses = jnp.array(True), []
    params = jax.tree.map(jnp.copy, params)
    for i in range(steps):
        params, opt_state, finite, loss = _step(
            graphdef, grid, lr, params, opt_state, finite, data, jnp.asarray(idx[i]), w
        )
        losses.append(loss)
    return Trained(params, opt_state, np.asarray(jax.device_get(losses)), bool(finite))


@functools.partial(jax.jit, static_argnums=0)
def _logits(graphdef, params, images):
    return nnx.merge(graphdef, params)(images)


def predict(graphdef: nnx.GraphDef, params: nnx.State, images) -> np.ndarray:
    """Predicted classes ``[N]``."""
    return np.asarray(jnp.argmax(_logits(graphdef, params, images), -1))


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
