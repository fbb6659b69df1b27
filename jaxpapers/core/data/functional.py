r"""Function-valued data sets on regular grids: GP samples, SDE paths and PDE solutions.

Everything is generated offline from an explicit ``key`` (same key, same data) and returned as
``[n, grid]`` arrays of function values (``[n, grid1, grid2]`` for fields on 2-D grids).

* Gaussian processes (:func:`gp_sample`, :class:`GaussianProcessPrior`) on 1-D grids and on 2-D
  tensor-product grids: RBF and Matern-1/2, -3/2, -5/2 covariances, isotropic in the Euclidean
  distance :math:`r = \|x - y\|`. Small grids are sampled exactly, ``f = L z`` with
  ``L L^T = K + jitter I``; large grids by random Fourier features,
  :math:`f(x) = \sqrt{2\sigma^2/M}\sum_m \cos(\omega_m \cdot x + b_m) z_m` with
  :math:`b_m \sim U[0, 2\pi)` and :math:`\omega_m \in \mathbb R^d` drawn from the kernel's
  spectral density (Bochner): :math:`N(0, \ell^{-2} I)` for RBF, and for Matern-:math:`\nu`,
  whose density in :math:`d` dimensions is
  :math:`\propto (2\nu/\ell^2 + \|\omega\|^2)^{-(\nu + d/2)}`, the multivariate Student-t with
  :math:`2\nu` degrees of freedom and scale :math:`1/\ell`, i.e.
  :math:`\omega = z / (\ell\sqrt{g})`, :math:`z \sim N(0, I_d)`, :math:`g \sim
  \mathrm{Gamma}(\nu, \text{rate } \nu)`. Then :math:`\mathbb E f(x) f(y) = \sigma^2
  \mathbb E\cos(\omega\cdot(x - y)) = k(x, y)`.
* Time series: a two-component GP mixture (:func:`gp_mixture_paths`), Ornstein-Uhlenbeck paths
  :math:`dX = \theta(\mu - X)dt + \sigma dW` and stochastic damped oscillators
  :math:`dX = V dt,\ dV = (-\omega^2 X - \gamma V)dt + \sigma dW`, both simulated with diffrax
  (Heun's method on a Brownian path, strong order 1 for this additive noise, at a quarter of
  the grid spacing, saved on the grid).
* PDEs on the periodic unit interval, by the method of lines with a pseudo-spectral derivative
  (2/3-rule de-aliasing) and diffrax's adaptive Tsit5: viscous Burgers
  :math:`u_t + u u_x = \nu u_{xx}` and Allen-Cahn reaction-diffusion
  :math:`u_t = D u_{xx} + r(u - u^3)`; and the 2-D heat equation on the periodic unit square,
  solved exactly in Fourier space. Initial conditions are random Fourier series with a decaying
  spectrum.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

KernelName = Literal["rbf", "matern12", "matern32", "matern52"]
_NU = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


def _check_positive(**kwargs: float) -> None:
    for name, value in kwargs.items():
        if not (isinstance(value, int | float | np.floating | np.integer) and value > 0):
            raise ValueError(f"{name}={value!r}; expected a positive number")


def covariance(
    x: Float[Array, " n"] | Float[Array, "n d"],
    y: Float[Array, " m"] | Float[Array, "m d"],
    *,
    kernel: KernelName = "matern52",
    lengthscale: float = 0.1,
    variance: float = 1.0,
) -> Float[Array, "n m"]:
    r"""Stationary isotropic covariance matrix ``k(x_i, y_j)`` of points.

    Points are scalars (``[n]``) or ``d``-vectors (``[n, d]``), :math:`r = \|x - y\|`.
    RBF: :math:`\sigma^2 e^{-r^2 / 2\ell^2}`; Matern-5/2:
    :math:`\sigma^2 (1 + \sqrt5 r/\ell + 5 r^2/3\ell^2) e^{-\sqrt5 r/\ell}` (and the 1/2, 3/2
    forms).
    """
    if kernel not in ("rbf", *_NU):
        raise ValueError(f"kernel={kernel!r}; expected one of ('rbf', {', '.join(_NU)})")
    x, y = jnp.asarray(x), jnp.asarray(y)
    if x.ndim != y.ndim or x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[1] != y.shape[1]):
        raise ValueError(
            f"x and y must both be [n] scalars or [n, d] points with one d; got shapes "
            f"{x.shape} and {y.shape}"
        )
    if x.ndim == 1:
        r = jnp.abs(x[:, None] - y[None, :]) / lengthscale
    else:
        d2 = jnp.sum((x[:, None, :] - y[None, :, :]) ** 2, axis=-1)
        r = jnp.sqrt(jnp.maximum(d2, 0.0)) / lengthscale
    if kernel == "rbf":
        k = jnp.exp(-0.5 * r**2)
    elif kernel == "matern12":
        k = jnp.exp(-r)
    elif kernel == "matern32":
        k = (1.0 + math.sqrt(3.0) * r) * jnp.exp(-math.sqrt(3.0) * r)
    else:
        k = (1.0 + math.sqrt(5.0) * r + 5.0 / 3.0 * r**2) * jnp.exp(-math.sqrt(5.0) * r)
    return variance * k


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class GaussianProcessPrior:
    """A zero-mean GP on a fixed 1-D or 2-D grid, ready to sample inside jitted code.

    Build it with :func:`gaussian_process_prior`. Array fields are pytree leaves; the kernel
    description is static.

    Attributes:
      grid: ``[n]`` grid points (1-D) or ``[n1 * n2, 2]`` points of a 2-D grid (row-major).
      factor: ``[N, N]`` Cholesky factor of the covariance of the ``N`` points (exact method), or
        ``[0, 0]``.
      kernel, lengthscale, variance: the covariance (static).
      method: ``"cholesky"`` or ``"spectral"`` (static).
      n_features: random Fourier features for the spectral method (static).
      shape: grid shape of one sample, ``(n,)`` or ``(n1, n2)`` (static; ``None`` means
        ``grid.shape``, a 1-D grid).
    """

    grid: jax.Array
    factor: jax.Array
    kernel: str = dataclasses.field(metadata=dict(static=True), default="matern52")
    lengthscale: float = dataclasses.field(metadata=dict(static=True), default=0.1)
    variance: float = dataclasses.field(metadata=dict(static=True), default=1.0)
    method: str = dataclasses.field(metadata=dict(static=True), default="cholesky")
    n_features: int = dataclasses.field(metadata=dict(static=True), default=1024)
    shape: tuple[int, ...] | None = dataclasses.field(metadata=dict(static=True), default=None)

    @property
    def grid_shape(self) -> tuple[int, ...]:
        """Shape of one sample: ``(n,)`` (1-D grid) or ``(n1, n2)`` (2-D grid)."""
        return tuple(self.grid.shape[:1]) if self.shape is None else tuple(self.shape)

    def sample(self, key: jax.Array, n: int) -> Float[Array, "n ..."]:
        """``n`` independent samples on the grid, ``[n, grid]`` or ``[n, grid1, grid2]``."""
        if self.method == "cholesky":
            z = jax.random.normal(key, (n, self.grid.shape[0]), dtype=self.factor.dtype)
            flat = z @ self.factor.T
        else:
            flat = _spectral_sample(
                key, n, self.grid, self.kernel, self.lengthscale, self.variance, self.n_features
            )
        return flat.reshape((n, *self.grid_shape))


def gaussian_process_prior(
    grid: Float[Array, " n"] | tuple[Float[Array, " n1"], Float[Array, " n2"]],
    *,
    kernel: KernelName = "matern52",
    lengthscale: float = 0.1,
    variance: float = 1.0,
    method: Literal["auto", "cholesky", "spectral"] = "auto",
    jitter: float = 1e-6,
    n_features: int = 1024,
    max_cholesky: int = 512,
) -> GaussianProcessPrior:
    """A GP prior on ``grid``: exact Cholesky up to ``max_cholesky`` points, else spectral.

    Args:
      grid: ``[n]`` increasing grid points, or a pair ``(axis1 [n1], axis2 [n2])`` of such axes
        for the 2-D tensor-product grid (samples are then ``[n, n1, n2]``, the covariance
        isotropic in the Euclidean distance of the points).
      kernel: ``"rbf"``, ``"matern12"``, ``"matern32"`` or ``"matern52"``.
      lengthscale, variance: covariance parameters (positive).
      method: ``"cholesky"`` (exact, ``O(n^3)`` once), ``"spectral"`` (random Fourier features,
        approximate, ``O(n M)`` per sample) or ``"auto"``.
      jitter: added to the covariance diagonal before the Cholesky factorisation (relative to
        ``variance``).
      n_features: number of random Fourier features ``M`` (spectral method).
      max_cholesky: largest number of grid points that ``"auto"`` factorises exactly.
    """
    axes = [jnp.asarray(a) for a in grid] if isinstance(grid, tuple | list) else [jnp.asarray(grid)]
    bad = [a.shape for a in axes if a.ndim != 1 or a.shape[0] < 2]
    if bad or len(axes) not in (1, 2):
        shapes = [a.shape for a in axes] if isinstance(grid, tuple | list) else axes[0].shape
        raise ValueError(
            f"grid must be 1-D with at least 2 points, or a tuple of two such axes for a 2-D "
            f"grid; got shape {shapes}"
        )
    shape = tuple(int(a.shape[0]) for a in axes)
    if len(axes) == 1:
        grid = axes[0]
    else:
        g1, g2 = jnp.meshgrid(axes[0], axes[1], indexing="ij")
        grid = jnp.stack([g1.reshape(-1), g2.reshape(-1)], axis=-1)
    _check_positive(lengthscale=lengthscale, variance=variance, n_features=n_features)
    if not jitter >= 0:
        raise ValueError(f"jitter={jitter!r}; expected a non-negative number")
    if method not in ("auto", "cholesky", "spectral"):
        raise ValueError(f"method={method!r}; expected 'auto', 'cholesky' or 'spectral'")
    covariance(grid[:2], grid[:2], kernel=kernel)  # validates the kernel name
    if method == "auto":
        method = "cholesky" if grid.shape[0] <= max_cholesky else "spectral"
    if method == "cholesky":
        k = covariance(grid, grid, kernel=kernel, lengthscale=lengthscale, variance=variance)
        factor = jnp.linalg.cholesky(k + jitter * variance * jnp.eye(grid.shape[0], dtype=k.dtype))
    else:
        factor = jnp.zeros((0, 0), dtype=grid.dtype)
    return GaussianProcessPrior(
        grid,
        factor,
        kernel,
        float(lengthscale),
        float(variance),
        method,
        int(n_features),
        None if len(shape) == 1 else shape,
    )


def _spectral_sample(key, n, grid, kernel, lengthscale, variance, n_features):
    kw, kb, kz, kc = jax.random.split(key, 4)
    dtype = grid.dtype
    points = grid[:, None] if grid.ndim == 1 else grid  # [N, d]
    dim = points.shape[1]
    omega = jax.random.normal(kw, (n_features, dim), dtype=dtype) / lengthscale
    if kernel != "rbf":
        # Matern-nu spectral density: multivariate Student-t with 2 nu degrees of freedom (one
        # chi-square scale per feature, shared by the d coordinates; see the module docstring).
        nu = _NU[kernel]
        g = jax.random.gamma(kc, nu, (n_features,), dtype=dtype) / nu
        omega = omega / jnp.sqrt(g)[:, None]
    b = jax.random.uniform(kb, (n_features,), dtype=dtype, maxval=2.0 * jnp.pi)
    phi = jnp.cos(points @ omega.T + b[None, :])
    z = jax.random.normal(kz, (n, n_features), dtype=dtype)
    return math.sqrt(2.0 * variance / n_features) * z @ phi.T


def gp_sample(
    key: jax.Array,
    n: int,
    grid: Float[Array, " g"] | tuple[Float[Array, " g1"], Float[Array, " g2"]],
    *,
    kernel: KernelName = "matern52",
    lengthscale: float = 0.1,
    variance: float = 1.0,
    method: Literal["auto", "cholesky", "spectral"] = "auto",
) -> Float[Array, "n ..."]:
    """``n`` zero-mean GP samples on ``grid``, ``[n, g]`` or ``[n, g1, g2]`` (see
    :func:`gaussian_process_prior`)."""
    prior = gaussian_process_prior(
        grid, kernel=kernel, lengthscale=lengthscale, variance=variance, method=method
    )
    return prior.sample(key, n)


def gp_mixture_paths(key: jax.Array, n: int, grid: Float[Array, " g"]) -> Float[Array, "n g"]:
    r"""Time series from a two-component GP mixture with distinct means and length scales.

    Component 1 (weight 1/2): mean :math:`\sin(2\pi x)`, Matern-5/2, :math:`\ell = 0.2`,
    :math:`\sigma^2 = 0.1`; component 2: mean :math:`-\sin(2\pi x) + 0.5`, RBF, :math:`\ell = 0.05`,
    :math:`\sigma^2 = 0.05`. Shared global structure plus instance residuals.
    """
    grid = jnp.asarray(grid)
    kc, k1, k2 = jax.random.split(key, 3)
    s = jnp.sin(2.0 * jnp.pi * grid)[None, :]
    a = s + gp_sample(k1, n, grid, kernel="matern52", lengthscale=0.2, variance=0.1)
    b = 0.5 - s + gp_sample(k2, n, grid, kernel="rbf", lengthscale=0.05, variance=0.05)
    pick = jax.random.bernoulli(kc, 0.5, (n, 1))
    return jnp.where(pick, a, b)


def _linear_sde_paths(key, n, grid, drift, diffusion, y0):
    import diffrax
    import lineax

    grid = jnp.asarray(grid)
    dt = (grid[-1] - grid[0]) / (grid.shape[0] - 1)
    bm = diffrax.UnsafeBrownianPath(shape=y0.shape, key=key)
    terms = diffrax.MultiTerm(
        diffrax.ODETerm(drift),
        diffrax.ControlTerm(lambda t, y, args: lineax.DiagonalLinearOperator(diffusion(y)), bm),
    )
    sol = diffrax.diffeqsolve(
        terms,
        diffrax.Heun(),
        t0=grid[0],
        t1=grid[-1],
        dt0=dt / 4.0,
        y0=y0,
        saveat=diffrax.SaveAt(ts=grid),
        max_steps=8 * grid.shape[0],
        adjoint=diffrax.ForwardMode(),
    )
    return sol.ys


def ou_paths(
    key: jax.Array,
    n: int,
    grid: Float[Array, " g"],
    *,
    theta: float = 4.0,
    mu: float = 0.0,
    sigma: float = 1.0,
    x0_scale: float = 1.0,
) -> Float[Array, "n g"]:
    r"""Ornstein-Uhlenbeck paths :math:`dX = \theta(\mu - X)dt + \sigma dW`, ``X_0 ~ U(-s, s)``.

    Simulated with diffrax (Heun, additive noise) at a quarter of the grid spacing; ``[n, grid]``.
    """
    _check_positive(theta=theta, sigma=sigma, x0_scale=x0_scale)
    k0, kw = jax.random.split(key)
    y0 = jax.random.uniform(
        k0, (n,), minval=-x0_scale, maxval=x0_scale, dtype=jnp.result_type(grid)
    )
    ys = _linear_sde_paths(
        kw, n, grid, lambda t, y, args: theta * (mu - y), lambda y: sigma * jnp.ones_like(y), y0
    )
    return ys.T


def oscillator_paths(
    key: jax.Array,
    n: int,
    grid: Float[Array, " g"],
    *,
    omega: float = 2.0 * math.pi * 1.5,
    gamma: float = 1.0,
    sigma: float = 2.0,
) -> Float[Array, "n g"]:
    r"""Positions of stochastic damped oscillators (diffrax Heun); ``[n, grid]``.

    :math:`dX = V dt`, :math:`dV = (-\omega^2 X - \gamma V) dt + \sigma dW`, with
    :math:`X_0 \sim U(-1, 1)` and :math:`V_0 = 0`.
    """
    _check_positive(omega=omega, gamma=gamma, sigma=sigma)
    k0, kw = jax.random.split(key)
    x0 = jax.random.uniform(k0, (n,), minval=-1.0, maxval=1.0, dtype=jnp.result_type(grid))
    # State [x_1..x_n, v_1..v_n]: a flat vector so the noise is a diagonal operator.
    y0 = jnp.concatenate([x0, jnp.zeros_like(x0)])

    def drift(t, y, args):
        x, v = y[:n], y[n:]
        return jnp.concatenate([v, -(omega**2) * x - gamma * v])

    noise = jnp.concatenate([jnp.zeros_like(x0), jnp.full_like(x0, sigma)])
    ys = _linear_sde_paths(kw, n, grid, drift, lambda y: noise, y0)
    return ys[:, :n].T


def periodic_grid(n: int, dtype=jnp.float32) -> Float[Array, " n"]:
    """``n`` equispaced points on the periodic unit interval ``[0, 1)``."""
    return jnp.arange(n, dtype=dtype) / n


def random_fourier_series(
    key: jax.Array, n: int, n_grid: int, *, modes: int = 8, decay: float = 2.0, dtype=jnp.float32
) -> Float[Array, "n g"]:
    r"""Zero-mean random periodic functions :math:`\sum_{k=1}^{K} k^{-\text{decay}}(a_k\cos 2\pi k x
    + b_k \sin 2\pi k x)`, normalised to unit maximum coefficient, ``a, b ~ N(0, 1)``."""
    ka, kb = jax.random.split(key)
    k = jnp.arange(1, modes + 1, dtype=dtype)
    a = jax.random.normal(ka, (n, modes), dtype=dtype) * (k**-decay)[None, :]
    b = jax.random.normal(kb, (n, modes), dtype=dtype) * (k**-decay)[None, :]
    x = periodic_grid(n_grid, dtype)
    arg = 2.0 * jnp.pi * k[:, None] * x[None, :]
    return a @ jnp.cos(arg) + b @ jnp.sin(arg)


def _wavenumbers(n: int, dtype) -> jax.Array:
    return 2.0 * jnp.pi * jnp.fft.rfftfreq(n, d=1.0 / n).astype(dtype)


def _solve_mol(rhs, u0, t_final, rtol, atol):
    import diffrax

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(rhs),
        diffrax.Tsit5(),
        t0=0.0,
        t1=t_final,
        dt0=None,
        y0=u0,
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=100_000,
    )
    return sol.ys[-1]


def burgers_solve(
    u0: Float[Array, "n g"],
    *,
    nu: float = 0.02,
    t_final: float = 0.5,
    rtol: float = 1e-6,
    atol: float = 1e-8,
) -> Float[Array, "n g"]:
    r"""Solve viscous Burgers :math:`u_t + (u^2/2)_x = \nu u_{xx}` on the periodic unit interval.

    Pseudo-spectral method of lines (2/3-rule de-aliasing of the nonlinear term), integrated with
    diffrax Tsit5 and a PID step-size controller.

    Args:
      u0: ``[n, grid]`` initial conditions on :func:`periodic_grid`.
      nu: viscosity (positive). t_final: end time (positive).

    Returns:
      ``[n, grid]`` solutions at ``t_final``.
    """
    u0 = jnp.asarray(u0)
    if u0.ndim != 2:
        raise ValueError(f"u0 must be [n, grid]; got shape {u0.shape}")
    _check_positive(nu=nu, t_final=t_final)
    g = u0.shape[1]
    k = _wavenumbers(g, u0.dtype)[None, :]
    keep = (jnp.arange(k.shape[1]) < (g // 3 + 1))[None, :]

    def rhs(t, u, args):
        uh = jnp.fft.rfft(u, axis=-1)
        flux = jnp.fft.rfft(0.5 * u * u, axis=-1) * keep
        return jnp.fft.irfft(-1j * k * flux - nu * k**2 * uh, n=g, axis=-1)

    return _solve_mol(rhs, u0, t_final, rtol, atol)


def reaction_diffusion_solve(
    u0: Float[Array, "n g"],
    *,
    diffusion: float = 5e-3,
    rate: float = 5.0,
    t_final: float = 0.5,
    rtol: float = 1e-6,
    atol: float = 1e-8,
) -> Float[Array, "n g"]:
    r"""Solve Allen-Cahn :math:`u_t = D u_{xx} + r (u - u^3)` on the periodic unit interval.

    Pseudo-spectral method of lines with diffrax Tsit5; ``u0`` and the result are ``[n, grid]``.
    """
    u0 = jnp.asarray(u0)
    if u0.ndim != 2:
        raise ValueError(f"u0 must be [n, grid]; got shape {u0.shape}")
    _check_positive(diffusion=diffusion, rate=rate, t_final=t_final)
    g = u0.shape[1]
    k = _wavenumbers(g, u0.dtype)[None, :]

    def rhs(t, u, args):
        lap = jnp.fft.irfft(-(k**2) * jnp.fft.rfft(u, axis=-1), n=g, axis=-1)
        return diffusion * lap + rate * (u - u**3)

    return _solve_mol(rhs, u0, t_final, rtol, atol)


def burgers_solutions(
    key: jax.Array, n: int, n_grid: int = 64, *, nu: float = 0.02, t_final: float = 0.5
) -> Float[Array, "n g"]:
    """``n`` Burgers solutions at ``t_final`` from random Fourier-series initial conditions."""
    u0 = random_fourier_series(key, n, n_grid, modes=6, decay=1.5)
    return burgers_solve(u0, nu=nu, t_final=t_final)


def reaction_diffusion_solutions(
    key: jax.Array,
    n: int,
    n_grid: int = 64,
    *,
    diffusion: float = 5e-3,
    rate: float = 5.0,
    t_final: float = 0.5,
) -> Float[Array, "n g"]:
    r"""``n`` Allen-Cahn solutions at ``t_final`` from random small initial conditions.

    The initial condition (half a random Fourier series, 8 modes) is amplified by the reaction
    towards the stable states :math:`\pm1` at rate :math:`r` and separates into plateaus joined by
    fronts :math:`\tanh((x - x_0)/\sqrt{2D/r})`. The defaults keep both parts in the data: the
    front width :math:`\sqrt{2D/r} = 0.045` spans ~3 points of a 64-point grid (with
    :math:`D = 10^{-3}` it would be ~1 point, an unresolved jump), and at :math:`t = 0.5` = 2.5
    reaction times the plateaus have formed (about half the values have :math:`|u| > 0.9`) while
    the fronts have not yet annihilated (about 2.5 sign changes per sample on average; no sample
    is constant). Coarsening is slow (exponentially in the front spacing over the width), so the
    picture is stable in ``t_final``.
    """
    u0 = 0.5 * random_fourier_series(key, n, n_grid, modes=8, decay=1.0)
    return reaction_diffusion_solve(u0, diffusion=diffusion, rate=rate, t_final=t_final)


def heat2d_solve(
    u0: Float[Array, "n g g"], *, diffusivity: float = 0.01, t_final: float = 0.1
) -> Float[Array, "n g g"]:
    r"""Exact solution of :math:`u_t = \kappa \Delta u` on the periodic unit square:
    :math:`\hat u_k(t) = e^{-\kappa |2\pi k|^2 t} \hat u_k(0)`; ``u0`` is ``[n, g, g]``."""
    u0 = jnp.asarray(u0)
    if u0.ndim != 3 or u0.shape[1] != u0.shape[2]:
        raise ValueError(f"u0 must be [n, grid, grid]; got shape {u0.shape}")
    _check_positive(diffusivity=diffusivity, t_final=t_final)
    g = u0.shape[1]
    k = 2.0 * jnp.pi * jnp.fft.fftfreq(g, d=1.0 / g).astype(u0.dtype)
    kk = (k[:, None] ** 2 + k[None, :] ** 2)[None]
    uh = jnp.fft.fft2(u0, axes=(1, 2)) * jnp.exp(-diffusivity * kk * t_final)
    return jnp.fft.ifft2(uh, axes=(1, 2)).real.astype(u0.dtype)


def heat2d_solutions(
    key: jax.Array, n: int, n_grid: int = 32, *, diffusivity: float = 0.01, t_final: float = 0.1
) -> Float[Array, "n g g"]:
    """``n`` 2-D heat solutions at ``t_final`` from random products of Fourier series."""
    k1, k2, k3 = jax.random.split(key, 3)
    a = random_fourier_series(k1, n, n_grid, modes=6, decay=1.0)
    b = random_fourier_series(k2, n, n_grid, modes=6, decay=1.0)
    c = random_fourier_series(k3, n, n_grid, modes=4, decay=1.0)
    u0 = a[:, :, None] * b[:, None, :] + c[:, :, None] + c[:, None, :]
    return heat2d_solve(u0, diffusivity=diffusivity, t_final=t_final)


__all__ = [
    "GaussianProcessPrior",
    "burgers_solutions",
    "burgers_solve",
    "covariance",
    "gaussian_process_prior",
    "gp_mixture_paths",
    "gp_sample",
    "heat2d_solutions",
    "heat2d_solve",
    "oscillator_paths",
    "ou_paths",
    "periodic_grid",
    "random_fourier_series",
    "reaction_diffusion_solutions",
    "reaction_diffusion_solve",
]
