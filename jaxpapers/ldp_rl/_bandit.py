"""Contextual bandits (H = 1): EXP3 per context, on exact or unary-encoded losses."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import (
    check_dtype,
    check_finite,
    check_int,
    check_key,
    check_ndim,
    check_positive,
    check_range,
    check_shape,
    is_concrete,
)
from jaxpapers.core.fit import all_finite, keep_where
from jaxpapers.ldp_rl._mechanisms import (
    unary_debias,
    unary_encode_from_uniforms,
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


def random_contextual_bandit(
    num_contexts: int, num_arms: int, *, key: jax.Array
) -> ContextualBandit:
    """Uniform contexts; arm means uniform in ``[0.25, 0.75]``, one best arm per context + 0.2.

    Examples:
        >>> import jax
        >>> from jaxpapers.ldp_rl import random_contextual_bandit
        >>> random_contextual_bandit(3, 4, key=jax.random.key(0)).means.shape
        (3, 4)
    """
    check_key("key", key)
    check_int("num_contexts", num_contexts, minimum=1)
    check_int("num_arms", num_arms, minimum=1)
    k1, k2 = jax.random.split(key)
    means = jax.random.uniform(k1, (num_contexts, num_arms), minval=0.25, maxval=0.75)
    best = jax.random.randint(k2, (num_contexts,), 0, num_arms)
    means = jnp.clip(means + 0.2 * jax.nn.one_hot(best, num_arms), 0.0, 1.0)
    return ContextualBandit(jnp.full((num_contexts,), 1.0 / num_contexts), means)


class Exp3Params(NamedTuple):
    """Learning rate ``eta`` and uniform-exploration share ``gamma`` of EXP3."""

    eta: Float[Array, ""]
    gamma: Float[Array, ""]


def _unary_constants(epsilon: float | None) -> tuple[float, float]:
    """``(sigma^2, c)``: the variance of a debiased unary bit whose true value is 0 and the
    magnitude ``(1 - p) / (2p - 1)`` of its negative value (both 0 without privacy)."""
    if epsilon is None:
        return 0.0, 0.0
    check_positive("epsilon", epsilon)
    p = 1.0 / (1.0 + float(np.exp(-0.5 * float(epsilon))))  # NumPy float64: usable under jit
    return p * (1.0 - p) / (2.0 * p - 1.0) ** 2, (1.0 - p) / (2.0 * p - 1.0)


def exp3_regret_bound(
    num_contexts: int, num_arms: int, num_rounds: int, epsilon: float | None
) -> float:
    r"""The expected-regret bound :math:`2\sqrt{S A K \log A\,(1 + S\sigma^2 + c)}` of
    :func:`exp3_ldp` tuned by :func:`exp3_params` (derivation in the package docstring).

    Examples:
        >>> from jaxpapers.ldp_rl import exp3_regret_bound
        >>> round(exp3_regret_bound(4, 4, 400, None) / exp3_regret_bound(4, 4, 100, None), 6)
        2.0
    """
    check_int("num_contexts", num_contexts, minimum=1)
    check_int("num_arms", num_arms, minimum=1)
    check_int("num_rounds", num_rounds, minimum=1)
    S, A, K = num_contexts, num_arms, num_rounds
    var, c = _unary_constants(epsilon)
    return float(2.0 * np.sqrt(S * A * K * np.log(max(A, 2)) * (1.0 + S * var + c)))


def exp3_params(
    num_contexts: int, num_arms: int, num_rounds: int, epsilon: float | None
) -> Exp3Params:
    r"""The tuning that minimises the bound :math:`S\log A/\eta + \eta K A (1 + S\sigma^2 + c)`.

    ``sigma^2`` is the variance of one debiased unary bit and ``c = (1-p)/(2p-1)`` the size of
    its negative value (both 0 without privacy). ``gamma = eta A c`` keeps every probability at
    least ``gamma / A``, so ``eta * loss_estimate >= -1`` (the condition of EXP3's exponential
    inequality). Both scale as :math:`K^{-1/2}`; no constant is tuned on a test bed.

    Examples:
        >>> from jaxpapers.ldp_rl import exp3_params
        >>> p1, p4 = exp3_params(4, 4, 1000, 1.0), exp3_params(4, 4, 4000, 1.0)
        >>> round(float(p4.eta / p1.eta), 4), round(float(p4.gamma / p1.gamma), 4)
        (0.5, 0.5)
    """
    S, A, K = num_contexts, num_arms, num_rounds
    if S < 1 or A < 1 or K < 1:
        raise ValueError(f"num_contexts={S}, num_arms={A}, num_rounds={K}; expected >= 1 each")
    var, c = _unary_constants(epsilon)
    eta = float(np.sqrt(S * np.log(max(A, 2)) / (K * A * (1.0 + S * var + c))))
    gamma = min(0.5, eta * A * c)
    return Exp3Params(jnp.asarray(eta, jnp.float32), jnp.asarray(gamma, jnp.float32))


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
    r"""EXP3's policy per context, :math:`(1-\gamma)\,\mathrm{softmax}(-\eta \hat L_s)
    + \gamma/A`."""
    check_ndim("loss_estimates", loss_estimates, 2)
    check_range("params.eta", params.eta, 0.0)
    check_range("params.gamma", params.gamma, 0.0, 1.0)
    A = loss_estimates.shape[-1]
    weights = jax.nn.softmax(-params.eta * loss_estimates, axis=-1)
    return (1.0 - params.gamma) * weights + params.gamma / A


def importance_weighted_losses(
    message: Float[Array, " D"], policy: Float[Array, "S A"], arms: Int[Array, " S"]
) -> Float[Array, "S A"]:
    r"""Loss estimates :math:`\hat\ell[s, a] = 1[a = b_s]\, z[s] / \pi(a|s)` from one message.

    ``arms[s] = b_s`` is the arm the learner drew from ``policy[s]`` for context ``s`` (the
    user plays it if its context is ``s``); ``message`` has ``S + 1`` entries: the one-hot of
    ``s`` when the loss was 1, of the spare last entry when it was 0 (or its debiased unary
    encoding). With ``E[z[s] | b] = \rho_s \ell(s, b_s)`` the estimate is unbiased for
    :math:`\rho_s \ell(s, a)` for every pair, and the noise of ``z[s]`` reaches only the drawn
    arm, so :math:`\sum_a \pi(a|s) E[\hat\ell[s,a]^2] = A\, E[z[s]^2]` (tests enumerate both).
    """
    check_ndim("policy", policy, 2)
    S, A = policy.shape
    check_shape("message", message, (S + 1,))
    check_shape("arms", arms, (S,))
    check_dtype("arms", arms, "integer")
    check_range("arms", arms, 0, A - 1)
    return jax.nn.one_hot(arms, A) * (message[:S] / policy[jnp.arange(S), arms])[:, None]


@partial(jax.jit, static_argnames=("num_rounds", "private", "record_every"))
def _exp3_run(problem, params, epsilon, key, num_rounds, private, record_every):
    S, A = problem.means.shape
    best = problem.means.max(-1)

    def step(carry, k):
        L, finite = carry
        # one draw of all the round's randomness (a single threefry call per round)
        u = jax.random.uniform(k, (2 + S + S + 1,))
        pi = exp3_policy(L, params)
        arms = jax.vmap(inverse_cdf)(pi, u[2 : 2 + S])  # the learner's draw b_s per context
        s = inverse_cdf(problem.context_probs, u[0])
        loss = (u[1] >= problem.means[s, arms[s]]).astype(jnp.int32)
        index = jnp.where(loss == 1, s, S)
        if private:
            bits = unary_encode_from_uniforms(index, S + 1, epsilon, u[2 + S :])
            msg = unary_debias(bits, epsilon)
        else:
            msg = jax.nn.one_hot(index, S + 1)
        new_L = L + importance_weighted_losses(msg, pi, arms)
        ok = finite & all_finite(new_L)  # an online learner: freeze on non-finite estimates
        new_L = keep_where(ok, new_L, L)
        inst = jnp.sum(problem.context_probs * (best - jnp.sum(pi * problem.means, -1)))
        return (new_L, ok), inst

    def block(carry, block_keys):
        L, finite, total = carry
        (L, finite), inst = jax.lax.scan(step, (L, finite), block_keys)
        curve = total + jnp.cumsum(inst)
        return (L, finite, curve[-1]), curve[-1] if record_every > 1 else curve

    # round k's randomness is fold_in(key, k): the first K rounds do not depend on num_rounds,
    # so a longer run read after K rounds is exactly the run of horizon K (same params)
    keys = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, jnp.arange(num_rounds))
    keys = keys.reshape(num_rounds // record_every, record_every)
    init = (jnp.zeros((S, A)), jnp.array(True), jnp.zeros(()))
    (L, finite, _), regret = jax.lax.scan(block, init, keys)
    return BanditResult(regret.reshape(-1), L, finite)


def exp3_ldp(
    problem: ContextualBandit,
    num_rounds: int,
    epsilon: float | None,
    *,
    key: jax.Array,
    params: Exp3Params | None = None,
    record_every: int = 1,
) -> BanditResult:
    r"""EXP3 per context on unary-encoded losses (``epsilon=None``: non-private EXP3).

    Round :math:`k`: the learner draws an arm :math:`b_s \sim \pi_k(\cdot|s)` for every
    context with its own coins and sends the deterministic policy :math:`s \mapsto b_s`; the
    user draws :math:`s \sim \rho`, plays :math:`b_s`, draws a Bernoulli reward, and releases
    the unary encoding of the one-hot of ``s`` if the loss is 1 (of a spare symbol otherwise)
    among :math:`S + 1` symbols. The played arm is a function of the context and the public
    policy, so the release is :math:`\epsilon`-LDP for the whole triple (context, arm,
    reward). The learner debiases it and adds :func:`importance_weighted_losses` to every
    context's cumulative losses; the regret is the pseudo-regret of :math:`\pi_k` (the
    expectation over the learner's draws).

    Args:
        problem: the bandit.
        num_rounds: K.
        epsilon: privacy level > 0, or ``None`` for the non-private baseline.
        key: PRNG key.
        params: EXP3 tuning; default :func:`exp3_params`.
        record_every: keep the cumulative regret only after every ``record_every`` rounds
            (a divisor of ``num_rounds``; long runs then store ``K / record_every`` numbers).

    Returns:
        :class:`BanditResult` with the cumulative pseudo-regret (``[K // record_every]``).

    Examples:
        >>> import jax
        >>> from jaxpapers.ldp_rl import exp3_ldp, random_contextual_bandit
        >>> bandit = random_contextual_bandit(2, 3, key=jax.random.key(0))
        >>> out = exp3_ldp(bandit, 100, 1.0, key=jax.random.key(1))
        >>> out.regret.shape, bool(out.finite)
        ((100,), True)
    """
    check_key("key", key)
    if epsilon is not None:
        check_positive("epsilon", epsilon)
    if int(num_rounds) < 1:
        raise ValueError(f"num_rounds={num_rounds}; expected >= 1")
    if int(record_every) < 1 or int(num_rounds) % int(record_every):
        raise ValueError(
            f"record_every={record_every}; expected a positive divisor of num_rounds={num_rounds}"
        )
    check_finite("problem.means", problem.means)
    S, A = problem.means.shape
    if params is None:
        params = exp3_params(S, A, int(num_rounds), epsilon)
    eps = jnp.asarray(1.0 if epsilon is None else epsilon, jnp.float32)
    return _exp3_run(
        problem, params, eps, key, int(num_rounds), epsilon is not None, int(record_every)
    )
