r"""Samplers on an epsilon network: DDIM/DDPM (:func:`sample_ddim`, one diffrax solve of
:class:`~jaxpapers.core.diffusion.DDIM`) and the probability-flow ODE through a standard diffrax
solver (:func:`probability_flow_ode`). Both take a counted denoiser and return
``SampleOutput(x, nfe)`` with the exact number of evaluations.

Probability-flow ODE (Song et al. 2021) of the VP SDE:
:math:`\dot x = -\tfrac12\beta(t)\,(x + \nabla\log p_t(x)) = -\tfrac12\beta(t)(x -
\hat\epsilon/\sigma_t)`, integrated from ``t_max`` down to ``t_min`` by a standard diffrax solver.

NaN contract (see :mod:`jaxpapers.core.checks`): the samplers check their arguments (steps, key,
grid, a finite ``x_init``) eagerly and never raise at run time. Both are free of host callbacks
(see :mod:`jaxpapers.core.diffusion._solver`): they step with
:class:`~jaxpapers.core.diffusion.UncheckedStepTo` on a grid valid by construction, so a jitted
program that holds them dispatches asynchronously. They return only ``SampleOutput(x, nfe)``, so a
failed solve shows in ``x``: ``sample_ddim`` returns an all-NaN sample where a non-finite state
stopped the solve (check ``jnp.isfinite(out.x).all()``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_finite, check_key
from jaxpapers.core.diffusion._exponential import DDIM
from jaxpapers.core.diffusion._nfe import CountingDenoiser
from jaxpapers.core.diffusion._schedule import VPSchedule, time_grid
from jaxpapers.core.diffusion._solver import (
    UncheckedStepTo,
    _check_decreasing,
    solve_diffusion,
)
from jaxpapers.core.diffusion._term import DenoiserTerm


class SampleOutput(NamedTuple):
    """A sampler's output.

    Attributes:
      x: the sample, shape ``shape``.
      nfe: exact number of denoiser evaluations (``int32``).
    """

    x: Float[Array, ...]
    nfe: Int[Array, ""]


def _check_steps(num_steps: int) -> None:
    if not isinstance(num_steps, int | jnp.integer) or num_steps < 1:
        raise ValueError(f"num_steps={num_steps!r}; expected an integer >= 1")


def _check_grid(num_steps: int, dtype: Any, *, t_max: float = 1.0, t_min: float = 0.0) -> None:
    """Check in Python, also under an outer ``jit``, the ``time_grid`` a sampler builds in its
    program (there it is traced, and stepped without run-time checks): it must be strictly
    decreasing in the sampler's ``dtype`` (a fine grid collapses in ``bfloat16``). Raises
    ``time_grid``'s ``ValueError`` on bad ``t_max``/``t_min``.

    The grid is rebuilt on the host in NumPy (float64, then cast to ``dtype``), not with
    ``jax.ensure_compile_time_eval``: an eager JAX computation made while a caller is being traced
    waits for every program dispatched before it, so the caller's compile could not overlap the
    previous program's run."""
    if not 0.0 <= t_min < t_max <= 1.0:
        raise ValueError(f"t_min={t_min}, t_max={t_max}; expected 0 <= t_min < t_max <= 1")
    _check_decreasing(np.linspace(t_max, t_min, int(num_steps) + 1), dtype)


def sample_ddim(
    denoiser: CountingDenoiser,
    schedule: VPSchedule,
    shape: tuple[int, ...],
    *,
    key: Array,
    num_steps: int,
    eta: float = 0.0,
    t_max: float = 1.0,
    dtype: Any = jnp.float32,
) -> SampleOutput:
    """Draw one unconditional sample with DDIM(eta) on a uniform grid from ``t_max`` to 0.

    Args:
      denoiser: counted epsilon network on one sample of shape ``shape``.
      schedule: VP schedule.
      shape: sample shape.
      key: PRNG key.
      num_steps: number of steps (= evaluations), ``>= 1``.
      eta: 0 for DDIM, 1 for DDPM ancestral sampling.
      t_max: start time.
      dtype: floating dtype of the sample.

    Returns:
      :class:`SampleOutput`. Never raises at run time (no host callbacks in the program): where a
      non-finite state stops the solve (a diverging denoiser), ``x`` is all NaN and ``nfe``
      counts the evaluations made; for the solve's ``result`` use :func:`solve_diffusion`.
    """
    _check_steps(num_steps)
    check_key("key", key)
    _check_grid(num_steps, dtype, t_max=t_max)
    return _sample_ddim(denoiser, schedule, tuple(shape), key, int(num_steps), eta, t_max, dtype)


@eqx.filter_jit
def _sample_ddim(denoiser, schedule, shape, key, num_steps, eta, t_max, dtype):
    k0, k1 = jax.random.split(key)
    x_init = jax.random.normal(k0, shape, dtype)
    ts = time_grid(num_steps, t_max=t_max)
    sol = solve_diffusion(DenoiserTerm(denoiser, schedule), DDIM(eta, key=k1), x_init, ts)
    ok = sol.result == diffrax.RESULTS.successful
    return SampleOutput(jnp.where(ok, sol.x, jnp.nan), sol.nfe)


def _evals_per_step(solver: diffrax.AbstractSolver) -> tuple[int, int]:
    """(evaluations per step, extra evaluations at the start) of an explicit Runge-Kutta solver."""
    if isinstance(solver, diffrax.Euler):
        return 1, 0
    if isinstance(solver, diffrax.AbstractERK):
        tab = solver.tableau
        stages = tab.num_stages
        return (stages - 1, 1) if tab.fsal else (stages, 0)
    raise ValueError(
        f"solver={type(solver).__name__}; expected diffrax.Euler or an explicit Runge-Kutta "
        "solver (Heun, Midpoint, Ralston, Bosh3, Tsit5, Dopri5)"
    )


def probability_flow_ode(
    denoiser: CountingDenoiser,
    schedule: VPSchedule,
    x_init: Float[Array, ...],
    *,
    num_steps: int,
    solver: diffrax.AbstractSolver | None = None,
    t_max: float = 1.0,
    t_min: float = 1e-3,
) -> SampleOutput:
    r"""Integrate the probability-flow ODE from ``t_max`` to ``t_min`` with a diffrax solver.

    Uses ``num_steps`` equal steps and returns Tweedie's estimate :math:`\hat x_0(x_{t_{\min}})`
    (one more evaluation), which removes the residual noise at ``t_min``.

    Args:
      denoiser: counted epsilon network.
      schedule: VP schedule.
      x_init: state at ``t_max`` (typically standard normal).
      num_steps: number of solver steps, ``>= 1``.
      solver: an explicit diffrax solver (default ``diffrax.Heun()``).
      t_max, t_min: integration interval, ``0 < t_min < t_max <= 1``.

    Returns:
      :class:`SampleOutput`; ``nfe = num_steps * stages (+1 for FSAL) + 1``. Never raises at
      run time (no host callbacks; an explicit solver on a fixed grid cannot fail: a non-finite
      drift propagates into ``x``).
    """
    _check_steps(num_steps)
    check_finite("x_init", x_init)
    solver = diffrax.Heun() if solver is None else solver
    per_step, extra = _evals_per_step(solver)
    if not 0.0 < t_min < t_max <= 1.0:
        raise ValueError(f"t_min={t_min}, t_max={t_max}; expected 0 < t_min < t_max <= 1")
    _check_grid(num_steps, x_init.dtype, t_max=t_max, t_min=t_min)

    def drift(t, x, args):
        eps = denoiser.eps_fn(x, jnp.asarray(t, x.dtype))
        return -0.5 * schedule.beta(t) * (x - eps / schedule.sigma(t))

    ts = time_grid(num_steps, t_max=t_max, t_min=t_min).astype(x_init.dtype)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(drift),
        solver,
        t0=ts[0],
        t1=ts[-1],
        dt0=None,
        y0=x_init,
        stepsize_controller=UncheckedStepTo(ts=ts),  # valid by construction
        saveat=diffrax.SaveAt(t1=True),
        max_steps=num_steps,
        throw=False,  # nothing to check: see Returns
    )
    nfe = sol.stats["num_steps"] * per_step + extra
    x0, _, nfe = denoiser.denoise(sol.ys[0], ts[-1], schedule, nfe.astype(jnp.int32))
    return SampleOutput(x0, nfe)
