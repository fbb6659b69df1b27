"""Backend detection shared by the kernels."""

from __future__ import annotations

import jax


def default_interpret() -> bool:
    """True when no GPU or TPU backend is present: Pallas then runs in interpret mode."""
    return jax.default_backend() not in ("gpu", "tpu")


def has_accelerator() -> bool:
    """True on a GPU or TPU backend, where compiled Pallas kernels run."""
    return not default_interpret()


__all__ = ["default_interpret", "has_accelerator"]
