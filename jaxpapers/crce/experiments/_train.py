"""Training of small GAP CNNs with CE, the context regularisers and the context-shift baselines.

One model at a time: one jitted Adam step per Python iteration, with the freeze of
:func:`jaxpapers.core.fit.fit` (a step whose loss, gradient or update is not finite is not
applied, and the run is marked). Not ``fit`` itself: on XLA:CPU the convolutions' gradients inside
a loop body (``lax.scan``, which ``fit`` is) run ~17x slower than in a top-level program
(``results/P09/NOTES.md``). Every method shares one compiled step (its penalty weights, GroupDRO
step size and background swaps are arguments), so a paper run compiles the step once per class
count, and GroupDRO's once: a separate program, so that the other methods' step stays the
program of plain CE and CR-CE (an exactly-zero GroupDRO term in the shared step changes XLA's
summation order, hence the float32 results; ``results/P09/NOTES.md``).

The baselines of the context-shift tables:

* **GroupDRO** (Sagawa et al. 2020, Algorithm 1, the online group-weight update): with group
  labels ``g`` (class x background) and the mean cross-entropy ``l_g`` of each group's examples
  in the minibatch (0 for a group absent from it), the group weights move by
  ``q_g <- q_g exp(eta l_g) / sum_g' q_g' exp(eta l_g')`` (``eta`` the step size; computed in log
  space) and the model takes a gradient step on ``sum_g q_g l_g`` with the updated ``q``, held
  fixed. ``q`` starts uniform and is carried across steps. Minibatches are **group-balanced**,
  as in every GroupDRO command of the reference implementation (kohpangwei/group_DRO,
  ``--reweight_groups --robust``: a ``WeightedRandomSampler`` with weight ``1 / n_g`` per example,
  drawn with replacement): example ``i`` of group ``g_i`` is drawn with probability
  ``1 / (G n_{g_i})`` (``G`` the groups present), so each slot falls in every group with
  probability ``1 / G`` and is uniform within it (:func:`group_balanced_indices`). Why it
  matters: Algorithm 1 estimates each ``l_g`` from the group's examples in the batch. Drawn
  uniformly, a group holding a share ``pi_g`` of the training set appears in a batch of ``B``
  with probability ``1 - (1 - pi_g)^B``; at quick size (``pi_g`` ~ 0.025, ``B`` = 64) a minority
  group is missing from ~20% of the batches and then enters the update with ``l_g = 0``, which
  lowers its weight, so ``q`` drifts towards the majority groups. Balanced batches hold ~``B / G``
  examples of each group, so every ``l_g`` is estimated at every step.
* **Group-balanced CE** (resampling: the reference implementation's ``--reweight_groups``
  without ``--robust``, the standard cheap baseline with group labels): the plain cross-entropy
  on the same group-balanced minibatches, whose expected loss is ``(1 / G) sum_g l_g`` (the
  group-averaged risk, where the uniform draw's is ``sum_g pi_g l_g``). Nothing to tune.
* **Background randomisation**: with probability ``p`` (drawn per image and step) a training
  image's background pixels (outside its object mask) are replaced by a background drawn from the
  training distribution of backgrounds independently of the label (:func:`._data.backgrounds`;
  the "mixed-rand" images of Xiao et al. 2020). It uses the same object masks as CR-CE with known
  context; GroupDRO uses group labels instead.
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


NO_PENALTY = Penalties(0.0, 0.0, 0.0)


class Method(NamedTuple):
    """How one row of the context-shift tables trains, and which hyperparameter is tuned.

    Attributes:
      penalties: selectors of the context penalties (times the tuned ``beta``).
      group_dro: train with GroupDRO's group-weighted loss; the tuned value is its step size.
      randomise: background randomisation; the tuned value is the probability that a training
        image's background is replaced.
      balanced: draw group-balanced minibatches (:func:`group_balanced_indices`).
    """

    penalties: Penalties
    group_dro: bool = False
    randomise: bool = False
    balanced: bool = False

    @property
    def tuned(self) -> str | None:
        """Name of the tuned hyperparameter (``None``: nothing to tune)."""
        if self.group_dro:
            return "group_dro_step"
        if self.randomise:
            return "randomise_probability"
        return "beta" if any(self.penalties) else None


#: Rows of the context-shift tables and how each trains.
METHODS: dict[str, Method] = {
    "CE": Method(NO_PENALTY),
    "Grad-CAM-regularised CE": Method(Penalties(0.0, 1.0, 0.0)),
    "CR-CE (known context)": Method(Penalties(1.0, 0.0, 0.0)),
    "CR-CE (estimated context)": Method(Penalties(0.0, 0.0, 1.0)),
    "GroupDRO": Method(NO_PENALTY, group_dro=True, balanced=True),
    "Background randomisation": Method(NO_PENALTY, randomise=True),
    "Group-balanced CE": Method(NO_PENALTY, balanced=True),
}


class Options(NamedTuple):
    """The arguments of :func:`train_model` that make one model of a method (see
    :func:`options`)."""

    weights: Penalties
    group_dro: float | None
    randomise: float
    balanced: bool = False


def options(name: str, value: float | None) -> Options:
    """How to train method ``name`` with its tuned hyperparameter at ``value``."""
    method = METHODS[name]
    if method.tuned is None:
        return Options(NO_PENALTY, None, 0.0, method.balanced)
    if value is None:
        raise ValueError(f"method {name!r} needs a value of its {method.tuned}")
    if method.group_dro:
        return Options(NO_PENALTY, float(value), 0.0, method.balanced)
    if method.randomise:
        return Options(NO_PENALTY, None, float(value), method.balanced)
    weights = Penalties(*(float(value) * x for x in method.penalties))
    return Options(weights, None, 0.0, method.balanced)


class Trained(NamedTuple):
    """A trained model: its parameters and optimiser state after the last applied step, the loss
    of every step (``[steps]``, before the step's update), whether every step was finite, and
    GroupDRO's final group weights (uniform for the other methods)."""

    params: nnx.State
    opt_state: optax.OptState
    losses: np.ndarray
    finite: bool
    group_weights: np.ndarray


@functools.partial(jax.jit, static_argnums=0)
def _init(config: CNNConfig, key: jax.Array) -> nnx.State:
    return nnx.split(ConvNet(config, rngs=nnx.Rngs(key)))[1]


def init_model(config: CNNConfig, seed: int) -> tuple[nnx.GraphDef, nnx.State]:
    """Graph definition and (jitted, so compiled once per ``config``) initial parameters."""
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: ConvNet(config, rngs=nnx.Rngs(0))))
    return graphdef, _init(config, jax.random.key(seed))


def group_dro_update(
    log_q: jax.Array, losses: jax.Array, groups: jax.Array, step: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """One online GroupDRO update (Sagawa et al. 2020, Algorithm 1) in log space.

    Args:
      log_q: ``[G]`` log group weights before the step.
      losses: ``[B]`` per-example losses of the minibatch.
      groups: ``[B]`` group of each example.
      step: the step size ``eta``.

    Returns:
      The updated ``log_q`` (normalised; a function of the losses' values only) and the robust
      loss ``sum_g q_g l_g`` with the updated weights, differentiable through the losses.
    """
    onehot = jax.nn.one_hot(groups, log_q.shape[0], dtype=losses.dtype)
    group_loss = onehot.T @ losses / jnp.maximum(jnp.sum(onehot, 0), 1.0)
    log_q = log_q + step * jax.lax.stop_gradient(group_loss)
    log_q = jax.lax.stop_gradient(log_q - jax.nn.logsumexp(log_q))
    return log_q, jnp.sum(jnp.exp(log_q) * group_loss)


def group_balanced_indices(groups, steps: int, batch: int, seed: int) -> np.ndarray:
    """``[steps, batch]`` minibatch indices drawn with replacement, group-balanced.

    Example ``i`` is drawn with probability ``1 / (G n_{g_i})`` (``G`` the groups present in
    ``groups``, ``n_g`` their sizes): the ``--reweight_groups`` sampler of the reference GroupDRO
    implementation. Every slot falls in each present group with probability ``1 / G`` and is
    uniform within the group.
    """
    g = np.asarray(groups)
    present, inverse, counts = np.unique(g, return_inverse=True, return_counts=True)
    p = 1.0 / (len(present) * counts[inverse])
    rng = np.random.default_rng(seed)
    return rng.choice(g.shape[0], size=(steps, batch), replace=True, p=p / p.sum())


def randomise_backgrounds(
    images: jax.Array, objects: jax.Array, replacement: jax.Array, swap: jax.Array
) -> jax.Array:
    """``images`` whose background pixels (outside ``objects``) are those of ``replacement`` where
    ``swap`` (``[B]`` bool) is set; object pixels and unswapped images are kept exactly."""
    return jnp.where(swap[:, None, None, None] & ~objects[..., None], replacement, images)


def _loss(params, graphdef, dro, x, y, groups, context, w, log_q):
    net = nnx.merge(graphdef, params)
    a = net.features(x)
    if dro:  # GroupDRO: the group-weighted cross-entropy alone (train_model refuses penalties)
        ce = optax.softmax_cross_entropy_with_integer_labels(net.classify(a), y)
        return group_dro_update(log_q, ce, groups, w[3])[::-1]
    base = cr_ce_loss(net.classify, a, y, context, config=CRCE(beta=w[0]))
    grad_pen = cr_ce_loss(
        net.classify, a, y, context, config=CRCE(beta=1.0, attribution="gradcam")
    ).penalty
    est_pen = cr_ce_loss(net.classify, a, y, config=CRCE(beta=1.0, context="estimated")).penalty
    return base.loss + w[1] * grad_pen + w[2] * est_pen, log_q


@functools.partial(jax.jit, static_argnums=(0, 1, 2, 3), donate_argnums=(4, 5, 6))
def _step(
    graphdef, grid, lr, dro, params, opt_state, log_q, finite, data: Labelled, idx, w, swap, bank
):
    optimizer = optax.adam(lr)
    objects = data.objects[idx]
    images = randomise_backgrounds(data.images[idx], objects, bank[swap[1]], swap[0])
    ctx = 1.0 - cell_fractions(objects, grid)
    (loss, new_log_q), grads = jax.value_and_grad(_loss, has_aux=True)(
        params, graphdef, dro, images, data.labels[idx], data.groups[idx], ctx, w, log_q
    )
    updates, new_opt_state = optimizer.update(grads, opt_state, params)
    new_params = optax.apply_updates(params, updates)
    finite = finite & jnp.isfinite(loss) & all_finite(grads) & all_finite(updates)
    params, opt_state, log_q = keep_where(
        finite, (new_params, new_opt_state, new_log_q), (params, opt_state, log_q)
    )
    return params, opt_state, log_q, finite, loss


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
    group_dro: float | None = None,
    randomise: float = 0.0,
    backgrounds: jax.Array | None = None,
    balanced: bool = False,
) -> Trained:
    """Adam on ``CE + sum_i weights_i * penalty_i`` over minibatches drawn with ``seed``.

    Args:
      group_dro: GroupDRO's step size ``eta``: the cross-entropy term becomes
        ``sum_g q_g l_g`` over the groups of ``data.groups`` (``None``: the mean cross-entropy).
      randomise: probability that an image's background is replaced by a random entry of
        ``backgrounds`` (drawn per image and step with ``seed``; 0: never).
      backgrounds: ``[M, H, W, C]`` object-free backgrounds (required when ``randomise > 0``).
      balanced: draw group-balanced minibatches over ``data.groups``
        (:func:`group_balanced_indices`) instead of uniform ones.

    A step whose loss, gradient or update is not finite leaves the parameters, the optimiser
    state and the group weights unchanged and marks the run (the freeze of
    :func:`jaxpapers.core.fit.fit`).
    """
    if not 0.0 <= randomise <= 1.0:
        raise ValueError(f"randomise={randomise!r}; expected a probability")
    if randomise > 0 and backgrounds is None:
        raise ValueError("randomise > 0 needs backgrounds")
    if group_dro is not None and not group_dro >= 0:
        raise ValueError(f"group_dro={group_dro!r}; expected a step size >= 0")
    if group_dro is not None and any(weights):
        raise ValueError("GroupDRO trains the group-weighted cross-entropy alone; got penalties")
    if backgrounds is None:
        backgrounds = data.images  # never read: no swap below
    if backgrounds.shape[1:] != data.images.shape[1:]:
        raise ValueError(
            f"backgrounds has shape {backgrounds.shape}; expected [M, {data.images.shape[1:]}]"
        )
    opt_state = optax.adam(lr).init(params)
    if balanced:
        idx = group_balanced_indices(data.groups, steps, batch, seed)
    else:
        idx = np.random.default_rng(seed).integers(0, data.labels.shape[0], (steps, batch))
    aug = np.random.default_rng([seed, 1])
    swap = aug.random((steps, batch)) < randomise
    partner = aug.integers(0, backgrounds.shape[0], (steps, batch))
    w = tuple(jnp.asarray(x, jnp.float32) for x in (*weights, group_dro or 0.0))
    groups = 2 * nnx.merge(graphdef, params).head.kernel.shape[1]  # class x background bit
    log_q = jnp.full((groups,), -np.log(groups), jnp.float32)
    finite, losses = jnp.array(True), []
    params = jax.tree.map(jnp.copy, params)
    for i in range(steps):
        params, opt_state, log_q, finite, loss = _step(
            graphdef,
            grid,
            lr,
            group_dro is not None,
            params,
            opt_state,
            log_q,
            finite,
            data,
            jnp.asarray(idx[i]),
            w,
            (jnp.asarray(swap[i]), jnp.asarray(partner[i])),
            backgrounds,
        )
        losses.append(loss)
    return Trained(
        params,
        opt_state,
        np.asarray(jax.device_get(losses)),
        bool(finite),
        np.exp(np.asarray(log_q)),
    )


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
    "METHODS",
    "Method",
    "Options",
    "Penalties",
    "Trained",
    "group_accuracies",
    "group_balanced_indices",
    "group_dro_update",
    "init_model",
    "options",
    "predict",
    "randomise_backgrounds",
    "train_model",
]
