"""SCOA: subspace-constrained orthogonal adaptation (InfLoRA-style).

After task ``t`` the inputs an adapter saw on tasks ``<= t`` span (up to an energy threshold) a
subspace with orthonormal basis ``U`` (top left singular vectors of the stacked inputs). A new
expert for task ``t + 1`` reads its input through ``P = I - U U^T``: whatever it learns, its output
on any input in ``span(U)`` is exactly zero, so earlier tasks' inputs give unchanged adapter
outputs. Training a down-projection ``A`` behind ``P`` is the same as projecting every gradient of
``A`` onto the orthogonal complement (``dL/d(A) P`` lies in it), the InfLoRA/O-LoRA constraint.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_finite, check_int, check_range


def input_subspace(
    inputs: Float[Array, "n d"], *, energy: float = 0.99, max_rank: int | None = None
) -> Float[Array, "d d"]:
    """Basis of the smallest principal subspace holding ``energy`` of ``sum ||x||^2``.

    Returns ``U`` as a ``[D, D]`` matrix whose unused columns are zero (a fixed shape, so the
    result is jittable and can be stacked across runs).

    Args:
      inputs: ``[N, D]`` adapter inputs of earlier tasks (uncentred: the constraint is linear).
      energy: fraction of the squared norm to keep, in ``(0, 1]``.
      max_rank: optional cap on the rank (leaves a complement of at least ``D - max_rank``).
    """
    if inputs.ndim != 2:
        raise ValueError(f"inputs has shape {inputs.shape}; expected [N, D]")
    check_range("energy", energy, 0.0, 1.0, low_open=True)
    check_finite("inputs", inputs)
    if max_rank is not None:
        check_int("max_rank", max_rank, minimum=0)
    d = inputs.shape[1]
    # Only U ([D, D]) is needed: with N >= D the reduced SVD gives all of it without forming the
    # [N, N] right factor (N is every pixel of the earlier videos: that factor would cost O(N^2)).
    u, s, _ = jnp.linalg.svd(inputs.T.astype(jnp.float32), full_matrices=inputs.shape[0] < d)
    s = jnp.concatenate([s, jnp.zeros((d - s.shape[0],), s.dtype)]) if s.shape[0] < d else s
    cum = jnp.cumsum(s**2) / jnp.maximum(jnp.sum(s**2), 1e-30)
    # Keep direction i while the energy before it is still short of the threshold.
    keep = jnp.concatenate([jnp.ones((1,), bool), cum[:-1] < energy]) & (s > 0)
    if max_rank is not None:
        keep = keep & (jnp.arange(d) < max_rank)
    return u * keep[None, :]


def orthogonal_projector(basis: Float[Array, "d k"]) -> Float[Array, "d d"]:
    """``P = I - U U^T`` for an orthonormal (or zero-padded) basis ``U``."""
    if basis.ndim != 2:
        raise ValueError(f"basis has shape {basis.shape}; expected [D, K]")
    check_finite("basis", basis)
    return jnp.eye(basis.shape[0], dtype=basis.dtype) - basis @ basis.T


def project_out(x: Float[Array, "*b d"], basis: Float[Array, "d k"]) -> Float[Array, "*b d"]:
    """``x (I - U U^T)``: the component of ``x`` orthogonal to ``span(U)``."""
    if jnp.ndim(basis) != 2:
        raise ValueError(f"basis has shape {jnp.shape(basis)}; expected [D, K]")
    if jnp.ndim(x) < 1 or jnp.shape(x)[-1] != jnp.shape(basis)[0]:
        raise ValueError(f"x has shape {jnp.shape(x)}; expected [..., {jnp.shape(basis)[0]}]")
    return x - (x @ basis) @ basis.T
