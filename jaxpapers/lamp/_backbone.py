r"""The posterior-sampler interface shared by DPS, DiffPIR, DDRM and LAMP, and the sampling loop.

Every sampler is a custom ``diffrax.AbstractSolver`` (a
:class:`~jaxpapers.core.diffusion.AbstractDiffusionSolver`) that evaluates the denoiser through
the :class:`~jaxpapers.core.diffusion.DenoiserTerm` given to ``diffrax.diffeqsolve``; the
measurement travels in diffrax's ``args``. A backbone step splits into two parts:

* ``estimate(term, x_t, t, t', y, nfe) -> (x0_tilde, x0_hat, nfe)``: the *data-consistent
  estimate* of the clean sample and the denoised prediction it starts from (one evaluation of the
  term, then the backbone's data step);
* ``renoise_step(schedule, x_t, x0_tilde, t, t', y, key) -> x_{t'}``: re-noising, **affine in
  x0_tilde**.

The plain backbone step is ``renoise_step(x_t, estimate(x_t))``. LAMP (``_lamp.py``) changes
only the argument passed to ``renoise_step``, which is what makes it a plug-in. The PRNG key of
the stochastic re-noising is the solver's ``key`` field, carried (split once a step) in the solver
state.
"""

from __future__ import annotations

import abc
from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray

from jaxpapers.core.checks import check_finite, check_key
from jaxpapers.core.diffusion import (
    AbstractDiffusionSolver,
    DenoiserTerm,
    VPSchedule,
    solve_diffusion,
    time_grid,
)
from jaxpapers.lamp._operators import LinearOperator, check_sigma_y


class PosteriorSample(NamedTuple):
    """Output of :func:`sample_posterior`.

    Attributes:
      x: the reconstruction, shape ``operator.in_shape``.
      nfe: exact number of denoiser evaluations (``int32``).
      ys: the trajectory at ``save_ts`` (``[len(save_ts), *in_shape]``) or ``None``.
      result: diffrax's ``RESULTS`` of the solve: ``successful``, or why it stopped (a
        non-finite state, e.g. a diverging denoiser); with ``throw=False`` the solve does not
        raise at run time (no host callbacks in the program): check it.
    """

    x: Float[Array, ...]
    nfe: Int[Array, ""]
    ys: Float[Array, "s ..."] | None = None
    result: diffrax.RESULTS | None = None


class PosteriorBackbone(AbstractDiffusionSolver):
    """Base class of posterior-sampling solvers with a data-consistent estimate.

    Attributes:
      operator: the measurement operator.
      sigma_y: measurement noise standard deviation (``>= 0``).
    """

    operator: eqx.AbstractVar[LinearOperator]
    sigma_y: eqx.AbstractVar[Float[Array, ""]]

    def __check_init__(self) -> None:
        if not isinstance(self.operator, LinearOperator):
            raise TypeError(
                f"operator is a {type(self.operator).__name__}; expected a LinearOperator"
            )
        check_sigma_y(self.sigma_y)

    @abc.abstractmethod
    def estimate(
        self,
        term: DenoiserTerm,
        x: Float[Array, ...],
        t: Float[Array, ""],
        t_next: Float[Array, ""],
        y: Float[Array, ...],
        nfe: Int[Array, ""],
    ) -> tuple[Float[Array, ...], Float[Array, ...], Int[Array, ""]]:
        """``(x0_tilde, x0_hat, nfe)``: the data-consistent estimate of :math:`x_0` from
        :math:`x_t` and the denoised prediction it starts from (one evaluation of ``term``)."""

    @abc.abstractmethod
    def renoise_step(
        self,
        schedule: VPSchedule,
        x: Float[Array, ...],
        x0: Float[Array, ...],
        t: Float[Array, ""],
        t_next: Float[Array, ""],
        y: Float[Array, ...],
        key: PRNGKeyArray,
    ) -> Float[Array, ...]:
        """Re-noise to ``t_next``; affine in ``x0``."""

    def transition(self, terms, x, t, t_next, args, memory, key, nfe):
        x0, _, nfe = self.estimate(terms, x, t, t_next, args, nfe)
        return self.renoise_step(terms.schedule, x, x0, t, t_next, args, key), memory, nfe

    def with_key(self, key: PRNGKeyArray | None) -> PosteriorBackbone:
        """A copy whose re-noising draws from ``key``."""
        return eqx.tree_at(lambda s: s.key, self, key, is_leaf=lambda v: v is None)


def _as_scalar(value: ArrayLike) -> Array:
    return jnp.asarray(value)


def scalar_field(**kwargs: Any) -> Any:
    """An array-valued dataclass field converted to a JAX scalar (vmap-able hyperparameter)."""
    return eqx.field(converter=_as_scalar, **kwargs)


def check_sampler(sampler: Any) -> None:
    """Raise ``TypeError`` unless ``sampler`` is a posterior sampler (backbone or LAMP)."""
    if not isinstance(sampler, AbstractDiffusionSolver) or not hasattr(sampler, "operator"):
        raise TypeError(
            f"sampler is a {type(sampler).__name__}; expected a posterior sampler (DPS, DiffPIR, "
            "DDRM or Lamp)"
        )


def sample_posterior(
    term: DenoiserTerm,
    sampler: AbstractDiffusionSolver,
    y: Float[Array, ...],
    *,
    key: PRNGKeyArray,
    num_steps: int,
    t_max: float = 1.0,
    save_ts: Float[Array, " s"] | None = None,
    throw: bool = True,
) -> PosteriorSample:
    """Draw one posterior sample with ``sampler`` from measurement ``y``.

    Starts from :math:`x_{t_{\\max}} \\sim \\mathcal N(0, I)` and runs ``num_steps`` reverse
    steps on a uniform grid down to ``t = 0`` with one ``diffrax.diffeqsolve`` (compiled once per
    sampler structure and ``num_steps``, so eager callers do not recompile).

    Args:
      term: the denoiser as a :class:`~jaxpapers.core.diffusion.DenoiserTerm`.
      sampler: a :class:`PosteriorBackbone` or :class:`~jaxpapers.lamp.Lamp`.
      y: measurement of shape ``sampler.operator.out_shape`` (finite).
      key: PRNG key.
      num_steps: number of steps (each one denoiser evaluation), ``>= 1``.
      t_max: start time.
      save_ts: optional diffusion times at which to save the trajectory.
      throw: ``True`` (default): a failed solve raises, also inside ``jit`` where a non-finite
        measurement cannot be seen while tracing (diffrax's checked path: the program holds host
        callbacks and runs synchronously); ``False``: no host callbacks (asynchronous dispatch),
        a failed solve is reported in ``result``.

    Returns:
      :class:`PosteriorSample`.

    Raises:
      TypeError: ``term`` or ``sampler`` of the wrong type.
      ValueError: wrong measurement shape, a non-finite measurement or ``num_steps < 1``.
      equinox.EquinoxRuntimeError: with ``throw=True``, a solve that failed at run time (a
        non-finite state, e.g. from a non-finite measurement inside ``jit``).

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> from jaxpapers.core.diffusion import DenoiserTerm, VPSchedule, grid_mixture
      >>> from jaxpapers.lamp import DDRM, MatrixOperator, lamp, sample_posterior
      >>> prior = grid_mixture(4)
      >>> term = DenoiserTerm(lambda x, t: prior.eps(x, t, VPSchedule()), VPSchedule())
      >>> op = MatrixOperator(jnp.eye(2, 4))
      >>> out = sample_posterior(term, lamp(DDRM(op, 0.05)), jnp.ones(2), key=jax.random.key(0),
      ...                        num_steps=10)
      >>> out.x.shape, int(out.nfe)
      ((4,), 10)
    """
    if not isinstance(term, DenoiserTerm):
        raise TypeError(f"term is a {type(term).__name__}; expected a DenoiserTerm")
    check_sampler(sampler)
    if not isinstance(num_steps, int | np.integer) or num_steps < 1:
        raise ValueError(f"num_steps={num_steps!r}; expected an integer >= 1")
    op: LinearOperator = sampler.operator
    op.check_measurement(y)
    check_finite("y", y)
    check_key("key", key)
    time_grid(num_steps, t_max=t_max)
    return _sample(term, sampler, jnp.asarray(y), key, int(num_steps), t_max, save_ts, bool(throw))


@eqx.filter_jit
def _sample(term, sampler, y, key, num_steps, t_max, save_ts, throw):
    k0, k1 = jax.random.split(key)
    x_init = jax.random.normal(k0, sampler.operator.in_shape, y.dtype)
    sol = solve_diffusion(
        term,
        sampler.with_key(k1),
        x_init,
        time_grid(num_steps, t_max=t_max),
        args=y,
        save_ts=save_ts,
        throw=throw,
    )
    return PosteriorSample(sol.x, sol.nfe, sol.ys, sol.result)
