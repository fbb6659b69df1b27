"""Variance-preserving noise schedules in continuous time t in [0, 1]."""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

_KINDS = ("linear", "cosine")


class VPSchedule(eqx.Module):
    r"""A variance-preserving (VP) schedule :math:`x_t = \alpha_t x_0 + \sigma_t \epsilon`.

    ``alpha_t^2 + sigma_t^2 = 1``. Two kinds:

    * ``"linear"`` (Ho et al. 2020; Song et al. 2021):
      :math:`\beta(t) = \beta_{\min} + t(\beta_{\max} - \beta_{\min})`,
      :math:`\log \bar\alpha_t = -\beta_{\min} t - \tfrac12 (\beta_{\max} - \beta_{\min}) t^2`.
    * ``"cosine"`` (Nichol & Dhariwal 2021):
      :math:`\bar\alpha_t = \cos^2(\tfrac{\pi}{2}\tfrac{t + s}{1 + s}) / \cos^2(\tfrac{\pi}{2}
      \tfrac{s}{1 + s})`, clipped so that :math:`\bar\alpha_t \ge` ``min_alpha_bar``.

    All fields are static configuration (floats and a string); methods are pure in ``t``.

    Attributes:
      kind: ``"linear"`` or ``"cosine"``.
      beta_min, beta_max: linear-schedule rates.
      cosine_s: cosine-schedule offset ``s``.
      min_alpha_bar: floor on :math:`\bar\alpha_t` for the cosine schedule (keeps alpha_1 > 0).
    """

    kind: str = eqx.field(static=True, default="linear")
    beta_min: float = eqx.field(static=True, default=0.1)
    beta_max: float = eqx.field(static=True, default=20.0)
    cosine_s: float = eqx.field(static=True, default=0.008)
    min_alpha_bar: float = eqx.field(static=True, default=1e-4)

    def __check_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"kind={self.kind!r}; expected one of {_KINDS}")
        if not 0.0 <= self.beta_min < self.beta_max:
            raise ValueError(
                f"beta_min={self.beta_min}, beta_max={self.beta_max}; expected 0 <= min < max"
            )
        if not 0.0 < self.min_alpha_bar < 1.0:
            raise ValueError(f"min_alpha_bar={self.min_alpha_bar}; expected a value in (0, 1)")

    def log_alpha_bar(self, t: ArrayLike) -> Float[Array, ...]:
        """:math:`\\log \\bar\\alpha_t` (``0`` at ``t = 0``)."""
        t = jnp.asarray(t)
        if self.kind == "linear":
            return -self.beta_min * t - 0.5 * (self.beta_max - self.beta_min) * t**2
        s = self.cosine_s

        def log_cos(time):
            u = (time + s) / (1.0 + s) * (math.pi / 2)
            return jnp.log(jnp.maximum(jnp.cos(u), 1e-15))

        # Both terms rounded the same way: exactly 0 at t = 0, so log_snr(0) = +inf.
        log_f = 2.0 * (log_cos(t) - log_cos(jnp.zeros_like(t)))
        return jnp.maximum(log_f, math.log(self.min_alpha_bar))

    def alpha_bar(self, t: ArrayLike) -> Float[Array, ...]:
        r""":math:`\bar\alpha_t = \alpha_t^2`."""
        return jnp.exp(self.log_alpha_bar(t))

    def alpha(self, t: ArrayLike) -> Float[Array, ...]:
        """Signal coefficient :math:`\\alpha_t = \\sqrt{\\bar\\alpha_t}`."""
        return jnp.exp(0.5 * self.log_alpha_bar(t))

    def sigma(self, t: ArrayLike) -> Float[Array, ...]:
        """Noise coefficient :math:`\\sigma_t = \\sqrt{1 - \\bar\\alpha_t}`."""
        return jnp.sqrt(-jnp.expm1(self.log_alpha_bar(t)))

    def log_snr(self, t: ArrayLike) -> Float[Array, ...]:
        r"""Half log signal-to-noise ratio :math:`\lambda_t = \log(\alpha_t / \sigma_t)`
        (``+inf`` at ``t = 0``), the time variable of DPM-Solver."""
        la = self.log_alpha_bar(t)
        return 0.5 * la - 0.5 * jnp.log(-jnp.expm1(la))

    def beta(self, t: ArrayLike) -> Float[Array, ...]:
        r"""Rate :math:`\beta(t) = -\tfrac{d}{dt}\log\bar\alpha_t` of the VP SDE
        :math:`dx = -\tfrac12\beta x\,dt + \sqrt{\beta}\,dW`."""
        t = jnp.asarray(t)
        if self.kind == "linear":
            return self.beta_min + t * (self.beta_max - self.beta_min)
        s = self.cosine_s
        u = (t + s) / (1.0 + s) * (math.pi / 2)
        clipped = self.log_alpha_bar(t) <= math.log(self.min_alpha_bar)
        return jnp.where(clipped, 0.0, math.pi / (1.0 + s) * jnp.tan(u))


def time_grid(num_steps: int, *, t_max: float = 1.0, t_min: float = 0.0) -> Float[Array, " n"]:
    """Uniform decreasing grid ``t_max = t_0 > ... > t_num_steps = t_min`` of ``num_steps`` steps.

    Raises:
      ValueError: ``num_steps < 1`` or ``not 0 <= t_min < t_max <= 1``.
    """
    if int(num_steps) != num_steps or num_steps < 1:
        raise ValueError(f"num_steps={num_steps}; expected an integer >= 1")
    if not 0.0 <= t_min < t_max <= 1.0:
        raise ValueError(f"t_min={t_min}, t_max={t_max}; expected 0 <= t_min < t_max <= 1")
    return jnp.linspace(t_max, t_min, int(num_steps) + 1)
