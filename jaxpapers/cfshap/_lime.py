"""LIME for tabular inputs: a kernel-weighted local linear surrogate (Ribeiro et al. 2016)."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_finite, check_key, check_positive


@eqx.filter_jit
def _lime(model, x, background, key, num_samples, kernel_width, ridge):
    n = x.shape[0]
    kz, kb = jax.random.split(key)
    z = jax.random.bernoulli(kz, 0.5, (num_samples, n))
    z = z.at[0].set(True)
    rows = jax.random.randint(kb, (num_samples,), 0, background.shape[0])
    inputs = jnp.where(z, x[None], background[rows])
    y = jax.vmap(model)(inputs).astype(float)
    distance = 1.0 - z.sum(1) / n
    w = jnp.exp(-(distance**2) / kernel_width**2)
    design = jnp.concatenate([jnp.ones((num_samples, 1)), z.astype(float)], axis=1)
    gram = (design * w[:, None]).T @ design + ridge * jnp.diag(jnp.ones(n + 1).at[0].set(0.0))
    coef = jnp.linalg.solve(gram, (design * w[:, None]).T @ y)
    return coef[1:]


def lime_values(
    model: Callable[[Array], Array],
    x: Float[Array, " n"],
    background: Float[Array, "m n"],
    *,
    key: Array,
    num_samples: int = 2000,
    kernel_width: float = 0.75,
    ridge: float = 1e-3,
) -> Float[Array, " n"]:
    """LIME attributions: coefficients of a weighted linear fit on "feature kept" indicators.

    Perturbation ``z ~ Bernoulli(1/2)^n`` keeps ``x_i`` where ``z_i = 1`` and takes the value of
    a random background row elsewhere; the fit weights ``exp(-d^2 / width^2)`` with
    ``d = 1 - |z| / n``; the returned coefficients are the attributions.

    Args:
      model: ``(n,) -> scalar``, traceable.
      x: the explained input.
      background: ``(m, n)`` draws of the inputs that perturbations take values from.
      key: PRNG key.
      num_samples: perturbations.
      kernel_width: width of the proximity kernel.
      ridge: ridge penalty on the coefficients (not the intercept).

    Returns:
      ``(n,)`` coefficients.

    Examples:
      >>> import jax, jax.numpy as jnp
      >>> f = lambda x: 2.0 * x[0] - x[1]
      >>> bg = jnp.zeros((1, 2))
      >>> phi = lime_values(f, jnp.ones(2), bg, key=jax.random.key(0), num_samples=200)
      >>> [round(float(p), 2) for p in phi]
      [2.0, -1.0]
    """
    check_key("key", key)
    x = jnp.asarray(x)
    background = jnp.asarray(background)
    if x.ndim != 1:
        raise ValueError(f"x has shape {x.shape}; expected (n,)")
    if background.ndim != 2 or background.shape[1] != x.shape[0]:
        raise ValueError(f"background has shape {background.shape}; expected (m, {x.shape[0]})")
    check_finite("x", x)
    check_positive("kernel_width", kernel_width)
    check_positive("ridge", ridge, allow_zero=True)
    if int(num_samples) <= x.shape[0] + 1:
        raise ValueError(f"num_samples={num_samples}; expected more than n + 1 = {x.shape[0] + 1}")
    return _lime(model, x, background, key, int(num_samples), kernel_width, ridge)
