r"""The denoiser as a diffrax term: the probability-flow vector field of a VP diffusion.

Time convention: diffrax integrates forward in its own time :math:`\tau = -t`, so the decreasing
diffusion grid :math:`t_0 > t_1 > \dots` is the increasing diffrax grid :math:`-t_0 < -t_1 <
\dots`. In that time the probability-flow ODE of the VP SDE (Song et al. 2021) reads

.. math:: \frac{dx}{d\tau} = \tfrac12\beta(t)\Big(x - \frac{\hat\epsilon(x, t)}{\sigma_t}\Big),
          \qquad t = -\tau,

which is :meth:`DenoiserTerm.vf`: any diffrax solver (``Tsit5``, ``Heun``, ...) integrates it
directly. The exponential-integrator solvers of this package (DDIM, DPM-Solver++(2M), the
posterior samplers) use the same term through :meth:`DenoiserTerm.denoise`, the data prediction
:math:`\hat x_0 = (x - \sigma_t\hat\epsilon)/\alpha_t` that the vector field is built from (one
evaluation of the network), with the evaluation count threaded as a traced integer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from diffrax import AbstractTerm
from jaxtyping import Array, ArrayLike, Float, Int, PyTree, Real

from jaxpapers.core.diffusion._nfe import CountingDenoiser
from jaxpapers.core.diffusion._parametrisation import eps_to_x0
from jaxpapers.core.diffusion._schedule import VPSchedule


class DenoiserTerm(AbstractTerm):
    r"""The probability-flow ODE of a VP diffusion as a diffrax term, in time :math:`\tau = -t`.

    Attributes:
      denoiser: the counted epsilon network (a plain ``eps_fn(x, t)`` is wrapped in a
        :class:`CountingDenoiser`); with ``conditional=True`` it is called as
        ``eps_fn(x, t, args)`` (class labels or other conditioning in diffrax's ``args``).
      schedule: the VP schedule.
      conditional: whether the network takes ``args`` as a third argument.

    Examples:
      >>> import diffrax, jax.numpy as jnp
      >>> from jaxpapers.core.diffusion import DenoiserTerm, VPSchedule
      >>> term = DenoiserTerm(lambda x, t: 0.0 * x, VPSchedule())
      >>> sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), -1.0, -0.5, 0.05, jnp.ones(2))
      >>> sol.ys.shape
      (1, 2)
    """

    denoiser: CountingDenoiser
    schedule: VPSchedule
    conditional: bool = eqx.field(static=True, default=False)

    def __init__(
        self,
        denoiser: CountingDenoiser | Callable[..., Array],
        schedule: VPSchedule,
        conditional: bool = False,
    ):
        if not isinstance(denoiser, CountingDenoiser):
            if not callable(denoiser):
                raise TypeError(
                    f"denoiser is a {type(denoiser).__name__}; expected a CountingDenoiser or a "
                    "callable eps_fn(x, t)"
                )
            denoiser = CountingDenoiser(denoiser)
        if not isinstance(schedule, VPSchedule):
            raise TypeError(f"schedule is a {type(schedule).__name__}; expected a VPSchedule")
        self.denoiser = denoiser
        self.schedule = schedule
        self.conditional = conditional

    def eps(self, x: Float[Array, ...], t: ArrayLike, args: PyTree) -> Float[Array, ...]:
        """The network's noise prediction at diffusion time ``t`` (not counted)."""
        t = jnp.asarray(t, x.dtype)
        fn = self.denoiser.eps_fn
        out = fn(x, t, args) if self.conditional else fn(x, t)
        if out.shape != x.shape:
            raise ValueError(
                f"denoiser returned shape {out.shape} for an input of shape {x.shape}; an epsilon "
                "network must return its input's shape"
            )
        return out

    def denoise(
        self, x: Float[Array, ...], t: ArrayLike, args: PyTree, nfe: Int[Array, ""]
    ) -> tuple[Float[Array, ...], Float[Array, ...], Int[Array, ""]]:
        r"""One evaluation at diffusion time ``t``: ``(x0_hat, eps_hat, nfe + 1)``,
        :math:`\hat x_0 = (x - \sigma_t\hat\epsilon)/\alpha_t`."""
        eps = self.eps(x, t, args)
        x0 = eps_to_x0(x, eps, self.schedule.alpha(t), self.schedule.sigma(t))
        return x0, eps, nfe + 1

    def vf(self, t: Real[ArrayLike, ""], y: Float[Array, ...], args: PyTree) -> Float[Array, ...]:
        r"""Probability-flow drift :math:`dx/d\tau` at diffrax time ``t`` (diffusion time -t)."""
        s = -jnp.asarray(t, y.dtype)
        eps = self.eps(y, s, args)
        return 0.5 * self.schedule.beta(s) * (y - eps / self.schedule.sigma(s))

    def contr(self, t0: Real[ArrayLike, ""], t1: Real[ArrayLike, ""], **kwargs: Any) -> Array:
        return jnp.asarray(t1) - jnp.asarray(t0)

    def prod(self, vf: PyTree, control: Array) -> PyTree:
        return jax.tree_util.tree_map(lambda v: v * control.astype(v.dtype), vf)
