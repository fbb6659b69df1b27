"""Episodic tabular RL (H > 1): UCBVI on exact or unary-encoded transition/reward counts."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

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
from jaxpapers.core.mdp import TabularMDP, check_mdp
from jaxpapers.ldp_rl._mechanisms import (
    unary_debias,
    unary_encode_from_uniforms,
    unary_noise_variance,
)
from jaxpapers.ldp_rl._sampling import inverse_cdf


def check_episodic(mdp: TabularMDP, name: str = "mdp") -> None:
    """Raise ``ValueError`` unless ``mdp`` is the episodic problem the learners solve: a
    time-homogeneous single-agent :class:`~jaxpapers.core.mdp.TabularMDP` ``P[S, A, S]`` with
    ``horizon=H``, no discount (``gamma = 1``), Bernoulli reward means ``R`` in ``[0, 1]`` and
    every episode starting in state 0 (values checked when concrete)."""
    check_mdp(mdp, name, discounted=False, time_homogeneous=True, players=False)
    check_range(f"{name}.R", mdp.R, 0.0, 1.0)
    if is_concrete(mdp.gamma) and float(mdp.gamma) != 1.0:
        raise ValueError(
            f"{name}.gamma={float(mdp.gamma)!r}; expected 1 (the undiscounted episodic problem)"
        )
    if is_concrete(mdp.initial) and not np.array_equal(
        np.asarray(mdp.initial), np.eye(mdp.num_states)[0]
    ):
        raise ValueError(
            f"{name}.initial={np.asarray(mdp.initial).tolist()}; expected every episode to start "
            "in state 0 (the one-hot of state 0, TabularMDP's default)"
        )


def random_episodic_mdp(
    num_states: int, num_actions: int, horizon: int, *, key: jax.Array
) -> TabularMDP:
    """Dirichlet(1) transition rows and uniform reward means, horizon ``H``, start state 0.

    Examples:
        >>> import jax
        >>> from jaxpapers.ldp_rl import random_episodic_mdp
        >>> mdp = random_episodic_mdp(3, 2, 4, key=jax.random.key(0))
        >>> mdp.P.shape, mdp.horizon
        ((3, 2, 3), 4)
    """
    check_key("key", key)
    check_int("num_states", num_states, minimum=1)
    check_int("num_actions", num_actions, minimum=1)
    check_int("horizon", horizon, minimum=1)
    kp, kr = jax.random.split(key)
    P = jax.random.dirichlet(kp, jnp.ones(num_states), (num_states, num_actions))
    P = P / P.sum(-1, keepdims=True)
    R = jax.random.uniform(kr, (num_states, num_actions))
    return TabularMDP(P, R, horizon=horizon)


def backward_induction(
    P: Float[Array, "S A S"], R: Float[Array, "S A"], horizon: int, bonus: Array | float = 0.0
) -> tuple[Float[Array, "H S A"], Float[Array, "H S"]]:
    r"""Optimistic :math:`Q_h = \min(H - h, R + b + P V_{h+1})`, :math:`V_h = \max_a Q_h`.

    Returns ``(Q, V)`` of shapes ``[H, S, A]`` and ``[H + 1, S]`` (``V[H] = 0``).
    """
    if jnp.ndim(P) != 3 or jnp.shape(P)[0] != jnp.shape(P)[2]:
        raise ValueError(f"P has shape {jnp.shape(P)}; expected [S, A, S]")
    check_shape("R", R, jnp.shape(P)[:2])
    check_int("horizon", horizon, minimum=1)

    def step(v_next, h):
        q = jnp.minimum(R + bonus + P @ v_next, (horizon - h).astype(R.dtype))
        return q.max(-1), (q, q.max(-1))

    S = R.shape[0]
    _, (Q, V) = jax.lax.scan(step, jnp.zeros(S, R.dtype), jnp.arange(horizon - 1, -1, -1))
    return Q[::-1], jnp.concatenate([V[::-1], jnp.zeros((1, S), R.dtype)])


def policy_value(mdp: TabularMDP, policy: Array) -> Float[Array, ""]:
    """Expected return from state 0 of a deterministic policy ``[H, S]`` (exact; ``mdp`` as in
    :func:`ucbvi_ldp`)."""
    check_episodic(mdp)
    S, A = mdp.R.shape
    check_shape("policy", policy, (None, S))
    check_dtype("policy", policy, "integer")
    check_range("policy", policy, 0, A - 1)

    def step(v_next, pi_h):
        q = mdp.R + mdp.P @ v_next
        return q[jnp.arange(S), pi_h], None

    v, _ = jax.lax.scan(step, jnp.zeros(S, mdp.R.dtype), policy[::-1])
    return v[0]


class RLResult(NamedTuple):
    """Output of :func:`ucbvi_ldp`.

    Attributes:
        regret: ``[K]`` cumulative (exact, expected) regret after each episode.
        counts: ``[S, A, S, 2]`` final (debiased) counts of (s, a, s', reward).
        finite: whether every value stayed finite.
    """

    regret: Float[Array, " K"]
    counts: Float[Array, "S A S 2"]
    finite: Array


def estimated_model(counts: Float[Array, "S A S 2"]) -> tuple[Array, Array, Array]:
    """``(P_hat, R_hat, n)`` from (possibly noisy) counts: negative counts clipped, ``n >= 1``."""
    check_ndim("counts", counts, 4)
    check_shape("counts", counts, (None, None, counts.shape[0], 2))
    check_finite("counts", counts)
    S = counts.shape[0]
    n_sas = jnp.maximum(counts.sum(-1), 0.0)
    n = jnp.maximum(counts.sum((-1, -2)), 1.0)
    mass = n_sas.sum(-1, keepdims=True)
    P_hat = jnp.where(mass > 0, n_sas / jnp.where(mass > 0, mass, 1.0), 1.0 / S)
    R_hat = jnp.clip(counts[..., 1].sum(-1) / n, 0.0, 1.0)
    return P_hat, R_hat, n


@partial(jax.jit, static_argnames=("num_episodes", "private", "horizon", "record_every"))
def _ucbvi_run(
    P, R, epsilon, scales, confidence_episodes, key, num_episodes, private, horizon, record_every
):
    mdp = TabularMDP(P, R, horizon=horizon)
    S, A = R.shape
    H = horizon
    D = S * A * S * 2
    log_term = jnp.log(2.0 * S * A * H * confidence_episodes)
    step_eps = epsilon / H  # H releases per episode compose to epsilon
    sigma = jnp.sqrt(unary_noise_variance(step_eps)) if private else 0.0
    v_star = backward_induction(P, R, H)[1][0, 0]

    def episode(carry, xs):
        counts, finite = carry
        k, key_k = xs
        P_hat, R_hat, n = estimated_model(counts)
        noise = sigma * jnp.sqrt(2.0 * S * H * (k + 1.0) * log_term)
        bonus = scales[0] * H * jnp.sqrt(log_term / n) + scales[1] * H * noise / n
        Q, _ = backward_induction(P_hat, R_hat, H, bonus)
        policy = Q.argmax(-1)  # [H, S]

        def step(s, xk):
            h, u = xk
            a = policy[h, s]
            r = (u[0] < R[s, a]).astype(jnp.int32)
            s2 = inverse_cdf(P[s, a], u[1])
            index = ((s * A + a) * S + s2) * 2 + r
            if private:
                bits = unary_encode_from_uniforms(index, D, step_eps, u[2:])
                msg = unary_debias(bits, step_eps)
            else:
                msg = jax.nn.one_hot(index, D)
            return s2, msg

        # all of the episode's randomness in one draw (the same draws with and without privacy)
        uniforms = jax.random.uniform(key_k, (H, 2 + D))
        _, msgs = jax.lax.scan(step, jnp.array(0), (jnp.arange(H), uniforms))
        new_counts = counts + msgs.sum(0).reshape(S, A, S, 2)
        ok = finite & all_finite(new_counts)  # an online learner: freeze on non-finite counts
        return (keep_where(ok, new_counts, counts), ok), v_star - policy_value(mdp, policy)

    def block(carry, xs):
        counts, finite, total = carry
        (counts, finite), gaps = jax.lax.scan(episode, (counts, finite), xs)
        curve = total + jnp.cumsum(gaps)
        return (counts, finite, curve[-1]), curve[-1] if record_every > 1 else curve

    blocks = num_episodes // record_every
    xs = (
        jnp.arange(num_episodes, dtype=jnp.float32).reshape(blocks, record_every),
        # episode k's randomness is fold_in(key, k): the first K episodes do not depend on
        # num_episodes (a longer run read at K with confidence_episodes=K is the run of K)
        jax.vmap(jax.random.fold_in, in_axes=(None, 0))(key, jnp.arange(num_episodes)).reshape(
            blocks, record_every
        ),
    )
    init = (jnp.zeros((S, A, S, 2)), jnp.array(True), jnp.zeros(()))
    (counts, finite, _), regret = jax.lax.scan(block, init, xs)
    return RLResult(regret.reshape(-1), counts, finite)


def ucbvi_ldp(
    mdp: TabularMDP,
    num_episodes: int,
    epsilon: float | None,
    *,
    key: jax.Array,
    bonus_scale: float = 0.1,
    privacy_bonus_scale: float = 1.0,
    confidence_episodes: int | Array | None = None,
    record_every: int = 1,
) -> RLResult:
    r"""UCBVI on unary-encoded transitions (``epsilon=None``: non-private UCBVI).

    Each step's tuple :math:`(s, a, s', r)` is released as the unary encoding of its index among
    :math:`2 S^2 A` symbols at level :math:`\epsilon / H` (H releases compose to
    :math:`\epsilon`-LDP per episode). The learner sums debiased messages into counts, clips
    negative ones, and plans optimistically with the bonus

    .. math:: b(s,a) = c\,H\sqrt{L / n(s,a)} + c_\sigma\,H \sigma \sqrt{2 S H k L} / n(s,a),

    :math:`\sigma^2` the variance of one debiased bit and :math:`L = \log(2 SAHK)`. After ``k``
    episodes the privacy noise summed into :math:`n(s,a)` (``k H`` messages, ``2S`` bits each)
    has standard deviation :math:`\sigma\sqrt{2SHk}`, so with :math:`c_\sigma = 1` (the
    default) the second term covers it at the confidence level of ``L``; it moves every value
    of the estimated model by at most ``H`` times its relative error. ``c`` scales the
    statistical (Hoeffding) term only (0.1 by default: the worst-case constant 1 explores for
    thousands of episodes on small MDPs; it is the same in the non-private baseline).

    Args:
        mdp: the environment, an episodic :class:`~jaxpapers.core.mdp.TabularMDP`
            (``P[S, A, S]``, ``horizon=H``, ``gamma = 1``, reward means in ``[0, 1]``, start
            state 0).
        num_episodes: K.
        epsilon: privacy level > 0, or ``None`` for the non-private baseline.
        key: PRNG key.
        bonus_scale: ``c`` above.
        privacy_bonus_scale: :math:`c_\sigma` above.
        confidence_episodes: the horizon in ``L`` (default ``num_episodes``); a run with a
            larger ``num_episodes`` read after ``confidence_episodes`` episodes is exactly the
            run of that horizon (may be traced, so horizons can be vmapped).
        record_every: keep the cumulative regret only after every ``record_every`` episodes (a
            divisor of ``num_episodes``).

    Returns:
        :class:`RLResult` with the exact cumulative regret
        :math:`\sum_k V^*_1(s_0) - V^{\pi_k}_1(s_0)` (``[K // record_every]``).

    Examples:
        >>> import jax
        >>> from jaxpapers.ldp_rl import random_episodic_mdp, ucbvi_ldp
        >>> mdp = random_episodic_mdp(3, 2, 3, key=jax.random.key(0))
        >>> ucbvi_ldp(mdp, 20, 2.0, key=jax.random.key(1)).regret.shape
        (20,)
    """
    check_key("key", key)
    check_episodic(mdp)
    if epsilon is not None:
        check_positive("epsilon", epsilon)
    if int(num_episodes) < 1:
        raise ValueError(f"num_episodes={num_episodes}; expected >= 1")
    if int(record_every) < 1 or int(num_episodes) % int(record_every):
        raise ValueError(
            f"record_every={record_every}; expected a positive divisor of "
            f"num_episodes={num_episodes}"
        )
    check_positive("bonus_scale", bonus_scale, allow_zero=True)
    check_positive("privacy_bonus_scale", privacy_bonus_scale, allow_zero=True)
    if confidence_episodes is None:
        confidence_episodes = int(num_episodes)
    elif is_concrete(confidence_episodes) and np.any(np.asarray(confidence_episodes) < 1):
        raise ValueError(f"confidence_episodes={confidence_episodes}; expected >= 1")
    eps = jnp.asarray(1.0 if epsilon is None else epsilon, jnp.float32)
    scales = jnp.asarray([bonus_scale, privacy_bonus_scale], jnp.float32)
    return _ucbvi_run(
        mdp.P,
        mdp.R,
        eps,
        scales,
        jnp.asarray(confidence_episodes, jnp.float32),
        key,
        int(num_episodes),
        epsilon is not None,
        mdp.horizon,
        int(record_every),
    )
