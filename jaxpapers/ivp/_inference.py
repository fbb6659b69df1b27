r"""Exact Bayesian inference over a discretised hypothesis space and expected information gain.

Hypotheses are pairs :math:`(h, k)` of a library profile :math:`r_h` and a concealment level
:math:`c_k` from a grid. A persona that hears question :math:`q` after earlier questions of mean
explicitness :math:`s` (its suspicion) answers desirably with probability
:math:`p_k = c_k \min(1, e_q + \gamma s)`, otherwise honestly:

.. math:: P(a \mid q, h, k) = (1 - p_k)\, \pi^{\mathrm{hon}}_{q,h}(a)
   + p_k\, \pi^{\mathrm{des}}_q(a).

The posterior is updated by Bayes' rule in log space; the strategic prober asks the question
with the largest mutual information between the answer and the *profile* (the concealment level
is a nuisance, marginalised):

.. math:: \mathrm{IG}(q) = \mathrm{H}\Big[\sum_{h,k} w_{hk} P(\cdot \mid q,h,k)\Big]
   - \sum_h w_h\, \mathrm{H}\Big[\sum_k w_{k \mid h} P(\cdot \mid q,h,k)\Big].
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_int, check_ndim, check_range, check_shape, is_concrete

_TINY = 1e-30


def conceal_prob(
    explicitness: Float[Array, "*q"],
    grid: Float[Array, " k"],
    suspicion: Float[Array, ""] | float,
    gamma: float,
) -> Float[Array, "*q k"]:
    """:math:`p = c_k \\min(1, e_q + \\gamma s)`: probability of a socially desirable answer."""
    check_ndim("grid", grid, 1)
    check_range("grid", grid, 0.0, 1.0)
    check_range("explicitness", explicitness, 0.0, 1.0)
    check_range("suspicion", suspicion, 0.0)
    check_range("gamma", gamma, 0.0)
    urge = jnp.minimum(1.0, explicitness + gamma * suspicion)
    return urge[..., None] * grid.reshape((1,) * urge.ndim + grid.shape)


def answer_likelihood(
    honest: Float[Array, "*q h answers"],
    desirable: Float[Array, "*q answers"],
    explicitness: Float[Array, "*q"],
    grid: Float[Array, " k"],
    suspicion: Float[Array, ""] | float,
    gamma: float,
) -> Float[Array, "*q h k answers"]:
    """:math:`P(a \\mid q, h, k)` for every question, profile and concealment level."""
    check_ndim("honest", honest, range(2, 8))
    check_shape("desirable", desirable, (*honest.shape[:-2], honest.shape[-1]))
    check_shape("explicitness", explicitness, honest.shape[:-2])
    p = conceal_prob(explicitness, grid, suspicion, gamma)[..., None, :, None]
    return (1.0 - p) * honest[..., :, None, :] + p * desirable[..., None, None, :]


def update_posterior(
    log_post: Float[Array, "h k"], likelihood: Float[Array, "h k answers"], answer: Int[Array, ""]
) -> Float[Array, "h k"]:
    """Bayes' rule: ``log_post + log P(answer | h, k)``, renormalised (log-sum-exp = 0)."""
    check_ndim("log_post", log_post, 2)
    check_shape("likelihood", likelihood, (*log_post.shape, None))
    check_int("answer", answer, minimum=0)
    if is_concrete(answer) and int(np.asarray(answer)) >= likelihood.shape[-1]:
        raise ValueError(
            f"answer={int(np.asarray(answer))}; expected 0..{likelihood.shape[-1] - 1}"
        )
    lp = log_post + jnp.log(jnp.maximum(jnp.take(likelihood, answer, axis=-1), _TINY))
    return lp - jax.scipy.special.logsumexp(lp)


def _entropy(p: jax.Array) -> jax.Array:
    return -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.maximum(p, _TINY)), 0.0), axis=-1)


def information_gain(
    log_post: Float[Array, "h k"], likelihood: Float[Array, "q h k answers"]
) -> Float[Array, " q"]:
    """Expected information (nats) the answer to each question carries about the profile."""
    check_ndim("log_post", log_post, 2)
    check_shape("likelihood", likelihood, (None, *log_post.shape, None))
    w = jnp.exp(log_post)
    wh = w.sum(-1)
    cond = jnp.einsum("hk,qhka->qha", w, likelihood) / jnp.maximum(wh, _TINY)[None, :, None]
    marginal = jnp.einsum("h,qha->qa", wh, cond)
    return _entropy(marginal) - jnp.einsum("h,qh->q", wh, _entropy(cond))


def profile_posterior_mean(
    log_post: Float[Array, "h k"], library: Float[Array, "h values"]
) -> Float[Array, " values"]:
    """The recovered profile: the posterior mean :math:`\\sum_h w_h r_h`."""
    check_ndim("log_post", log_post, 2)
    check_shape("library", library, (log_post.shape[0], None))
    return jnp.exp(log_post).sum(-1) @ library
