"""The posterior-sampler interface shared by DPS, DiffPIR, DDRM and LAMP, and the sampling loop.

A backbone step splits into two parts:

* ``estimate(x_t, t, t', y, nfe) -> (x0_tilde, x0_hat, nfe)``: the *data-consistent estimate*
  of the clean sample and the denoised prediction it starts from (one denoiser evaluation, then
  the backbone's data step);
* ``transition(x_t, x0_tilde, t, t', y, key) -> x_{t'}``: re-noising, **affine in x0_tilde**.

The plain backbone step is ``transition(x_t, estimate(x_t))``. LAMP (``_lamp.py``) changes only
the argument passed to ``transition``, which is what makes it a plug-in.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

from jaxpapers.core.diffusion import (
    AbstractReverseStep,
    CountingDenoiser,
    VPSchedule,
    solve_reverse,
    time_grid,
)
from jaxpapers.lamp._operators import LinearOperator, check_sigma_y


class PosteriorSample(NamedTuple):
    """Output of :func:`sample_posterior`.

    Attributes:
      x: the reconstruction, shape ``operator.in_shape``.
      nfe: exact number of denoiser evaluations (``int32``).
    """

    x: Float[Array, ...]
    nfe: Int[Array, ""]


class PosteriorBackbone(AbstractReverseStep):
    """Base class of posterior-sampling steps with a data-consistent estimate.

    Attributes:
      denoiser: counted epsilon network on one sample of shape ``operator.in_shape``.
      schedule: VP schedule.
      operator: the measurement operator.
      sigma_y: measurement noise standard deviation (``>= 0``).
    """

    denoiser: CountingDenoiser
    schedule: VPSchedule
    operator: LinearOperator
    sigma_y: Float[Array, ""]

    def __check_init__(self) -> None:
        check_sigma_y(self.sigma_y)

    def init_memory(self, x: Array, args: Any) -> None:
        return None

    @abc.abstractmethod
    def estimate(
        self, x: Array, t: Array, t_next: Array, y: Array, nfe: Int[Array, ""]
    ) -> tuple[Array, Array, Int[Array, ""]]:
        """``(x0_tilde, x0_hat, nfe)``: the data-consistent estimate of :math:`x_0` from
        :math:`x_t` and the denoised prediction it starts from (one evaluation)."""

    @abc.abstractmethod
    def transition(
        self, x: Array, x0: Array, t: Array, t_next: Array, y: Array, key: Array
    ) -> Array:
        """Re-noise to ``t_next``; affine in ``x0``."""

    def __call__(self, x, t, t_next, args, memory, key, nfe):
        x0, _, nfe = self.estimate(x, t, t_next, args, nfe)
        return self.transition(x, x0, t, t_next, args, key), memory, nfe


def _as_scalar(value: ArrayLike) -> Array:
    return jnp.asarray(value)


def scalar_field(**kwargs: Any) -> Any:
    """An array-valued dataclass field converted to a JAX scalar (vmap-able hyperparameter)."""
    return eqx.field(converter=_as_scalar, **kwargs)


def sample_posterior(
    sampler: AbstractReverseStep,
    y: Float[Array, ...],
    *,
    key: Array,
    num_steps: int,
    t_max: float = 1.0,
) -> PosteriorSample:
    """Draw one posterior sample with ``sampler`` from measurement ``y``.

    Starts from :math:`x_{t_{\\max}} \\sim \\mathcal N(0, I)` and runs ``num_steps`` reverse
    steps on a uniform grid down to ``t = 0`` with one ``diffrax.diffeqsolve``.

    Args:
      sampler: a :class:`PosteriorBackbone` or :class:`~jaxpapers.lamp.Lamp`.
      y: measurement of shape ``sampler.operator.out_shape``.
      key: PRNG key.
      num_steps: number of steps (each one denoiser evaluation), ``>= 1``.
      t_max: start time.

    Returns:
      :class:`PosteriorSample`.

    Raises:
      ValueError: wrong measurement shape or ``num_steps < 1``.
    """
    if not isinstance(num_steps, int | np.integer) or num_steps < 1:
        raise ValueError(f"num_steps={num_steps!r}; expected an integer >= 1")
    op: LinearOperator = sampler.operator
    op.check_measurement(y)
    y = jnp.asarray(y)
    k0, k1 = jax.random.split(key)
    x_init = jax.random.normal(k0, op.in_shape, y.dtype)
    sol = solve_reverse(sampler, x_init, time_grid(num_steps, t_max=t_max), key=k1, args=y)
    return PosteriorSample(sol.x, sol.nfe)
