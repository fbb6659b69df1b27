"""Contextual bandits (H = 1): EXP3 per context, on exact or unary-encoded losses."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_finite, check_positive, is_concrete
from jaxpapers.ldp_rl._mechanisms import (
    unary_debias,
    unary_encode_from_uniforms,
    unary_noise_variance,
)
from jaxpapers.ldp_rl._sampling import inverse_cdf


class ContextualBandit(eqx.Module):
    """S contexts drawn i.i.d. from ``context_probs``; Bernoulli rewards of mean ``means[s, a]``.

    Attributes:
        context_probs: ``[S]`` distribution of contexts.
        means: ``[S, A]`` mean rewards in ``[0, 1]``.
    """

    context_probs: Float[Array, " S"]
    means: Float[Array, "S A"]

    def __check_init__(self) -> None:
        if self.context_probs.ndim != 1 or self.means.shape[:1] != self.context_probs.shape:
            raise ValueError(
                f"context_probs {self.context_probs.shape} and means {self.means.shape}; "
                "expected shapes [S] and [S, A]"
            )
        if is_concrete(self.means):
            m, r = np.asarray(self.means), np.asarray(self.context_probs)
            if np.any(m < 0) or np.any(m > 1) or not np.all(np.isfinite(m)):
                raise ValueError(f"means of shape {m.shape}; expected values in [0, 1]")
            if np.any(r < 0) or abs(r.sum() - 1) > 1e-5:
                raise ValueError(f"context_probs sum to {r.sum()!r}; expected a distribution")


def random_contextual_bandit(key: jax.Array, num_contexts: int, num_arms: int) -> ContextualBandit:
    """Uniform contexts; arm means uniform in ``[0.25, 0.75]``, one best arm per context + 0.2.

    Examples:
        >>> import jax
        >>> from jaxpapers.ldp_rl import random_contextual_bandit
        >>> random_contextual_bandit(jax.random.key(0), 3, 4).means.shape
        (3, 4)
    """
    k1, k2 = jax.random.split(key)
    means = jax.random.uniform(k1, (num_contexts, num_arms), minval=0.25, maxval=0.75)
    best = jax.random.randint(k2, (num_contexts,), 0, num_arms)
    means = jnp.clip(means + 0.2 * jax.nn.one_hot(best, num_arms), 0.0, 1.0)
    return ContextualBandit(jnp.full((num_contexts,), 1.0 / num_contexts), means)


class Exp3Params(NamedTuple):
    """Learning rate ``eta`` and uniform exploration ``gamma`` of EXP3."""

    eta: Float[Array, ""]
    gamma: Float[Array, ""]


def exp3_params(
    num_contexts: int, num_arms: int, num_rounds: int, epsilon: float | None
) -> Exp3Params:
    r"""Tuning from the bound :math:`S\log A/\eta + \eta K (A + S\sigma^2 A^2/\gamma) + \gamma K`.

    ``sigma^2`` is the variance of one debiased unary bit (0 without privacy, where
    ``gamma = 0``). ``gamma`` is the implicit-exploration offset of the estimates. The
    constants 3 (on ``eta``) and 0.3 (on ``gamma``) were picked on a 4-context, 4-arm bandit
    over K = 4000 rounds; the bound's own constants learn far too slowly there.
    """
    S, A, K = num_contexts, num_arms, num_rounds
    logA = np.log(max(A, 2))
    var = 0.0 if epsilon is None else float(unary_noise_variance(epsilon))
    gamma = 0.0 if var == 0 else min(0.5, (S * S * logA * var * A * A / K) ** (1 / 3))
    noise = 0.0 if var == 0 else S * var * A * A / gamma
    eta = np.sqrt(S * logA / (K * (A + noise)))
    return Exp3Params(jnp.asarray(3 * eta, jnp.float32), jnp.asarray(0.3 * gamma, jnp.float32))


class BanditResult(NamedTuple):
    """Output of :func:`exp3_ldp`.

    Attributes:
        regret: ``[K]`` cumulative pseudo-regret after each round.
        loss_estimates: ``[S, A]`` final cumulative loss estimates.
        finite: whether every estimate stayed finite (the scan freezes once one is not).
    """

    regret: Float[Array, " K"]
    loss_estimates: Float[Array, "S A"]
    finite: Array


def exp3_policy(loss_estimates: Float[Array, "S A"], params: Exp3Params) -> Float[Array, "S A"]:
    r"""EXP3's policy per context: :math:`\mathrm{softmax}(-\eta \hat L_s)`."""
    return jax.nn.softmax(-params.eta * loss_estimates, axis=-1)


def importance_weighted_losses(
    message: Float[Array, " D"], policy: Float[Array, "S A"], gamma: float | Array = 0.0
) -> Float[Array, "S A"]:
    r"""Loss estimates :math:`\hat\ell[s, a] = z[s, a] / (\pi(a|s) + \gamma)` from a message.

    ``message`` has ``S*A + 1`` entries: the one-hot of ``s*A + a`` when the played arm's loss
    was 1, of the spare last entry when it was 0. With the exact one-hot and ``gamma = 0`` its
    expectation is :math:`\rho_s \mu^{\ell}(s, a)` for every pair (a test enumerates it);
    ``gamma > 0`` (EXP3-IX) biases it down and bounds the privacy noise by
    :math:`\sigma/\gamma`.
    """
    S, A = policy.shape
    return message[: S * A].reshape(S, A) / (policy + gamma)


@partial(jax.jit, static_argnames=("num_rounds", "private"))
def _exp3_run(problem, params, epsilon, key, num_rounds, private):
    S, A = problem.means.shape
    best = problem.means.max(-1)

    def step(carry, k):
        L, finite = carry
        # one draw of all the round's randomness (a single threefry call per round)
        u = jax.random.uniform(k, (3 + S * A + 1,))
        pi = exp3_policy(L, params)
        s = inverse_cdf(problem.context_probs, u[0])
        a = inverse_cdf(pi[s], u[1])
        loss = (u[2] >= problem.means[s, a]).astype(jnp.int32)
        index = jnp.where(loss == 1, s * A + a, S * A)
        if private:
            bits = unary_encode_from_uniforms(index, S * A + 1, epsilon, u[3:])
            msg = unary_debias(bits, epsilon)
        else:
            msg = jax.nn.one_hot(index, S * A + 1)
        new_L = L + importance_weighted_losses(msg, pi, params.gamma)
        ok = finite & jnp.all(jnp.isfinite(new_L))
        new_L = jnp.where(ok, new_L, L)
        inst = jnp.sum(problem.context_probs * (best - jnp.sum(pi * problem.means, -1)))
        return (new_L, ok), inst

    keys = jax.random.split(key, num_rounds)
    (L, finite), inst = jax.lax.scan(step, (jnp.zeros((S, A)), jnp.array(True)), keys)
    return BanditResult(jnp.cumsum(inst), L, finite)


def exp3_ldp(
    problem: ContextualBandit,
    num_rounds: int,
    epsilon: float | None,
    *,
    key: jax.Array,
    params: Exp3Params | None = None,
) -> BanditResult:
    r"""EXP3 per context on unary-encoded losses (``epsilon=None``: non-private EXP3).

    Round :math:`k`: the learner sends :math:`\pi_k(\cdot|s)` for every context; the user draws
    :math:`s \sim \rho`, :math:`a \sim \pi_k(\cdot|s)`, a Bernoulli reward, and releases the unary
    encoding of the one-hot of ``(s, a)`` if the loss is 1 (of a spare symbol otherwise), which
    is :math:`\epsilon`-LDP for the whole triple. The learner debiases it and adds importance
    weighted estimates to every context's cumulative losses.

    Args:
        problem: the bandit.
        num_rounds: K.
        epsilon: privacy level > 0, or ``None`` for the non-private baseline.
        key: PRNG key.
        params: EXP3 tuning; default :func:`exp3_params`.

    Returns:
        :class:`BanditResult` with the cumulative pseudo-regret.

    Examples:
        >>> import jax
        >>> from jaxpapers.ldp_rl import exp3_ldp, random_contextual_bandit
        >>> bandit = random_contextual_bandit(jax.random.key(0), 2, 3)
        >>> out = exp3_ldp(bandit, 100, 1.0, key=jax.random.key(1))
        >>> out.regret.shape, bool(out.finite)
        ((100,), True)
    """
    if epsilon is not None:
        check_positive("epsilon", epsilon)
    if int(num_rounds) < 1:
        raise ValueError(f"num_rounds={num_rounds}; expected >= 1")
    check_finite("problem.means", problem.means)
    S, A = problem.means.shape
    if params is None:
        params = exp3_params(S, A, int(num_rounds), epsilon)
    eps = jnp.asarray(1.0 if epsilon is None else epsilon, jnp.float32)
    return _exp3_run(problem, params, eps, key, int(num_rounds), epsilon is not None)
