"""jaxpapers_kernels: Pallas kernels of jaxpapers. Imports only jax.

Each kernel module holds a ``*_kernel`` on refs, a jitted wrapper with static block sizes and an
``interpret`` switch (interpret mode by default when no GPU/TPU is present), and a plain-jnp
``*_reference``.
"""

import jax


def default_interpret() -> bool:
    """True when no GPU or TPU backend is present: Pallas then runs in interpret mode."""
    return jax.default_backend() not in ("gpu", "tpu")


__all__ = ["default_interpret"]
