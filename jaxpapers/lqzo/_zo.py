"""Two-point zeroth-order estimators as optax gradient transformations: MeZO, QZO-style, LQZO.

Given ``value_fn(params) -> loss`` and a direction ``Z`` regenerated from the step's seeds,

.. math:: \\hat g = \\operatorname{clip}_C\\Big(\\frac{L(\\theta + \\epsilon Z)
   - L(\\theta - \\epsilon Z)}{2 \\epsilon}\\Big), \\qquad \\nabla \\approx \\hat g \\, Z .

* MeZO (Malladi et al. 2023): ``Z ~ N(0, I)`` over all full-precision weights, no clipping.
* QZO-style (Shang et al. 2025): same, over the quantization scales only, with the projected
  gradient ``g`` clipped to ``[-C, C]`` (directional-derivative clipping).
* LQZO: over the scales, ``Z = U V^T / sqrt(r)`` in each leaf's near-square view (isotropy), ``U``
  redrawn every step and ``V`` every ``nu`` steps, entries binary-aggregated Gaussian; same
  clipping.

:func:`zo_gradient` is an ``optax.GradientTransformationExtraArgs``: its ``update`` ignores the
incoming updates and needs ``value_fn=`` (passed through ``optax.chain``), so learning-rate
schedules, weight decay or momentum chain after it::

    config = make_config(rank=4, noise="bag", isotropic=True)
    opt = optax.chain(zo_gradient(config=config, key=key),
                      optax.add_decayed_weights(1e-4), optax.sgd(schedule))
    updates, state = opt.update(None, state, params, value_fn=lambda p: loss(p, batch))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxpapers_kernels.counter_hash import counter_hash

from jaxpapers.core.checks import check_int, check_key
from jaxpapers.lqzo._perturbation import (
    ZOConfig,
    check_rank,
    check_seeds,
    direction_tree,
    leaf_seeds,
    leaf_spec,
    make_config,
    perturbation_leaf,
    shared_directions,
)
from jaxpapers.lqzo._perturbed_scales import PerturbedScales

PyTree = Any
ValueFn = Callable[[PyTree], jax.Array]


class ZOEstimate(NamedTuple):
    """One two-point estimate.

    Attributes:
      projected_grad: ``[]`` clipped directional derivative ``g``.
      raw_projected_grad: ``[]`` before clipping.
      loss: ``[]`` mean of the two perturbed losses.
      seeds: ``[2]`` uint32 step seeds from which ``Z`` is regenerated.
      direction: per-leaf :class:`LowRankDirection` (the implicit ``U V^T``), or ``None``
        for a dense estimator (its ``z`` is regenerated from ``seeds``, never kept).
    """

    projected_grad: jax.Array
    raw_projected_grad: jax.Array
    loss: jax.Array
    seeds: jax.Array
    direction: PyTree | None


class ZOState(NamedTuple):
    """State of :func:`zo_gradient`: step counter, key, and the last estimate's scalars."""

    count: jax.Array
    key: jax.Array
    projected_grad: jax.Array
    loss: jax.Array


def step_seeds(key: jax.Array, count: jax.Array, nu: int) -> jax.Array:
    """``[2]`` uint32 seeds of step ``count``: ``U`` fresh each step, ``V`` each ``nu`` steps."""
    check_key("key", key)
    check_int("nu", nu, minimum=1)
    base = jax.random.bits(key, (2,), jnp.uint32)
    count = jnp.asarray(count, jnp.uint32)
    return jnp.stack([counter_hash(base[0], count), counter_hash(base[1], count // jnp.uint32(nu))])


def zo_estimate(
    value_fn: ValueFn,
    params: PyTree,
    seeds: jax.Array,
    *,
    config: ZOConfig,
    directions: PyTree | None = None,
) -> ZOEstimate:
    """Two-point estimate along the direction of ``seeds`` (see module docstring).

    Args:
      value_fn: ``value_fn(params) -> []`` loss.
      params: the perturbed parameters (scales for QZO/LQZO).
      seeds: ``[2]`` uint32 step seeds (:func:`zo_gradient` derives them from its key and the
        step count).
      config: :class:`ZOConfig`.
      directions: optional ``Z`` of every leaf for these seeds, already formed
        (:func:`~jaxpapers.lqzo._perturbation.shared_directions`; non-fused configs only);
        by default each pass regenerates it.

    Returns:
      :class:`ZOEstimate`.
    """
    check_seeds(seeds)
    eps = config.eps
    leaves, treedef = jax.tree.flatten(params)

    def shifted(sign):
        step = (sign * eps).astype(jnp.float32)
        if config.fused:
            # Lazy leaves: the quantized layers' kernel regenerates Z from the seeds.
            return treedef.unflatten(
                [
                    PerturbedScales(
                        p, None, leaf_seeds(seeds, i), step, leaf_spec(tuple(p.shape), config)
                    )
                    for i, p in enumerate(leaves)
                ]
            )
        # Tensor by tensor (MeZO's Algorithm 1): z_i is an elementwise function of (seeds, i,
        # position) (counter hash), so XLA fuses it into each consumer, at most one z_i is
        # stored (MiniLM: the embedding table's), and no threefry counter arrays exist.
        zs = None if directions is None else treedef.flatten_up_to(directions)
        return treedef.unflatten(
            [
                p
                + step.astype(p.dtype)
                * (perturbation_leaf(seeds, i, p, config) if zs is None else zs[i])
                for i, p in enumerate(leaves)
            ]
        )

    # Two inlined passes. A scan over the two signs would share one forward's temporaries
    # (MiniLM INT4 body, batch 8 x 32: 13.4 MB vs 17.7 MB of temporaries) but measured 1.7x
    # slower on CPU (LQZO step over inference time 3.05x vs 1.82x).
    lp = value_fn(shifted(jnp.float32(1.0)))
    lm = value_fn(shifted(jnp.float32(-1.0)))
    raw = (lp - lm) / (2 * eps)
    g = jnp.clip(raw, -config.clip, config.clip)
    return ZOEstimate(g, raw, 0.5 * (lp + lm), seeds, direction_tree(params, seeds, config=config))


def estimate_to_gradient(
    estimate: ZOEstimate, params: PyTree, *, config: ZOConfig, directions: PyTree | None = None
) -> PyTree:
    """The pseudo-gradient ``g Z`` (structure of ``params``) of an estimate.

    ``directions``: optional ``Z`` of every leaf already formed (as for :func:`zo_estimate`).
    """
    check_seeds(estimate.seeds)
    leaves, treedef = jax.tree.flatten(params)
    zs = None if directions is None else treedef.flatten_up_to(directions)
    g = estimate.projected_grad
    return treedef.unflatten(
        [
            g.astype(p.dtype)
            * (perturbation_leaf(estimate.seeds, i, p, config) if zs is None else zs[i])
            for i, p in enumerate(leaves)
        ]
    )


def zo_gradient(*, config: ZOConfig, key: jax.Array) -> optax.GradientTransformationExtraArgs:
    """An optax transformation that replaces the updates by the ZO pseudo-gradient ``g Z``.

    Args:
      config: :class:`ZOConfig` (:func:`make_config`).
      key: PRNG key naming the perturbation stream.

    Returns:
      ``GradientTransformationExtraArgs``; ``update(updates, state, params, *, value_fn)``.
      Chain a learning rate after it (``optax.sgd``, schedules, weight decay).
    """
    check_key("key", key)

    def init(params: PyTree) -> ZOState:
        check_rank(params, config)
        zero = jnp.zeros((), jnp.float32)
        return ZOState(jnp.zeros((), jnp.int32), key, zero, zero)

    def update(updates, state: ZOState, params=None, *, value_fn: ValueFn, **extra):
        del updates, extra
        if params is None:
            raise ValueError("params=None; zo_gradient needs the parameters to perturb")
        seeds = step_seeds(state.key, state.count, config.nu)
        # share_direction: Z formed once per leaf for both passes and the update.
        zs = shared_directions(params, seeds, config=config) if config.share_direction else None
        est = zo_estimate(value_fn, params, seeds, config=config, directions=zs)
        grads = estimate_to_gradient(est, params, config=config, directions=zs)
        return grads, ZOState(state.count + 1, state.key, est.projected_grad, est.loss)

    return optax.GradientTransformationExtraArgs(init, update)


def mezo(
    learning_rate: optax.ScalarOrSchedule,
    *,
    key: jax.Array,
    eps: float = 1e-3,
    share_direction: bool = False,
) -> optax.GradientTransformationExtraArgs:
    """MeZO: dense Gaussian SPSA over all parameters, then SGD.

    ``share_direction=True`` forms each leaf's ``z`` once per step for both passes and the update
    (same values, generated once instead of three times; more memory: :class:`ZOConfig`).
    """
    cfg = make_config(eps=eps, share_direction=share_direction)
    return optax.chain(zo_gradient(config=cfg, key=key), optax.sgd(learning_rate))


def qzo(
    learning_rate: optax.ScalarOrSchedule,
    *,
    key: jax.Array,
    eps: float = 1e-3,
    clip: float = 100.0,
    share_direction: bool = False,
) -> optax.GradientTransformationExtraArgs:
    """QZO-style: dense Gaussian SPSA over quantization scales, clipped ``g``, then SGD.

    ``share_direction``: as for :func:`mezo`.
    """
    cfg = make_config(eps=eps, clip=clip, share_direction=share_direction)
    return optax.chain(zo_gradient(config=cfg, key=key), optax.sgd(learning_rate))


def lqzo(
    learning_rate: optax.ScalarOrSchedule,
    *,
    key: jax.Array,
    eps: float = 1e-3,
    clip: float = 100.0,
    rank: int = 4,
    nu: int = 50,
    noise: str = "bag",
    bag_k: int = 4,
    isotropic: bool = True,
    fused: bool = True,
) -> optax.GradientTransformationExtraArgs:
    """LQZO: low-rank BAG perturbations of isotropic views of the scales, clipped ``g``, SGD.

    With ``fused=True`` (default) the value function receives lazy
    :class:`~jaxpapers.lqzo.PerturbedScales` leaves: :class:`~jaxpapers.lqzo.QuantizedLinear`
    layers run both forward passes through the Pallas kernel (``use_kernel``) or its jnp
    reference, and any other use materialises them.
    """
    cfg = make_config(
        eps=eps,
        clip=clip,
        rank=rank,
        nu=nu,
        noise=noise,
        bag_k=bag_k,
        isotropic=isotropic,
        fused=fused and noise != "gaussian",
    )
    return optax.chain(zo_gradient(config=cfg, key=key), optax.sgd(learning_rate))


def zo_state(opt_state: Any) -> ZOState:
    """The :class:`ZOState` inside an optax (chain) state."""
    for s in jax.tree.leaves(opt_state, is_leaf=lambda x: isinstance(x, ZOState)):
        if isinstance(s, ZOState):
            return s
    raise ValueError("opt_state holds no ZOState; was the optimiser built with zo_gradient?")


__all__ = [
    "ZOEstimate",
    "ZOState",
    "estimate_to_gradient",
    "lqzo",
    "mezo",
    "qzo",
    "zo_estimate",
    "zo_gradient",
    "zo_state",
]
