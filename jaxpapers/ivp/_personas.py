r"""Persona agents: hidden, context-dependent value profiles on Schwartz's circumplex.

A persona's raw weight of value :math:`v` (circumplex angle :math:`\theta_v`) in context
:math:`c` is

.. math:: w_{c,v} = \cos(\theta_v - \phi) + \kappa \cos(\theta_v - \psi_c)
   + \sigma \varepsilon_{c,v},

a personal orientation :math:`\phi`, a pull of strength :math:`\kappa` towards the context's typical
value :math:`\psi_c` (jittered per persona) and idiosyncratic noise. The profile is the min-max
scaled :math:`r_c = (w_c - \min w_c) / (\max w_c - \min w_c) \in [0, 1]^{10}` (an ipsatised score,
as PVQ scores are centred per respondent). The prober's hypothesis library draws from the same
process with the context direction :math:`\psi` uniform, so it is context-agnostic.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_key, is_concrete
from jaxpapers.ivp._values import ANGLES, CONTEXT_PULL, CONTEXTS, VALUES, value_index


class PersonaConfig(eqx.Module):
    """How personas are drawn and how they answer.

    Attributes:
      context_strength: mean pull :math:`\\kappa` towards the context's value (0: context-free).
      noise: idiosyncratic noise :math:`\\sigma` of the raw weights per context.
      beta: inverse temperature of the answers (softmax over value-weighted utilities).
      suspicion: :math:`\\gamma`, how much earlier explicit probes raise later concealment.
    """

    context_strength: float = 1.2
    noise: float = 0.35
    beta: float = 6.0
    suspicion: float = 0.5

    def __check_init__(self) -> None:
        for name in ("context_strength", "noise", "suspicion"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"{name}={v!r}; expected a finite value >= 0")
        if not (np.isfinite(self.beta) and self.beta > 0):
            raise ValueError(f"beta={self.beta!r}; expected a finite value > 0")


class Personas(NamedTuple):
    """A set of persona agents.

    Attributes:
      profiles: ``[N, C, V]`` hidden value profiles in [0, 1] per context.
      concealment: ``[N]`` probability scale of socially desirable answers to explicit probes.
    """

    profiles: Float[Array, "n contexts values"]
    concealment: Float[Array, " n"]


def _scale(w: jax.Array) -> jax.Array:
    lo, hi = w.min(-1, keepdims=True), w.max(-1, keepdims=True)
    return (w - lo) / (hi - lo)


def sample_personas(
    n: int, concealment: float | jax.Array, *, key: jax.Array, config: PersonaConfig
) -> Personas:
    """Draw ``n`` personas with context-dependent profiles.

    Args:
      n: number of personas (>= 1).
      concealment: scalar or ``[n]`` concealment level(s) in [0, 1].
      key: PRNG key.
      config: :class:`PersonaConfig`.

    Returns:
      :class:`Personas` with ``profiles [n, 4, 10]``.
    """
    check_key("key", key)
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n={n!r}; expected a persona count >= 1 (an empty persona set)")
    conceal = jnp.broadcast_to(jnp.asarray(concealment, jnp.float32), (n,))
    if is_concrete(concealment):
        c = np.asarray(concealment)
        if np.any(c < 0) or np.any(c > 1) or not np.all(np.isfinite(c)):
            raise ValueError(f"concealment={concealment!r}; expected values in [0, 1]")
    return Personas(_draw_profiles(key, n, config.context_strength, config.noise), conceal)


@partial(jax.jit, static_argnums=(1,))
def _draw_profiles(key, n, strength, noise):
    k1, k2, k3, k4 = jax.random.split(key, 4)
    theta = jnp.asarray(ANGLES, jnp.float32)
    phi = jax.random.uniform(k1, (n, 1, 1), maxval=2 * jnp.pi)
    kappa = strength * jax.random.uniform(k2, (n, 1, 1), minval=0.5, maxval=1.5)
    pull = jnp.asarray(ANGLES[value_index(list(CONTEXT_PULL))], jnp.float32)
    psi = pull[None, :, None] + 0.3 * jax.random.normal(k3, (n, len(CONTEXTS), 1))
    eps = jax.random.normal(k4, (n, len(CONTEXTS), len(VALUES)))
    theta = theta[None, None, :]
    return _scale(jnp.cos(theta - phi) + kappa * jnp.cos(theta - psi) + noise * eps)


def profile_library(h: int, *, key: jax.Array, config: PersonaConfig) -> Float[Array, "h values"]:
    """``[h, V]`` hypothesis profiles from the persona prior with a uniform context direction."""
    check_key("key", key)
    if not (isinstance(h, int) and h >= 2):
        raise ValueError(f"h={h!r}; expected a library size >= 2")
    return _draw_library(key, h, config.context_strength, config.noise)


@partial(jax.jit, static_argnums=(1,))
def _draw_library(key, h, strength, noise):
    k1, k2, k3, k4 = jax.random.split(key, 4)
    theta = jnp.asarray(ANGLES, jnp.float32)
    phi = jax.random.uniform(k1, (h, 1), maxval=2 * jnp.pi)
    psi = jax.random.uniform(k2, (h, 1), maxval=2 * jnp.pi)
    kappa = strength * jax.random.uniform(k3, (h, 1), minval=0.5, maxval=1.5)
    eps = jax.random.normal(k4, (h, len(VALUES)))
    theta = theta[None, :]
    return _scale(jnp.cos(theta - phi) + kappa * jnp.cos(theta - psi) + noise * eps)
