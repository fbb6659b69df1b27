"""A denoiser wrapper that counts network evaluations exactly, as a traced integer."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int

from jaxpapers.core.diffusion._parametrisation import eps_to_x0
from jaxpapers.core.diffusion._schedule import VPSchedule

EpsFn = Callable[[Array, Array], Array]


class CountingDenoiser(eqx.Module):
    r"""Wraps an epsilon-prediction network :math:`\hat\epsilon(x_t, t)` and counts its calls.

    The count is threaded through the caller as a traced ``int32`` (``nfe``): every call returns
    ``nfe + 1``, so the count is exact at run time, including calls inside ``lax.cond`` or
    ``lax.while_loop`` bodies, and it survives ``jit`` and ``vmap``. A reverse-mode derivative
    through the network (as in DPS) is part of the same evaluation and is not counted again.

    Attributes:
      eps_fn: ``eps_fn(x, t) -> eps`` on one sample ``x`` of any shape and a scalar ``t``.
    """

    eps_fn: EpsFn

    def __call__(
        self, x: Float[Array, ...], t: ArrayLike, nfe: Int[Array, ""]
    ) -> tuple[Float[Array, ...], Int[Array, ""]]:
        """Return ``(eps_fn(x, t), nfe + 1)``."""
        return self.eps_fn(x, jnp.asarray(t, x.dtype)), nfe + 1

    def denoise(
        self, x: Float[Array, ...], t: ArrayLike, schedule: VPSchedule, nfe: Int[Array, ""]
    ) -> tuple[Float[Array, ...], Float[Array, ...], Int[Array, ""]]:
        r"""One evaluation: ``(x0_hat, eps_hat, nfe + 1)`` with
        :math:`\hat x_0 = (x_t - \sigma_t\hat\epsilon)/\alpha_t` (Tweedie)."""
        eps, nfe = self(x, t, nfe)
        return eps_to_x0(x, eps, schedule.alpha(t), schedule.sigma(t)), eps, nfe


def zero_count() -> Int[Array, ""]:
    """The initial evaluation count, ``int32`` zero."""
    return jnp.zeros((), jnp.int32)


def count_trace_calls(fn: EpsFn) -> tuple[EpsFn, list[int]]:
    """Test helper: wrap ``fn`` so that every executed call appends to a host-side list.

    Uses ``jax.debug.callback``, so the list counts run-time executions (not traces). Meant for
    checking the traced count of :class:`CountingDenoiser`; it serialises to the host.
    """
    calls: list[int] = []

    def wrapped(x: Array, t: Array) -> Array:
        jax.debug.callback(lambda: calls.append(1))
        return fn(x, t)

    return wrapped, calls
