"""Adversarial bandits: EXP3-IX and the empirical-Bernstein EXP3 used by the CCE learners.

Both are exponential weights on importance-weighted loss estimates with implicit exploration
(IX, Neu 2015): ``p_t = softmax(-eta_t L_t)`` over the valid arms and, after playing ``a_t`` and
seeing ``l_t in [0, 1]``,

.. math:: \\hat\\ell_t(a) = \\frac{\\mathbb 1[a = a_t]\\,(\\ell_t - c_t)}{p_t(a) + \\gamma_t},
   \\qquad \\gamma_t = \\eta_t / 2.

* EXP3-IX: ``c_t = 0`` and ``eta_t = sqrt(2 log A / (A t))``; regret
  ``O(sqrt(A T log A))`` whatever the losses.
* Empirical-Bernstein EXP3 (:func:`bernstein_exp3`): ``c_t`` is the running mean of the observed
  losses (a common shift leaves ``p_t`` unchanged, so the estimator stays unbiased up to IX) and
  the learning rate adapts to the observed second moment of the centred estimates,
  ``eta_t = min(1, sqrt(log A / (A + V_t)))`` with
  ``V_t = sum_{s<t} (l_s - c_s)^2 / (p_s(a_s) + gamma_s)``, whose mean is
  ``sum_s sum_a Var``-like: ``A`` times the per-round empirical variance. The regret is then
  ``O(sqrt(V_T log A) + A log A)`` — small when the losses vary little — and
  :func:`bernstein_regret_bound` turns the *observed* ``V_T`` into a high-probability certificate
  ``2 sqrt(V_T iota) + 2 A iota`` with ``iota = log(A / delta)`` (constants ours).

  Limitation: the certificate is checked on i.i.d. losses only and is *not* valid on
  non-stationary sequences. IX's bias is optimistic (it under-estimates a loss) only for
  non-negative estimates; after centring, an arm whose loss falls below the running mean has
  negative estimates whose gain IX under-estimates by ``p / (p + gamma)``. An arm that looked
  bad early keeps a tiny probability and its later gains are never credited: with 8 arms at 0.5
  and one at 1.0 for 200 rounds then 0.2, T = 4000, the regret reaches ~1000 against a
  certificate of ~80-105. Clipping ``eta |l_hat| <= 1`` does not help (it holds there already).

The bandits are ``(init, update)`` pairs with ``NamedTuple`` states (like optax) and a ``probs``
function; arms beyond ``num_arms`` can be masked so players with different ``A_i`` share arrays.

References:
    Auer, Cesa-Bianchi, Freund, Schapire, "The nonstochastic multiarmed bandit problem", 2002.
    Neu, "Explore no more: improved high-probability regret bounds for non-stochastic bandits",
    NeurIPS 2015.
    Audibert, Munos, Szepesvari, "Exploration-exploitation tradeoff using variance estimates in
    multi-armed bandits", 2009 (empirical Bernstein bounds).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from jaxpapers.core.checks import (
    check_finite,
    check_key,
    check_positive,
    check_range,
    check_shape,
    is_concrete,
)


class BanditState(NamedTuple):
    """State of one bandit.

    Attributes:
      scores: ``[A]`` cumulative (centred) importance-weighted loss estimates.
      center: running mean of the observed losses (0 for EXP3-IX's estimator).
      variance: ``V_t``, the sum of squared centred importance-weighted observations.
      count: rounds played.
    """

    scores: Float[Array, " A"]
    center: Float[Array, ""]
    variance: Float[Array, ""]
    count: Float[Array, ""]


class Bandit(NamedTuple):
    """An adversarial bandit as pure functions (``variance_adaptive`` selects the algorithm)."""

    init: Callable[[int], BanditState]
    probs: Callable[[BanditState, Array], Array]
    update: Callable[[BanditState, Array, Array, Array], BanditState]


def _init(num_arms: int, dtype=jnp.float32) -> BanditState:
    z = jnp.zeros((), dtype)
    return BanditState(jnp.zeros((num_arms,), dtype), z, z, z)


def _learning_rate(state: BanditState, num_valid, variance_adaptive):
    """``variance_adaptive`` may be a traced bool, so one compiled learner serves both bandits."""
    logk = jnp.log(jnp.maximum(num_valid, 2.0))
    adaptive = jnp.minimum(1.0, jnp.sqrt(logk / (num_valid + state.variance)))
    plain = jnp.sqrt(2.0 * logk / (num_valid * (state.count + 1.0)))
    return jnp.where(variance_adaptive, adaptive, plain)


def _probs(state: BanditState, mask, *, variance_adaptive):
    eta = _learning_rate(state, mask.sum(), variance_adaptive)
    logits = jnp.where(mask, -eta * (state.scores - state.scores.min()), -jnp.inf)
    return jax.nn.softmax(logits)


def _update(state: BanditState, arm, loss, mask, *, variance_adaptive) -> BanditState:
    k = mask.sum()
    p = _probs(state, mask, variance_adaptive=variance_adaptive)
    eta = _learning_rate(state, k, variance_adaptive)
    gamma = eta / 2.0
    center = jnp.where(variance_adaptive, state.center, 0.0)
    dev = loss - center
    est = dev / (p[arm] + gamma)
    scores = state.scores.at[arm].add(est)
    count = state.count + 1.0
    new_center = state.center + (loss - state.center) / count
    return BanditState(scores, new_center, state.variance + dev * est, count)


def make_bandit(variance_adaptive) -> Bandit:
    """The bandit with ``variance_adaptive`` (a bool, possibly traced) selecting the algorithm."""
    return Bandit(
        _init,
        partial(_probs, variance_adaptive=variance_adaptive),
        partial(_update, variance_adaptive=variance_adaptive),
    )


def exp3_ix() -> Bandit:
    """EXP3 with implicit exploration (the baseline bandit).

    Examples:
        >>> import jax.numpy as jnp
        >>> b = exp3_ix()
        >>> s = b.init(3)
        >>> b.probs(s, jnp.array([True, True, False])).tolist()
        [0.5, 0.5, 0.0]
    """
    return make_bandit(False)


def bernstein_exp3() -> Bandit:
    """EXP3 with a centred estimator and an empirical-variance learning rate (see module doc).

    Examples:
        >>> import jax.numpy as jnp
        >>> b = bernstein_exp3()
        >>> s = b.update(b.init(2), 0, jnp.asarray(0.3), jnp.array([True, True]))
        >>> float(s.center), float(s.count)
        (0.30000001192092896, 1.0)
    """
    return make_bandit(True)


def bernstein_regret_bound(state: BanditState, num_arms, *, delta: float = 0.1):
    """High-probability empirical-variance regret certificate ``2 sqrt(V iota) + 2 A iota``."""
    check_range("num_arms", num_arms, 1.0)  # a count, possibly a traced float (mask sum)
    check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    iota = jnp.log(num_arms / delta)
    return 2.0 * jnp.sqrt(state.variance * iota) + 2.0 * num_arms * iota


class BanditRun(NamedTuple):
    """Result of :func:`run_bandit`.

    Attributes:
      regret: ``[T]`` cumulative expected regret against the best fixed arm in hindsight.
      probs: ``[T, A]`` the played distributions.
      state: the final bandit state.
    """

    regret: Float[Array, " T"]
    probs: Float[Array, "T A"]
    state: BanditState


@jax.jit
def _run(losses, key, variance_adaptive):
    bandit = make_bandit(variance_adaptive)
    A = losses.shape[1]
    mask = jnp.ones((A,), bool)

    def step(state, xs):
        loss_t, k = xs
        p = bandit.probs(state, mask)
        arm = jax.random.choice(k, A, p=p)
        return bandit.update(state, arm, loss_t[arm], mask), p

    keys = jax.random.split(key, losses.shape[0])
    state, probs = jax.lax.scan(step, _init(A, losses.dtype), (losses, keys))
    expected = jnp.cumsum(jnp.sum(probs * losses, -1))
    best = jnp.min(jnp.cumsum(losses, 0), axis=-1)
    return BanditRun(expected - best, probs, state)


def run_bandit(
    losses: Float[Array, "T A"], *, key: PRNGKeyArray, variance_adaptive: bool = True
) -> BanditRun:
    """Run a bandit on an oblivious loss sequence ``losses`` ``[T, A]`` in ``[0, 1]``.

    Args:
      losses: the loss of every arm at every round (only the played one is revealed).
      key: PRNG key for the arm draws.
      variance_adaptive: ``True`` for :func:`bernstein_exp3`, ``False`` for :func:`exp3_ix`.

    Returns:
      :class:`BanditRun` with the pseudo-regret curve (expected over the algorithm's draws).

    Examples:
        >>> import jax, jax.numpy as jnp
        >>> losses = jnp.tile(jnp.array([0.4, 0.6]), (500, 1))
        >>> run = run_bandit(losses, key=jax.random.key(0))
        >>> bool(run.regret[-1] < 0.1 * 500)
        True
    """
    check_key("key", key)
    check_shape("losses", losses, (None, None))
    check_finite("losses", losses)
    check_positive("losses.shape[1]", losses.shape[1])
    if is_concrete(losses):
        arr = np.asarray(losses)
        if arr.size and (arr.min() < 0 or arr.max() > 1):
            raise ValueError(
                f"losses of shape {arr.shape} lie in [{arr.min():.4g}, {arr.max():.4g}]; "
                "expected [0, 1]"
            )
    return _run(jnp.asarray(losses), key, jnp.asarray(variance_adaptive))
