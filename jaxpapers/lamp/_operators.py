r"""Linear measurement operators :math:`y = A x + \sigma_y n` with a precomputed thin SVD.

Each operator applies :math:`A` in its own structured way (a matrix product, a gather of observed
pixels, an FFT convolution, average pooling) and carries the thin SVD
:math:`A = U \operatorname{diag}(s) V^\top` of its flattened matrix, which DiffPIR's proximal step
and DDRM's spectral updates use. The SVD is computed once, eagerly, in float64 NumPy when the
operator is built (build operators outside ``jit``; they are then ordinary pytrees).
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from jaxpapers.core.checks import check_finite, check_key, is_concrete


def _thin_svd(matrix: np.ndarray, dtype) -> tuple[Array, Array, Array]:
    u, s, vt = np.linalg.svd(np.asarray(matrix, np.float64), full_matrices=False)
    s = np.where(s > 1e-6 * max(s.max(initial=0.0), 1e-300), s, 0.0)
    return jnp.asarray(u, dtype), jnp.asarray(s, dtype), jnp.asarray(vt, dtype)


class LinearOperator(eqx.Module):
    """A linear measurement operator on samples of shape ``in_shape``.

    Attributes:
      u: ``[m, r]`` left singular vectors (``m = prod(out_shape)``).
      s: ``[r]`` singular values (exact zeros for numerically zero ones).
      vt: ``[r, n]`` right singular vectors (``n = prod(in_shape)``).
      in_shape, out_shape: static sample and measurement shapes.
    """

    u: Float[Array, "m r"]
    s: Float[Array, " r"]
    vt: Float[Array, "r n"]
    in_shape: tuple[int, ...] = eqx.field(static=True)
    out_shape: tuple[int, ...] = eqx.field(static=True)

    @abc.abstractmethod
    def apply(self, x: Float[Array, ...]) -> Float[Array, ...]:
        """:math:`A x` for one sample ``x`` of shape ``in_shape``; returns ``out_shape``."""

    def __call__(self, x: Float[Array, ...]) -> Float[Array, ...]:
        return self.apply(x)

    def adjoint(self, y: Float[Array, ...]) -> Float[Array, ...]:
        """:math:`A^\\top y` (by transposing :meth:`apply`)."""
        zero = jnp.zeros(self.in_shape, y.dtype)
        (out,) = jax.linear_transpose(self.apply, zero)(y)
        return out

    def check_measurement(self, y: ArrayLike, name: str = "y") -> None:
        """Raise ``ValueError`` unless ``y`` has shape ``out_shape``."""
        if np.shape(y) != self.out_shape:
            raise ValueError(
                f"{name} has shape {np.shape(y)}; {type(self).__name__} with input shape "
                f"{self.in_shape} produces measurements of shape {self.out_shape}"
            )

    def check_input(self, x: ArrayLike, name: str = "x") -> None:
        """Raise ``ValueError`` unless ``x`` has shape ``in_shape``."""
        if np.shape(x) != self.in_shape:
            raise ValueError(
                f"{name} has shape {np.shape(x)}; {type(self).__name__} expects {self.in_shape}"
            )

    def matrix(self) -> Float[Array, "m n"]:
        """The dense ``[m, n]`` matrix, rebuilt from the SVD."""
        return (self.u * self.s[None, :]) @ self.vt


def _dense(apply, in_shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(in_shape))
    basis = jnp.eye(n, dtype=jnp.float32).reshape((n, *in_shape))
    cols = jax.vmap(apply)(basis)
    return np.asarray(cols, np.float64).reshape(n, -1).T


class MatrixOperator(LinearOperator):
    """A dense matrix ``[m, n]`` acting on vectors ``[n]``."""

    a: Float[Array, "m n"]

    def __init__(self, matrix: ArrayLike):
        matrix = jnp.asarray(matrix)
        if matrix.ndim != 2:
            raise ValueError(f"matrix must be 2-D [m, n]; got shape {matrix.shape}")
        self.a = matrix
        self.in_shape, self.out_shape = (matrix.shape[1],), (matrix.shape[0],)
        self.u, self.s, self.vt = _thin_svd(np.asarray(matrix), matrix.dtype)

    def apply(self, x):
        return self.a @ x


class Inpainting(LinearOperator):
    """Keeps the pixels where ``mask`` is true: ``y = x.ravel()[observed]``, shape ``[n_obs]``."""

    observed: Array

    def __init__(self, mask: ArrayLike):
        mask = np.asarray(mask, bool)
        if mask.ndim < 1 or not mask.any():
            raise ValueError(
                f"mask must be a non-empty boolean array with a pixel observed; "
                f"got shape {mask.shape} with {int(mask.sum())} observed"
            )
        self.observed = jnp.asarray(np.flatnonzero(mask))
        self.in_shape, self.out_shape = mask.shape, (int(mask.sum()),)
        n = mask.size
        # The SVD is explicit: A = I[observed] has s = 1, U = I, V^T = rows of the identity.
        self.u = jnp.eye(self.out_shape[0], dtype=jnp.float32)
        self.s = jnp.ones(self.out_shape, jnp.float32)
        self.vt = jnp.asarray(np.eye(n, dtype=np.float32)[np.flatnonzero(mask)])

    def apply(self, x):
        return x.reshape(-1)[self.observed]


def gaussian_kernel_fft(shape: tuple[int, int], std: float) -> Array:
    """Transfer function of a periodic Gaussian blur with standard deviation ``std`` pixels."""
    if std <= 0:
        raise ValueError(f"std={std}; expected a positive blur width")
    h, w = shape
    fy, fx = np.fft.fftfreq(h), np.fft.fftfreq(w)
    k = np.exp(-2 * np.pi**2 * std**2 * (fy[:, None] ** 2 + fx[None, :] ** 2))
    return jnp.asarray(k, jnp.float32)


class GaussianBlur(LinearOperator):
    """Periodic Gaussian blur of ``[h, w]`` (or ``[h, w, c]``) images, applied with the FFT."""

    transfer: Float[Array, "h w"]

    def __init__(self, shape: tuple[int, ...], std: float):
        if len(shape) not in (2, 3):
            raise ValueError(f"shape={shape}; expected an image shape [h, w] or [h, w, c]")
        self.transfer = gaussian_kernel_fft(tuple(shape[:2]), std)
        self.in_shape = self.out_shape = tuple(shape)
        self.u, self.s, self.vt = _thin_svd(_dense(self.apply, self.in_shape), jnp.float32)

    def apply(self, x):
        tf = self.transfer if x.ndim == 2 else self.transfer[:, :, None]
        return jnp.real(jnp.fft.ifft2(jnp.fft.fft2(x, axes=(0, 1)) * tf, axes=(0, 1))).astype(
            x.dtype
        )


class AveragePool(LinearOperator):
    """Super-resolution operator: average over ``factor x factor`` blocks of ``[h, w]`` images."""

    factor: int = eqx.field(static=True)

    def __init__(self, shape: tuple[int, ...], factor: int):
        if len(shape) not in (2, 3) or shape[0] % factor or shape[1] % factor:
            raise ValueError(
                f"shape={shape}, factor={factor}; expected an image [h, w(, c)] whose h and w "
                "are multiples of factor"
            )
        self.factor = int(factor)
        self.in_shape = tuple(shape)
        self.out_shape = (shape[0] // factor, shape[1] // factor, *shape[2:])
        self.u, self.s, self.vt = _thin_svd(_dense(self.apply, self.in_shape), jnp.float32)

    def apply(self, x):
        f = self.factor
        h, w = x.shape[:2]
        return x.reshape(h // f, f, w // f, f, *x.shape[2:]).mean(axis=(1, 3))


def check_sigma_y(sigma_y: ArrayLike) -> None:
    """Raise ``ValueError`` if a concrete ``sigma_y`` is negative or not a scalar."""
    if not is_concrete(sigma_y):
        return
    arr = np.asarray(sigma_y)
    if arr.shape != () or not np.isfinite(arr) or arr < 0:
        shown = arr.item() if arr.shape == () else f"array of shape {arr.shape}"
        raise ValueError(f"sigma_y={shown}; expected a finite scalar >= 0")


def measure(
    operator: LinearOperator, x: Float[Array, ...], sigma_y: ArrayLike, *, key: Array
) -> Float[Array, ...]:
    r"""Simulate :math:`y = A x + \sigma_y n`, :math:`n \sim \mathcal N(0, I)`.

    Args:
      operator: the measurement operator.
      x: one sample of shape ``operator.in_shape``.
      sigma_y: noise standard deviation, ``>= 0``.
      key: PRNG key.

    Returns:
      ``y`` of shape ``operator.out_shape``.
    """
    operator.check_input(x)
    check_finite("x", x)
    check_sigma_y(sigma_y)
    check_key("key", key)
    clean = operator.apply(x)
    return clean + sigma_y * jax.random.normal(key, clean.shape, clean.dtype)
