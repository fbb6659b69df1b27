"""Paper-neutral diffusion core: VP schedules, parametrisations, Tweedie's denoiser, counted
denoisers, DDPM/DDIM steps driven by a custom diffrax solver, the probability-flow ODE through
standard diffrax solvers, and exact Gaussian-mixture priors.

Every sampler returns its exact number of denoiser evaluations (``nfe``).
"""

from jaxpapers.core.diffusion._mixture import GaussianMixture, MixturePosterior, grid_mixture
from jaxpapers.core.diffusion._nfe import CountingDenoiser, count_trace_calls, zero_count
from jaxpapers.core.diffusion._parametrisation import (
    eps_to_score,
    eps_to_x0,
    score_to_eps,
    tweedie_denoise,
    x0_to_eps,
    x0_to_score,
)
from jaxpapers.core.diffusion._samplers import (
    DDIMStep,
    SampleOutput,
    ddim_noise_std,
    probability_flow_ode,
    renoise,
    renoise_x0_coefficient,
    sample_ddim,
)
from jaxpapers.core.diffusion._schedule import VPSchedule, time_grid
from jaxpapers.core.diffusion._solver import (
    AbstractReverseStep,
    ReverseDiffusionSolver,
    ReverseSolution,
    solve_reverse,
)

__all__ = [
    "AbstractReverseStep",
    "CountingDenoiser",
    "DDIMStep",
    "GaussianMixture",
    "MixturePosterior",
    "ReverseDiffusionSolver",
    "ReverseSolution",
    "SampleOutput",
    "VPSchedule",
    "count_trace_calls",
    "ddim_noise_std",
    "eps_to_score",
    "eps_to_x0",
    "grid_mixture",
    "probability_flow_ode",
    "renoise",
    "renoise_x0_coefficient",
    "sample_ddim",
    "score_to_eps",
    "solve_reverse",
    "time_grid",
    "tweedie_denoise",
    "x0_to_eps",
    "x0_to_score",
    "zero_count",
]
