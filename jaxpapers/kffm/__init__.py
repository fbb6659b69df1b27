r"""kFFM: kernel functional flow matching (P06, NeurIPS 2026).

The paper's text is not available here; this is the method as its abstract states it, built on
functional flow matching (FFM, Kerrigan, Migliorini and Smyth, AISTATS 2024), minibatch OT flow
matching (OT-CFM, Tong et al. 2024; Pooladian et al. 2023) and Sinkhorn divergences (Feydy et
al. 2019).

Derivation
----------
*FFM.* Data are functions :math:`x_1 \sim \nu` on a domain :math:`D`, seen on a grid. A Gaussian
measure :math:`\mu_0 = \mathcal{GP}(0, k_0)` is the prior. For a pair :math:`(x_0, x_1)` the
conditional path and velocity are

.. math:: x_t = t x_1 + (1 - (1 - \sigma_{\min}) t) x_0, \qquad
          u_t = \frac{x_1 - (1 - \sigma_{\min}) x_t}{1 - (1 - \sigma_{\min}) t}
              = x_1 - (1 - \sigma_{\min}) x_0,

and a neural operator :math:`v_\theta` (an FNO, resolution-independent) is fitted by
:math:`\min_\theta \mathbb{E}_{t \sim U[0,1],\,(x_0, x_1) \sim \pi} \|v_\theta(x_t, t) -
u_t\|^2_{L^2(D)}`. For any coupling :math:`\pi \in \Pi(\mu_0, \nu)` the marginal field
:math:`v_t(x) = \mathbb{E}[u_t \mid x_t = x]` pushes :math:`\mu_0` to (a
:math:`\sigma_{\min}`-smoothing of) :math:`\nu`, so the coupling is a free design choice. FFM
takes the product coupling: inside a batch, :math:`x_0^{(i)}` is paired with :math:`x_1^{(i)}`.

*Why pair.* Under independent pairing each conditional line must carry both the shared global
structure of the data and the instance residual; the marginal field averages crossing lines and
is curved. With an OT coupling the lines do not cross (cyclical monotonicity), the field is
straighter and easier to learn and to integrate (fewer evaluations).

*Which geometry.* Quadratic OT directly on a function space is delicate, and the flat Euclidean
cost on grid values (OT-CFM on flattened grids) ignores function-space structure (derivatives,
the order of a path). kFFM embeds functions in the RKHS :math:`\mathcal H_k` of a kernel
:math:`k` on functions, :math:`f \mapsto \Phi(f) = k(f, \cdot)`, and uses the Hilbert cost

.. math:: c_k(f, g) = \|\Phi(f) - \Phi(g)\|_{\mathcal H_k}^2 = k(f,f) + k(g,g) - 2k(f,g).

For a bounded kernel :math:`c_k \le 2\sup k`, so entropic OT under :math:`c_k` is well posed on
any Banach ambient space. Within a batch of :math:`B` prior and :math:`B` data functions,
entropic OT :math:`\min_{P \in U(1/B, 1/B)} \langle P, C_k\rangle - \varepsilon H(P)` is solved by
Sinkhorn (ott-jax: a ``PointCloud`` of kernel features with a custom ``CostFn``); pairs are drawn
from :math:`P` row by row (:math:`\sigma_i \sim P_{i\cdot} B`). The debiased objective is the
Hilbert Sinkhorn divergence

.. math:: S_\varepsilon(\mu, \nu) = \mathrm{OT}_\varepsilon(\mu,\nu)
          - \tfrac12\mathrm{OT}_\varepsilon(\mu,\mu) - \tfrac12\mathrm{OT}_\varepsilon(\nu,\nu),

non-negative, zero iff the samples agree, differentiable; it doubles as a sample metric. With a
linear kernel :math:`k(f, g) = \langle f, g\rangle_{L^2}` the Hilbert cost is the squared
:math:`L^2` distance, and kFFM reduces to Euclidean OT-CFM on the grid (a test checks this).
Kernels provided: RBF on the :math:`L^2` distance; a derivative-aware Sobolev kernel (RBF on the
:math:`H^1` distance); a signature kernel (RBF on truncated signatures of the time-augmented path)
for time series. Epsilon is relative, :math:`0.05\,\mathrm{std}(C_k)`, so it is scale-free.
The architecture and loss are FFM's; only the pairing changes.

Public API
----------
* kernels on functions: :class:`RBFKernel`, :class:`SobolevKernel`, :class:`SignatureKernel`,
  :class:`LinearKernel` (``kernel.cost_matrix`` is the Hilbert cost, ``kernel.gram`` the kernel);
* OT: :func:`hilbert_geometry` (ott ``PointCloud`` with the Hilbert ``CostFn``),
  :func:`hilbert_sinkhorn_divergence`;
* pairings: :class:`IndependentPairing` (FFM), :class:`EuclideanOTPairing` (OT-CFM),
  :class:`KernelOTPairing` (kFFM), :func:`make_pairing_fn` (global or per-device pairing),
  :func:`draw_indices` (pairs drawn from a coupling, with or without replacement);
* flow matching: :func:`ffm_interpolant`, :func:`ffm_target`, :func:`regression_loss`,
  :func:`flow_matching_loss`, :func:`generate` (diffrax, counted evaluations);
* metrics: :func:`density_mse`, :func:`spectrum_mse` (MMD is ``jaxpapers.core.metrics.mmd_rbf``);
* neural operators: :class:`FNO1d`, :class:`FNO2d` (Fourier neural operators, flax.nnx);
* GP priors: :func:`gaussian_process_prior` (a :class:`GaussianProcessPrior` on a 1-D or 2-D
  grid, ``prior.sample(n, key=key)``), :func:`gp_sample`, :func:`periodic_grid`;
* function-valued data sets (every generator takes ``n``, its grid and a keyword ``key``):
  :func:`gp_mixture_paths`, :func:`ou_paths`, :func:`oscillator_paths`,
  :func:`burgers_solutions`, :func:`reaction_diffusion_solutions`, :func:`heat2d_solutions`,
  :func:`navier_stokes2d_solutions`, and the PDE solvers behind them (:func:`burgers_solve`,
  :func:`reaction_diffusion_solve`, :func:`heat2d_solve`, :func:`navier_stokes2d_solve`).

Functions are ``[n, grid]`` arrays on 1-D grids or ``[n, grid1, grid2]`` fields on 2-D grids
(pairings, the RBF, linear and Sobolev kernels, the divergence and the metrics take both; the
signature kernel is for 1-D paths).

Example::

    import jax, jax.numpy as jnp, optax
    from flax import nnx
    from jaxpapers import kffm

    grid = jnp.linspace(0.0, 1.0, 32)
    data = kffm.gp_mixture_paths(512, grid, key=jax.random.key(0))
    prior = kffm.gaussian_process_prior(grid, lengthscale=0.1)
    pairing = kffm.KernelOTPairing(kffm.SobolevKernel(derivative_weight=0.01))
    model = kffm.FNO1d(width=16, modes=8, depth=2, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(model, nnx.Param)
    apply = lambda p, x, t: nnx.merge(graphdef, p)(x[..., None], t)[..., 0]
    loss = kffm.flow_matching_loss(
        apply, params, data[:64], key=jax.random.key(1), prior=prior, pairing=pairing
    )
"""

from jaxpapers.kffm._flow import (
    SIGMA_MIN,
    Generation,
    ffm_interpolant,
    ffm_target,
    flow_matching_loss,
    generate,
    regression_loss,
)
from jaxpapers.kffm._fno import FNO1d, FNO2d
from jaxpapers.kffm._functional_data import (
    GaussianProcessPrior,
    burgers_solutions,
    burgers_solve,
    gaussian_process_prior,
    gp_mixture_paths,
    gp_sample,
    heat2d_solutions,
    heat2d_solve,
    navier_stokes2d_solutions,
    navier_stokes2d_solve,
    oscillator_paths,
    ou_paths,
    periodic_grid,
    reaction_diffusion_solutions,
    reaction_diffusion_solve,
)
from jaxpapers.kffm._hilbert_ot import (
    HilbertCost,
    HilbertSinkhornDivergence,
    hilbert_geometry,
    hilbert_sinkhorn_divergence,
)
from jaxpapers.kffm._kernels import (
    FunctionKernel,
    LinearKernel,
    RBFKernel,
    SignatureKernel,
    SobolevKernel,
    path_signature,
)
from jaxpapers.kffm._metrics import density_mse, mean_power_spectrum, spectrum_mse
from jaxpapers.kffm._pairing import (
    EuclideanOTPairing,
    IndependentPairing,
    KernelOTPairing,
    Pairing,
    draw_indices,
    make_pairing_fn,
)

__all__ = [
    "SIGMA_MIN",
    "EuclideanOTPairing",
    "FNO1d",
    "FNO2d",
    "FunctionKernel",
    "GaussianProcessPrior",
    "Generation",
    "HilbertCost",
    "HilbertSinkhornDivergence",
    "IndependentPairing",
    "KernelOTPairing",
    "LinearKernel",
    "Pairing",
    "RBFKernel",
    "SignatureKernel",
    "SobolevKernel",
    "burgers_solutions",
    "burgers_solve",
    "density_mse",
    "draw_indices",
    "ffm_interpolant",
    "ffm_target",
    "flow_matching_loss",
    "gaussian_process_prior",
    "generate",
    "gp_mixture_paths",
    "gp_sample",
    "heat2d_solutions",
    "heat2d_solve",
    "hilbert_geometry",
    "hilbert_sinkhorn_divergence",
    "make_pairing_fn",
    "mean_power_spectrum",
    "navier_stokes2d_solutions",
    "navier_stokes2d_solve",
    "oscillator_paths",
    "ou_paths",
    "path_signature",
    "periodic_grid",
    "reaction_diffusion_solutions",
    "reaction_diffusion_solve",
    "regression_loss",
    "spectrum_mse",
]
