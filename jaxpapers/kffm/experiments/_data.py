"""P06 data: the configuration and family records, the pairings, the data sets and the GP
prior."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxpapers.core.experiment import Context
from jaxpapers.kffm import (
    EuclideanOTPairing,
    IndependentPairing,
    KernelOTPairing,
    RBFKernel,
    SignatureKernel,
    SobolevKernel,
    burgers_solutions,
    gaussian_process_prior,
    gp_mixture_paths,
    heat2d_solutions,
    navier_stokes2d_solutions,
    oscillator_paths,
    periodic_grid,
    reaction_diffusion_solutions,
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
    """Sizes of one family at one run size.

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


@dataclasses.dataclass(frozen=True, kw_only=True)
class Config:
    """Every size-dependent setting of P06 (one per run size, ``SIZES`` of the experiments).

    Attributes:
      sizes_1d, sizes_2d: the 1-D and 2-D families' sizes.
      sizes_1d_long, sizes_2d_long: the ``long_*`` study's families (the quick sizes trained
        longer at ``--full``; at the other sizes, that size's own sizes).
      solver, solver_steps: how samples are integrated (``"euler"`` with ``solver_steps`` steps,
        or adaptive ``"tsit5"``, ``solver_steps`` ignored).
      euler_steps: the Euler step counts of the evaluation experiment's curves.
      checkpoint_every: training steps between orbax checkpoints.
    """

    sizes_1d: Sizes
    sizes_2d: Sizes
    sizes_1d_long: Sizes
    sizes_2d_long: Sizes
    solver: str
    solver_steps: int
    euler_steps: tuple[int, ...]
    checkpoint_every: int

    def sizes(self, fam: Family) -> Sizes:
        """The sizes of family ``fam`` (its :attr:`Family.sizes` names the field)."""
        return getattr(self, f"sizes_{fam.sizes}")


@dataclasses.dataclass(frozen=True)
class Family:
    """Data sets whose models train together: one grid dimension, FNO and prior.

    Attributes:
      name: names the family's cached scores and its checkpoints (``"1d"``, ``"2d_long"``, ...).
      ndim: grid dimension (1: FNO1d on ``[0, 1]``; 2: FNO2d on the periodic unit square).
      datasets: data set names (see :func:`generate_dataset`).
      methods: pairings (keys of :data:`METHODS`).
      sizes: which sizes of the :class:`Config` it trains at (``"1d"`` reads ``sizes_1d``).
      curves: data sets whose models are also integrated with every Euler step count of
        ``Config.euler_steps`` (the evaluation experiment).
    """

    name: str
    ndim: int
    datasets: tuple[str, ...]
    methods: tuple[str, ...]
    sizes: str
    curves: tuple[str, ...]


def make_pairing(name: str, fam: Family):
    """The pairing ``name`` for ``fam``: the 2-D fields live on the torus, so there the Sobolev
    kernel differentiates with wrap-around differences."""
    if name == "kffm_sobolev" and fam.ndim == 2:
        return KernelOTPairing(SobolevKernel(derivative_weight=0.01, periodic=True))
    return METHODS[name]()


@functools.partial(jax.jit, static_argnames=("name", "n", "grid"))
def generate_dataset(name: str, key: jax.Array, n: int, grid: int) -> jax.Array:
    if name == "gp_mixture":
        return gp_mixture_paths(n, jnp.linspace(0.0, 1.0, grid), key=key)
    if name == "oscillator":
        return oscillator_paths(n, jnp.linspace(0.0, 1.0, grid), key=key)
    if name == "burgers":
        return burgers_solutions(n, grid, key=key)
    if name == "reaction_diffusion":
        # Allen-Cahn at t = 0.5 (library defaults): +-1 plateaus joined by resolved fronts.
        return reaction_diffusion_solutions(n, grid, key=key)
    if name == "heat2d":
        return heat2d_solutions(n, grid, key=key)
    if name == "ns2d":
        # Vorticity at T = 5 (library defaults: nu = 1e-3, Li et al.'s forcing, 2x solver grid).
        return navier_stokes2d_solutions(n, grid, key=key)
    raise ValueError(f"unknown data set {name!r}")


def dataset(ctx: Context, name: str, n: int, grid: int) -> np.ndarray:
    """``n`` functions of data set ``name`` on ``grid`` points per axis, scaled to unit variance,
    generated from ``jax.random.key(DATA_SEEDS[name])``.

    Kept by ``ctx.cached``: training and the pair-draw experiment use the same data (the PDE
    solves are the costly part of generating them).
    """

    def generate() -> np.ndarray:
        key = jax.random.key(DATA_SEEDS[name])
        x = np.asarray(generate_dataset(name, key, n, grid), dtype=np.float64)
        # One scalar scale per data set: the GP prior has unit variance, the data then too.
        return (x / x.std()).astype(np.float32)

    return ctx.cached(f"data_{name}_{n}_{grid}", generate)


def prior(fam: Family, grid: int):
    """Matern-5/2 GP prior (length scale 0.1) on the family's grid."""
    if fam.ndim == 1:
        return gaussian_process_prior(jnp.linspace(0.0, 1.0, grid), lengthscale=0.1)
    axis = periodic_grid(grid)  # the 2-D data live on the periodic unit square
    return gaussian_process_prior((axis, axis), lengthscale=0.1)
