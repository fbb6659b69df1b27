r"""Paper-neutral diffusion core: VP schedules, parametrisations, Tweedie's denoiser, counted
denoisers, the denoiser as a diffrax term, DDIM / DPM-Solver++(2M) as diffrax solvers, the
probability-flow ODE through standard diffrax solvers, and exact Gaussian-mixture priors.

Every sampler returns its exact number of denoiser evaluations (``nfe``).

The term-based API (diffrax carries the dynamics):

* :class:`DenoiserTerm` ``(denoiser, schedule, conditional=False)``: a ``diffrax.AbstractTerm``
  in diffrax time :math:`\tau = -t`. ``term.vf(tau, x, args)`` is the probability-flow drift
  :math:`dx/d\tau = \tfrac12\beta(t)(x - \hat\epsilon/\sigma_t)` (so ``diffrax.Tsit5`` and
  friends integrate it); ``term.denoise(x, t, args, nfe) -> (x0_hat, eps_hat, nfe + 1)`` is one
  counted evaluation in data prediction, used by the exponential-integrator solvers. With
  ``conditional=True`` the network is called ``eps_fn(x, t, args)`` (class labels in ``args``).
* :class:`AbstractDiffusionSolver`: base of custom ``diffrax.AbstractSolver``s whose ``step``
  evaluates the term; subclasses implement ``transition(terms, x, t, t_next, args, memory, key,
  nfe)`` and optionally ``init_memory``; multistep memory, the PRNG key and the count live in
  :class:`DiffusionSolverState`. Provided: :class:`DDIM` ``(eta=0.0, key=None)`` and
  :class:`DPMSolverPP2M` ``(strength=1.0, eta=0.0, key=None)`` (memory :class:`LaggedMemory`;
  :func:`lagged_estimate` / :func:`lagged_coefficient` are the reusable lagged update).
* :func:`solve_diffusion` ``(term, solver, x_init, ts, *, args, save_ts, adjoint,
  progress_meter, throw=False) -> DiffusionSolution(x, nfe, memory, ts, ys, result)``: one
  ``diffrax.diffeqsolve`` over the decreasing diffusion grid ``ts``; ``save_ts`` saves a
  trajectory (``SaveAt(ts=...)``), ``progress_meter=diffrax.TqdmProgressMeter()`` and adjoints
  work as in diffrax; a non-finite state stops the solve (reported in ``result``;
  ``throw=True`` raises). No host callbacks by default: the grid steps with
  :class:`UncheckedStepTo` (diffrax's ``StepTo`` without its ``equinox.error_if`` checks, which
  :func:`check_time_grid` makes in Python where the grid is concrete), so a jitted program holding
  a sampler dispatches asynchronously and makes no device-host round trip (``save_ts`` keeps
  diffrax's own ``SaveAt`` check).

Example (DPM-Solver++(2M) on a toy denoiser, trajectory at three times)::

    term = DenoiserTerm(eps_fn, VPSchedule())
    sol = solve_diffusion(term, DPMSolverPP2M(), x_init, time_grid(20),
                          save_ts=jnp.array([0.9, 0.5, 0.1]))

:class:`NNXEps` is the one adapter where a diffrax term wraps an nnx network: it calls a split
flax.nnx epsilon network (U-Net or MLP) as ``eps_fn(x, t)``, for ``DenoiserTerm(NNXEps(...),
schedule)``. :func:`clip_x0` ``(eps_fn, schedule, bound)`` clips the implied :math:`\hat x_0` to
the data range at every call (static thresholding for images in ``[-1, 1]``).

On a counted denoiser (:class:`CountingDenoiser`), without building a term: :func:`sample_ddim`
(DDIM/DDPM through :class:`DDIM`) and :func:`probability_flow_ode` (a standard diffrax solver on
the probability-flow drift); both return ``SampleOutput(x, nfe)``. The DDIM step algebra
(:func:`renoise`, :func:`ddim_noise_std`, :func:`renoise_x0_coefficient`) is exported for
posterior samplers built on it (``jaxpapers.lamp``).
"""

from jaxpapers.core.diffusion._exponential import (
    DDIM,
    DPMSolverPP2M,
    LaggedMemory,
    ddim_noise_std,
    lagged_coefficient,
    lagged_estimate,
    renoise,
    renoise_x0_coefficient,
)
from jaxpapers.core.diffusion._mixture import GaussianMixture, MixturePosterior, grid_mixture
from jaxpapers.core.diffusion._nfe import CountingDenoiser, zero_count
from jaxpapers.core.diffusion._nnx import NNXEps
from jaxpapers.core.diffusion._parametrisation import (
    clip_x0,
    eps_to_score,
    eps_to_x0,
    score_to_eps,
    tweedie_denoise,
    x0_to_eps,
    x0_to_score,
)
from jaxpapers.core.diffusion._samplers import SampleOutput, probability_flow_ode, sample_ddim
from jaxpapers.core.diffusion._schedule import VPSchedule, time_grid
from jaxpapers.core.diffusion._solver import (
    AbstractDiffusionSolver,
    DiffusionSolution,
    DiffusionSolverState,
    UncheckedStepTo,
    check_time_grid,
    solve_diffusion,
)
from jaxpapers.core.diffusion._term import DenoiserTerm

__all__ = [
    "DDIM",
    "AbstractDiffusionSolver",
    "CountingDenoiser",
    "DPMSolverPP2M",
    "DenoiserTerm",
    "DiffusionSolution",
    "DiffusionSolverState",
    "GaussianMixture",
    "LaggedMemory",
    "MixturePosterior",
    "NNXEps",
    "SampleOutput",
    "UncheckedStepTo",
    "VPSchedule",
    "check_time_grid",
    "clip_x0",
    "ddim_noise_std",
    "eps_to_score",
    "eps_to_x0",
    "grid_mixture",
    "lagged_coefficient",
    "lagged_estimate",
    "probability_flow_ode",
    "renoise",
    "renoise_x0_coefficient",
    "sample_ddim",
    "score_to_eps",
    "solve_diffusion",
    "time_grid",
    "tweedie_denoise",
    "x0_to_eps",
    "x0_to_score",
    "zero_count",
]
