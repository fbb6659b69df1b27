r"""Fourier Neural Operators (Li et al., ICLR 2021) on 1-D and 2-D regular grids (flax.nnx).

A spectral convolution keeps the lowest ``modes`` Fourier coefficients of each input channel and
mixes channels there with learned complex weights,

.. math:: (\mathcal{K} v)(x) = \mathcal{F}^{-1}\big[R_k\,(\mathcal{F} v)_k\big](x),
          \qquad |k| < \text{modes},

so the operator acts on functions, not on grids: the same weights apply at any resolution with
at least ``2 * modes`` points per axis (``jnp.fft.rfft`` normalised by ``"forward"``, so Fourier
coefficients, and hence outputs, do not depend on the number of grid points).

An FNO block is ``gelu(K v + W v)`` with a pointwise linear ``W``; the network lifts its input
channels ``[u, grid coordinate(s), t]`` to ``width`` channels, applies ``depth`` blocks and projects
back with a two-layer pointwise MLP. Inputs are channels-last: ``[batch, n, channels]`` (1-D) and
``[batch, n1, n2, channels]`` (2-D); the grid is ``[0, 1)`` (periodic) or ``[0, 1]`` per axis.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jaxtyping import Array, Float


def _complex_param(rngs: nnx.Rngs, shape: tuple[int, ...], scale: float) -> nnx.Param:
    # Real and imaginary parts as one real array: optax and orbax then see only real leaves.
    return nnx.Param(scale * jax.random.uniform(rngs.params(), (2, *shape)))


def _check_channels(u: jax.Array, ndim: int, channels: int, name: str) -> None:
    if u.ndim != ndim + 2 or u.shape[-1] != channels:
        raise ValueError(
            f"{name} must have shape [batch, {'n, ' * ndim}{channels}]; got shape {u.shape}"
        )


class SpectralConv1d(nnx.Module):
    """Spectral convolution on a 1-D grid: keep ``modes`` Fourier coefficients, mix channels."""

    def __init__(self, in_channels: int, out_channels: int, modes: int, *, rngs: nnx.Rngs):
        if modes < 1:
            raise ValueError(f"modes={modes}; expected a positive number of Fourier modes")
        self.in_channels, self.out_channels, self.modes = in_channels, out_channels, modes
        self.weight = _complex_param(
            rngs, (modes, in_channels, out_channels), 1.0 / (in_channels * out_channels)
        )

    def __call__(self, v: Float[Array, "b n ci"]) -> Float[Array, "b n co"]:
        """Apply the operator to ``v`` (``[batch, n, in_channels]``); needs ``n >= 2 * modes``."""
        _check_channels(v, 1, self.in_channels, "v")
        n = v.shape[1]
        if n < 2 * self.modes:
            raise ValueError(f"grid size n={n} must be at least 2 * modes = {2 * self.modes}")
        coeffs = jnp.fft.rfft(v, axis=1, norm="forward")[:, : self.modes]
        w = self.weight[0] + 1j * self.weight[1]
        mixed = jnp.einsum("bki,kio->bko", coeffs, w)
        return jnp.fft.irfft(mixed, n=n, axis=1, norm="forward").astype(v.dtype)


class SpectralConv2d(nnx.Module):
    """Spectral convolution on a 2-D grid: modes ``|k1| < modes1``, ``0 <= k2 < modes2``."""

    def __init__(
        self, in_channels: int, out_channels: int, modes1: int, modes2: int, *, rngs: nnx.Rngs
    ):
        if modes1 < 1 or modes2 < 1:
            raise ValueError(f"modes1={modes1}, modes2={modes2}; expected positive mode counts")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.modes1, self.modes2 = modes1, modes2
        scale = 1.0 / (in_channels * out_channels)
        shape = (modes1, modes2, in_channels, out_channels)
        # Two blocks of weights: non-negative and negative frequencies along the first axis.
        self.weight_pos = _complex_param(rngs, shape, scale)
        self.weight_neg = _complex_param(rngs, shape, scale)

    def __call__(self, v: Float[Array, "b n1 n2 ci"]) -> Float[Array, "b n1 n2 co"]:
        """Apply the operator to ``v`` (``[batch, n1, n2, in_channels]``)."""
        _check_channels(v, 2, self.in_channels, "v")
        n1, n2 = v.shape[1], v.shape[2]
        m1, m2 = self.modes1, self.modes2
        if n1 < 2 * m1 or n2 < 2 * m2:
            raise ValueError(f"grid {(n1, n2)} must be at least 2 * modes = {(2 * m1, 2 * m2)}")
        coeffs = jnp.fft.rfft2(v, axes=(1, 2), norm="forward")
        wp = self.weight_pos[0] + 1j * self.weight_pos[1]
        wn = self.weight_neg[0] + 1j * self.weight_neg[1]
        top = jnp.einsum("bxyi,xyio->bxyo", coeffs[:, :m1, :m2], wp)
        bottom = jnp.einsum("bxyi,xyio->bxyo", coeffs[:, n1 - m1 :, :m2], wn)
        out = jnp.zeros((v.shape[0], n1, n2 // 2 + 1, self.out_channels), dtype=coeffs.dtype)
        out = out.at[:, :m1, :m2].set(top).at[:, n1 - m1 :, :m2].set(bottom)
        return jnp.fft.irfft2(out, s=(n1, n2), axes=(1, 2), norm="forward").astype(v.dtype)


def _grid(n: int, periodic: bool, dtype) -> jax.Array:
    return (jnp.arange(n, dtype=dtype) / n) if periodic else jnp.linspace(0.0, 1.0, n, dtype=dtype)


def _time_channel(t: jax.Array | float | None, shape: tuple[int, ...], dtype) -> list[jax.Array]:
    if t is None:
        return []
    t = jnp.asarray(t, dtype=dtype)
    if t.ndim == 0:
        t = jnp.broadcast_to(t, shape[:1])
    if t.shape != shape[:1]:
        raise ValueError(f"t must be a scalar or have shape [{shape[0]}]; got shape {t.shape}")
    return [jnp.broadcast_to(t.reshape((-1,) + (1,) * (len(shape) - 1)), shape)]


class FNO1d(nnx.Module):
    """Fourier Neural Operator on a 1-D grid; input channels ``[u, x, t]``.

    Args:
      in_channels: channels of ``u``.
      out_channels: channels of the output.
      width: hidden channels.
      modes: Fourier modes kept per spectral convolution.
      depth: number of FNO blocks.
      time_input: whether ``__call__`` takes a time ``t`` (appended as a constant channel).
      periodic: grid ``[0, 1)`` (True) or ``[0, 1]`` (False) for the coordinate channel.
      rngs: flax.nnx PRNG streams.
    """

    def __init__(
        self,
        in_channels: int = 1,
        out_channels: int = 1,
        *,
        width: int = 32,
        modes: int = 12,
        depth: int = 4,
        time_input: bool = True,
        periodic: bool = False,
        rngs: nnx.Rngs,
    ):
        if width < 1 or depth < 1:
            raise ValueError(f"width={width}, depth={depth}; expected positive integers")
        self.in_channels, self.time_input, self.periodic = in_channels, time_input, periodic
        lift_in = in_channels + 1 + int(time_input)
        self.lift = nnx.Linear(lift_in, width, rngs=rngs)
        self.spectral = nnx.List(
            [SpectralConv1d(width, width, modes, rngs=rngs) for _ in range(depth)]
        )
        self.pointwise = nnx.List([nnx.Linear(width, width, rngs=rngs) for _ in range(depth)])
        self.proj1 = nnx.Linear(width, 2 * width, rngs=rngs)
        self.proj2 = nnx.Linear(2 * width, out_channels, rngs=rngs)

    def __call__(
        self, u: Float[Array, "b n ci"], t: Float[Array, " b"] | float | None = None
    ) -> Float[Array, "b n co"]:
        """Evaluate at ``u`` (``[batch, n, in_channels]``) and time ``t`` (scalar or ``[b]``)."""
        _check_channels(u, 1, self.in_channels, "u")
        if self.time_input and t is None:
            raise ValueError("this FNO takes a time input; got t=None")
        b, n, _ = u.shape
        x = jnp.broadcast_to(_grid(n, self.periodic, u.dtype)[None, :, None], (b, n, 1))
        extra = _time_channel(t, (b, n, 1), u.dtype) if self.time_input else []
        v = self.lift(jnp.concatenate([u, x, *extra], axis=-1))
        for i, (conv, lin) in enumerate(zip(self.spectral, self.pointwise, strict=True)):
            v = conv(v) + lin(v)
            if i < len(self.spectral) - 1:
                v = jax.nn.gelu(v)
        return self.proj2(jax.nn.gelu(self.proj1(v)))


class FNO2d(nnx.Module):
    """Fourier Neural Operator on a 2-D grid; input channels ``[u, x1, x2, t]``.

    Same arguments as :class:`FNO1d`, with ``modes`` kept along each axis.
    """

    def __init__(
        self,
        in_channels: int = 1,
        out_channels: int = 1,
        *,
        width: int = 16,
        modes: int = 8,
        depth: int = 4,
        time_input: bool = True,
        periodic: bool = True,
        rngs: nnx.Rngs,
    ):
        if width < 1 or depth < 1:
            raise ValueError(f"width={width}, depth={depth}; expected positive integers")
        self.in_channels, self.time_input, self.periodic = in_channels, time_input, periodic
        self.lift = nnx.Linear(in_channels + 2 + int(time_input), width, rngs=rngs)
        self.spectral = nnx.List(
            [SpectralConv2d(width, width, modes, modes, rngs=rngs) for _ in range(depth)]
        )
        self.pointwise = nnx.List([nnx.Linear(width, width, rngs=rngs) for _ in range(depth)])
        self.proj1 = nnx.Linear(width, 2 * width, rngs=rngs)
        self.proj2 = nnx.Linear(2 * width, out_channels, rngs=rngs)

    def __call__(
        self, u: Float[Array, "b n1 n2 ci"], t: Float[Array, " b"] | float | None = None
    ) -> Float[Array, "b n1 n2 co"]:
        """Evaluate at ``u`` (``[batch, n1, n2, in_channels]``) and time ``t``."""
        _check_channels(u, 2, self.in_channels, "u")
        if self.time_input and t is None:
            raise ValueError("this FNO takes a time input; got t=None")
        b, n1, n2, _ = u.shape
        g1 = _grid(n1, self.periodic, u.dtype)[None, :, None, None]
        g2 = _grid(n2, self.periodic, u.dtype)[None, None, :, None]
        coords = [jnp.broadcast_to(g1, (b, n1, n2, 1)), jnp.broadcast_to(g2, (b, n1, n2, 1))]
        extra = _time_channel(t, (b, n1, n2, 1), u.dtype) if self.time_input else []
        v = self.lift(jnp.concatenate([u, *coords, *extra], axis=-1))
        for i, (conv, lin) in enumerate(zip(self.spectral, self.pointwise, strict=True)):
            v = conv(v) + lin(v)
            if i < len(self.spectral) - 1:
                v = jax.nn.gelu(v)
        return self.proj2(jax.nn.gelu(self.proj1(v)))


__all__ = ["FNO1d", "FNO2d", "SpectralConv1d", "SpectralConv2d"]
