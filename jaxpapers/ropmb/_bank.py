r"""The global prototype memory bank: ``K`` prototypes per class, EMA-updated from CAM seeds.

The bank is an optax-style ``(init, update)`` pair with a NamedTuple state. Each update assigns
every seed pixel of class ``n`` (background included, index 0) to the most similar (cosine) of
that class's ``K`` prototypes, pools the assigned features (masked average pooling) into
``p_new`` and moves the prototypes that received pixels by an exponential moving average

.. math::  p \leftarrow m\, p + (1 - m)\, p_{\mathrm{new}}

(:func:`jaxpapers.core.pytrees.ema_update`).

On a stationary input (the same batch every step) ``p_new`` is fixed and
:math:`p_t - p_\star = m^t (p_0 - p_\star)`: the error decays as :math:`m^t`. With ``K > 1`` the
assignment step is one Lloyd (k-means) step per update, so the ``K`` prototypes of a class cover
its modes (e.g. objects of different colours) rather than their average.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from jaxpapers.core.checks import check_shape
from jaxpapers.core.pytrees import ema_update
from jaxpapers.ropmb._seeds import normalise

_EPS = 1e-6


class BankState(NamedTuple):
    """Memory bank state.

    Attributes:
      prototypes: ``[C + 1, K, D]`` (index 0 background).
      filled: ``[C + 1, K]`` whether a slot holds a prototype (has seen seed pixels).
      steps: number of updates so far.
    """

    prototypes: Float[Array, "n k d"]
    filled: Bool[Array, "n k"]
    steps: Int[Array, ""]


def _flatten(features: jax.Array, seeds: jax.Array) -> tuple[jax.Array, jax.Array]:
    if features.ndim != 4 or seeds.ndim != 4 or seeds.shape[:3] != features.shape[:3]:
        raise ValueError(
            f"features {features.shape} and seeds {seeds.shape}; expected [B, h, w, D] and "
            "[B, h, w, C + 1]"
        )
    return features.reshape(-1, features.shape[-1]), seeds.reshape(-1, seeds.shape[-1])


def cluster_means(
    prototypes: Float[Array, "n k d"],
    filled: Bool[Array, "n k"],
    features: Float[Array, "p d"],
    seeds: Float[Array, "p n"],
) -> tuple[Float[Array, "n k d"], Float[Array, "n k"]]:
    """Assign each seed pixel to its class's most similar filled prototype; return the means of
    the assigned features ``[C + 1, K, D]`` and the assigned mass ``[C + 1, K]``."""
    if jnp.ndim(prototypes) != 3:
        raise ValueError(f"prototypes has shape {jnp.shape(prototypes)}; expected [C + 1, K, D]")
    n, k, d = jnp.shape(prototypes)
    check_shape("filled", filled, (n, k))
    check_shape("features", features, (None, d))
    check_shape("seeds", seeds, (jnp.shape(features)[0], n))
    sim = jnp.einsum("pd,nkd->pnk", normalise(features), normalise(prototypes))
    sim = jnp.where(filled[None], sim, -jnp.inf)
    assign = jax.nn.one_hot(jnp.argmax(sim, axis=-1), prototypes.shape[1]) * seeds[..., None]
    mass = jnp.sum(assign, axis=0)
    total = jnp.einsum("pnk,pd->nkd", assign, features)
    return total / jnp.maximum(mass, _EPS)[..., None], mass


class MemoryBank(eqx.Module):
    """Global prototype memory bank (``init`` / ``update``), ``k`` prototypes per class.

    Attributes:
      num_classes: object classes ``C`` (the bank holds ``C + 1`` rows, row 0 the background).
      k: prototypes per class (>= 1).
      momentum: EMA momentum ``m`` in ``[0, 1)``.
      init_iterations: Lloyd steps (without EMA) that ``init`` runs on its batch.
    """

    num_classes: int = eqx.field(static=True)
    k: int = eqx.field(static=True)
    momentum: float = eqx.field(static=True, default=0.9)
    init_iterations: int = eqx.field(static=True, default=3)

    def __check_init__(self) -> None:
        if not (isinstance(self.num_classes, int) and self.num_classes >= 1):
            raise ValueError(f"num_classes={self.num_classes!r}; expected a positive integer")
        if not (isinstance(self.k, int) and self.k >= 1):
            raise ValueError(f"k={self.k!r}; expected K >= 1 prototypes per class")
        if not 0.0 <= self.momentum < 1.0:
            raise ValueError(f"momentum={self.momentum!r}; expected a value in [0, 1)")
        if self.init_iterations < 0:
            raise ValueError(f"init_iterations={self.init_iterations!r}; expected >= 0")

    def _check(self, seeds: jax.Array) -> None:
        if seeds.shape[-1] != self.num_classes + 1:
            raise ValueError(
                f"seeds has {seeds.shape[-1]} channels; expected num_classes + 1 = "
                f"{self.num_classes + 1} (background first)"
            )

    def init(
        self,
        features: Float[Array, "b h w d"],
        seeds: Float[Array, "b h w n"],
        *,
        key: jax.Array,
    ) -> BankState:
        """Start from ``k`` seed pixels per class drawn without replacement (prob. ∝ seed
        weight), then ``init_iterations`` Lloyd steps. A class with fewer than ``k`` seed
        pixels leaves the rest of its slots unfilled."""
        self._check(seeds)
        f, s = _flatten(features, seeds)
        n = self.num_classes + 1
        gumbel = jax.random.gumbel(key, (n, f.shape[0]))
        score = jnp.where(s.T > 0, jnp.log(jnp.maximum(s.T, _EPS)) + gumbel, -jnp.inf)
        top, idx = jax.lax.top_k(score, self.k)  # [n, k]
        filled = jnp.isfinite(top)
        protos = jnp.where(filled[..., None], f[idx], 0.0)
        for _ in range(self.init_iterations):
            new, mass = cluster_means(protos, filled, f, s)
            protos = jnp.where((mass > 0)[..., None], new, protos)
        return BankState(protos, filled, jnp.zeros((), jnp.int32))

    def update(
        self, state: BankState, features: Float[Array, "b h w d"], seeds: Float[Array, "b h w n"]
    ) -> BankState:
        """One EMA update from a batch; slots that receive no pixel keep their prototype."""
        self._check(seeds)
        f, s = _flatten(features, seeds)
        new, mass = cluster_means(state.prototypes, state.filled, f, s)
        valid = mass > 0
        # An unfilled slot cannot win the assignment unless its whole class is unfilled (then
        # slot 0 takes the class mean as is, without averaging with the empty value).
        blended = jnp.where(
            (valid & state.filled)[..., None],
            ema_update(state.prototypes, new, self.momentum),
            state.prototypes,
        )
        protos = jnp.where((valid & ~state.filled)[..., None], new, blended)
        return BankState(protos, state.filled | valid, state.steps + 1)


__all__ = ["BankState", "MemoryBank", "cluster_means"]
