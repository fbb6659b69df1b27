"""P06 data: the size and family records, the pairings, the data sets and the GP prior."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.kffm import (
    EuclideanOTPairing,
    IndependentPairing,
    KernelOTPairing,
    RBFKernel,
    SignatureKernel,
    SobolevKernel,
)

METHODS: dict[str, Callable[[], Any]] = {
    "ffm": IndependentPairing,
    "ot_euclid": EuclideanOTPairing,
    "kffm_rbf": lambda: KernelOTPairing(RBFKernel()),
    "kffm_sobolev": lambda: KernelOTPairing(SobolevKernel(derivative_weight=0.01)),
    "kffm_signature": lambda: KernelOTPairing(SignatureKernel(depth=3)),
    # The same plans drawn without replacement (a permutation that follows the plan; the
    # ``long_draw_*`` study).
    "ot_euclid_perm": lambda: EuclideanOTPairing(replace=False),
    "kffm_sobolev_perm": lambda: KernelOTPairing(
        SobolevKernel(derivative_weight=0.01), replace=False
    ),
}


# PRNG seed of each data set (its training and held-out functions), whichever family trains on it:
# 1234 + its position in the quick families (so the long and draw studies see the same data).
DATA_SEEDS = {
    "gp_mixture": 1234,
    "oscillator": 1235,
    "burgers": 1236,
    "reaction_diffusion": 1237,
    "heat2d": 1234,
    "ns2d": 1235,
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class Sizes:
    """Sizes of one family at one mode.

    Attributes:
      n_train, n_test: training and held-out data functions per data set.
      grid: points per grid axis.
      batch, steps, lr: training batch, Adam steps and peak learning rate (cosine decay).
      width, modes, depth: the FNO.
      n_curve: prior draws integrated at every Euler step count (evaluation experiment).
    """

    n_train: int
    n_test: int
    grid: int
    batch: int
    steps: int
    width: int
    modes: int
    depth: int
    lr: float
    n_curve: int = 128


@dataclasses.dataclass(frozen=True)
class Family:
    """Data sets whose models train together: one grid dimension, FNO and prior.

    Attributes:
      name: ``"1d"`` or ``"2d"`` (names the shared checkpoint and score files).
      ndim: grid dimension (1: FNO1d on ``[0, 1]``; 2: FNO2d on the periodic unit square).
      datasets: data set names (see :func:`generate_dataset`).
      methods: pairings (keys of :data:`METHODS`).
      sizes: smoke / quick / full sizes.
      curves: data sets whose models are also integrated with every Euler step count of
        ``EULER_STEPS`` (the evaluation experiment).
    """

    name: str
    ndim: int
    datasets: tuple[str, ...]
    methods: tuple[str, ...]
    sizes: dict[str, Sizes]
    curves: tuple[str, ...]


def make_pairing(name: str, fam: Family):
    """The pairing ``name`` for ``fam``: the 2-D fields live on the torus, so there the Sobolev
    kernel differentiates with wrap-around differences."""
    if name == "kffm_sobolev" and fam.ndim == 2:
        return KernelOTPairing(SobolevKernel(derivative_weight=0.01, periodic=True))
    return METHODS[name]()


@functools.partial(jax.jit, static_argnames=("name", "n", "grid"))
def generate_dataset(name: str, key: jax.Array, n: int, grid: int) -> jax.Array:
    from jaxpapers.core.data import functional as F

    if name == "gp_mixture":
        return F.gp_mixture_paths(key, n, jnp.linspace(0.0, 1.0, grid))
    if name == "oscillator":
        return F.oscillator_paths(key, n, jnp.linspace(0.0, 1.0, grid))
    if name == "burgers":
        return F.burgers_solutions(key, n, grid)
    if name == "reaction_diffusion":
        # Allen-Cahn at t = 0.5 (library defaults): +-1 plateaus joined by resolved fronts.
        return F.reaction_diffusion_solutions(key, n, grid)
    if name == "heat2d":
        return F.heat2d_solutions(key, n, grid)
    if name == "ns2d":
        # Vorticity at T = 5 (library defaults: nu = 1e-3, Li et al.'s forcing, 2x solver grid).
        return F.navier_stokes2d_solutions(key, n, grid)
    raise ValueError(f"unknown data set {name!r}")


@functools.lru_cache(maxsize=8)
def dataset(name: str, seed: int, n: int, grid: int) -> np.ndarray:
    """``n`` functions of data set ``name`` on ``grid`` points per axis, scaled to unit variance,
    generated from ``jax.random.key(seed)``.

    Cached per process (read-only array): training and the pair-draw experiment use the same
    data, which cost ~10 CPU-s to generate per family (the PDE solves).
    """
    x = np.asarray(generate_dataset(name, jax.random.key(seed), n, grid), dtype=np.float64)
    # One scalar scale per data set: the GP prior has unit variance, the data then too.
    out = (x / x.std()).astype(np.float32)
    out.flags.writeable = False
    return out


def prior(fam: Family, grid: int):
    """Matern-5/2 GP prior (length scale 0.1) on the family's grid."""
    from jaxpapers.core.data.functional import gaussian_process_prior, periodic_grid

    if fam.ndim == 1:
        return gaussian_process_prior(jnp.linspace(0.0, 1.0, grid), lengthscale=0.1)
    axis = periodic_grid(grid)  # the 2-D data live on the periodic unit square
    return gaussian_process_prior((axis, axis), lengthscale=0.1)
