"""Online linear multiclass learners in one scan: perceptron, Gaptron, their stability-exploiting
versions, parameter-free Gaptron; immediate or delayed feedback."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from jaxpapers.core.checks import check_finite, check_key, check_range, is_concrete
from jaxpapers.core.fit import all_finite, keep_where
from jaxpapers.multiclass._losses import (
    SCORE_GRADIENT_BOUND,
    check_loss,
    score_gradient,
    surrogate_loss,
)
from jaxpapers.multiclass._streams import Stream, check_stream


class Learner(eqx.Module):
    """One online learner, as arrays so that several learners ``vmap`` through one compile.

    Attributes:
        eta: step size of the gradient update (the perceptron is scale-free from ``W = 0``).
        exploration: Gaptron's ``a`` in :math:`\\gamma_t = \\min(1/2, a \\|x_t\\|^2)`; 0 gives
            the deterministic argmax predictor. Unused when ``parameter_free`` (``a`` is then
            the bet's implied step).
        mistake_driven: update only on mistakes (perceptron) instead of on every round.
        stable_gate: skip exploration on rounds whose prediction is stable for every label.
        parameter_free: replace the step size by Krichevsky-Trofimov coin betting (``eta`` and
            ``exploration`` are then unused: the exploration scale is the bet's implied step).
    """

    eta: Float[Array, ""]
    exploration: Float[Array, ""]
    mistake_driven: Bool[Array, ""]
    stable_gate: Bool[Array, ""]
    parameter_free: Bool[Array, ""]

    def __check_init__(self) -> None:
        for name in ("eta", "exploration"):
            value = getattr(self, name)
            if is_concrete(value) and not float(np.min(np.asarray(value))) >= 0:
                raise ValueError(f"{name}={np.asarray(value)!r}; expected a value >= 0")


def _learner(eta, exploration, mistake_driven, stable_gate, parameter_free) -> Learner:
    return Learner(
        jnp.asarray(eta, jnp.float32),
        jnp.asarray(exploration, jnp.float32),
        jnp.asarray(mistake_driven),
        jnp.asarray(stable_gate),
        jnp.asarray(parameter_free),
    )


def perceptron() -> Learner:
    """The multiclass perceptron: ``W[y] += x, W[y_hat] -= x`` on mistakes (hinge gradient)."""
    return _learner(1.0, 0.0, True, False, False)


def stable_perceptron(eta: float = 1.0) -> Learner:
    """Online gradient descent on the surrogate every round with the argmax predictor (Gaptron
    with ``a = 0``). Steps on correct rounds never change the prediction, but this is plain
    surrogate OGD, not the paper's perceptron: the paper's perceptron result is a sharper
    *bound* for the standard :func:`perceptron` (see the ``perceptron_bound`` experiment), and
    the experiments do not use this learner."""
    return _learner(eta, 0.0, False, False, False)


def gaptron(eta: float = 1.0, exploration: float = 0.5) -> Learner:
    """Gaptron: gradient steps on the surrogate every round; predicts the argmax w.p.
    ``1 - gamma_t`` and a uniform label w.p. ``gamma_t``."""
    check_range("eta", eta, 0.0, low_open=True)
    check_range("exploration", exploration, 0.0, 1.0)
    return _learner(eta, exploration, False, False, False)


def stable_gaptron(eta: float = 1.0, exploration: float = 0.5) -> Learner:
    """Gaptron that explores only on rounds where some label's update would change the
    prediction (on stable rounds the argmax is already the post-update prediction)."""
    check_range("eta", eta, 0.0, low_open=True)
    check_range("exploration", exploration, 0.0, 1.0)
    return _learner(eta, exploration, False, True, False)


def parameter_free_gaptron() -> Learner:
    r"""Stability-gated Gaptron whose iterate is a KT coin bet (no step size to tune).

    Its exploration is :math:`\gamma_t = \min(1/2, \eta_t \|x_t\|^2)` with the bet's implied
    step :math:`\eta_t = \|W_t\|/(G\sqrt{t+1}) + 1/(G (t+1))` in place of Gaptron's fixed ``a``,
    so no constant is set by hand (``exploration`` is unused)."""
    return _learner(1.0, 0.0, False, True, True)


class OnlineResult(NamedTuple):
    """Output of :func:`run_online`.

    Attributes:
        mistakes: ``[T]`` sampled zero-one losses of the (randomised) predictions.
        expected_mistakes: ``[T]`` their expectations given the past.
        surrogate: ``[T]`` surrogate loss of ``W_t`` on round ``t``.
        stable: ``[T]`` whether the round's own update left its prediction unchanged.
        exploration: ``[T]`` the exploration probability used.
        weights: ``[C, d]`` final weights; ``average``: ``[C, d]`` mean of the iterates
            (the online-to-batch predictor).
        finite: whether the weights stayed finite (the scan freezes once they are not).
    """

    mistakes: Float[Array, " T"]
    expected_mistakes: Float[Array, " T"]
    surrogate: Float[Array, " T"]
    stable: Float[Array, " T"]
    exploration: Float[Array, " T"]
    weights: Float[Array, "C d"]
    average: Float[Array, "C d"]
    finite: Array


class _State(NamedTuple):
    W: Array  # [C, d] current iterate
    theta: Array  # [C, d] minus the sum of normalised gradients (KT)
    wealth: Array  # KT wealth
    total: Array  # [C, d] sum of iterates
    buffer_x: Array  # [d', d] pending examples (delayed feedback)
    buffer_s: Array  # [d', C] their prediction-time scores
    buffer_y: Array  # [d'] their labels
    finite: Array


def _update_direction(learner, scores, label, loss):
    """d loss / d scores of one example, zeroed for the perceptron on correct rounds."""
    g = score_gradient(scores, label, loss)
    correct = scores.argmax() == label
    return jnp.where(learner.mistake_driven & correct, 0.0, g)


def _step_size(learner, state, t, radius, loss):
    """Effective step: ``eta``, or for KT the implied scale ``|W| / (G sqrt t)``."""
    G = SCORE_GRADIENT_BOUND[loss] * radius
    kt = jnp.linalg.norm(state.W) / (G * jnp.sqrt(t + 1.0)) + 1.0 / (G * (t + 1.0))
    return jnp.where(learner.parameter_free, kt, learner.eta)


def _exploration_scale(learner, step):
    """Gaptron's ``a`` in ``gamma_t = min(1/2, a ||x_t||^2)``: the fixed ``exploration`` for OGD,
    the bet's implied step for the parameter-free Gaptron (the surrogate gap pays the step's
    ``step ||grad||^2 / 2`` only when ``gamma_t`` scales with that step)."""
    return jnp.where(learner.parameter_free, step, learner.exploration)


def _stable_for_every_label(scores, sq_norm, step, loss):
    """True when, for every possible label, the update would keep ``argmax`` unchanged."""
    C = scores.shape[0]
    grads = jax.vmap(lambda y: score_gradient(scores, y, loss))(jnp.arange(C))  # [C, C]
    new_scores = scores[None, :] - step * sq_norm * grads
    return jnp.all(new_scores.argmax(-1) == scores.argmax())


def _apply(learner, state, x, scores, label, t, radius, loss):
    """One (possibly delayed) update with the example's prediction-time scores."""
    g = _update_direction(learner, scores, label, loss)  # [C]
    grad_W = g[:, None] * x[None, :]
    step = _step_size(learner, state, t, radius, loss)
    W_ogd = state.W - step * grad_W
    G = SCORE_GRADIENT_BOUND[loss] * radius
    gn = grad_W / G
    wealth = state.wealth - jnp.sum(gn * state.W)
    theta = state.theta - gn
    W_kt = theta / (t + 2.0) * wealth
    W = jnp.where(learner.parameter_free, W_kt, W_ogd)
    return state._replace(W=W, theta=theta, wealth=wealth)


@partial(jax.jit, static_argnames=("num_classes", "loss", "delay"))
def _run(learner, stream, key, radius, num_classes, loss, delay):
    T, d = stream.x.shape
    C = num_classes
    slots = max(delay, 1)
    init = _State(
        W=jnp.zeros((C, d)),
        theta=jnp.zeros((C, d)),
        wealth=jnp.array(1.0),
        total=jnp.zeros((C, d)),
        buffer_x=jnp.zeros((slots, d)),
        buffer_s=jnp.zeros((slots, C)),
        buffer_y=jnp.zeros((slots,), jnp.int32),
        finite=jnp.array(True),
    )

    def round_(state, inputs):
        x, y, t, k = inputs
        scores = state.W @ x
        y_star = scores.argmax()
        sq = jnp.sum(x * x)
        step = _step_size(learner, state, t, radius, loss)
        gate = learner.stable_gate & _stable_for_every_label(scores, sq, step, loss)
        gamma = jnp.where(gate, 0.0, jnp.minimum(0.5, _exploration_scale(learner, step) * sq))
        u = jax.random.uniform(k, (2,))  # one draw: explore?, then which label
        explore = u[0] < gamma
        y_hat = jnp.where(explore, jnp.minimum((u[1] * C).astype(jnp.int32), C - 1), y_star)
        wrong = (y_star != y).astype(jnp.float32)
        expected = (1.0 - gamma) * wrong + gamma * (1.0 - 1.0 / C)
        surrogate_t = surrogate_loss(scores, y, loss)
        if delay == 0:
            new = _apply(learner, state, x, scores, y, t, radius, loss)
        else:
            slot = t.astype(jnp.int32) % delay
            ready = t >= delay
            pending = _apply(
                learner,
                state,
                state.buffer_x[slot],
                state.buffer_s[slot],
                state.buffer_y[slot],
                t - delay,
                radius,
                loss,
            )
            new = keep_where(ready, pending, state)
            new = new._replace(
                buffer_x=state.buffer_x.at[slot].set(x),
                buffer_s=state.buffer_s.at[slot].set(scores),
                buffer_y=state.buffer_y.at[slot].set(y),
            )
        stable = ((new.W @ x).argmax() == y_star).astype(jnp.float32)
        # An online learner, not a gradient loop (no loss to differentiate, no optimiser): one
        # scan over the rounds that freezes the state once the weights stop being finite.
        ok = state.finite & all_finite(new.W)
        new = keep_where(ok, new, state)
        new = new._replace(total=state.total + state.W, finite=ok)
        out = ((y_hat != y).astype(jnp.float32), expected, surrogate_t, stable, gamma)
        return new, out

    ts = jnp.arange(T, dtype=jnp.float32)
    final, (m, e, s, st, g) = jax.lax.scan(
        round_, init, (stream.x, stream.y, ts, jax.random.split(key, T))
    )
    return OnlineResult(m, e, s, st, g, final.W, final.total / T, final.finite)


def run_online(
    learner: Learner,
    stream: Stream,
    num_classes: int,
    *,
    key: jax.Array,
    loss: str = "hinge",
    delay: int = 0,
    radius: float | None = None,
) -> OnlineResult:
    r"""Run an online linear multiclass learner over a stream (one ``lax.scan``).

    Round :math:`t`: scores :math:`s = W_t x_t`, deterministic prediction
    :math:`y^* = \arg\max s`; with probability :math:`\gamma_t` a uniform label is predicted
    instead. The label arrives ``delay`` rounds later and the update uses the prediction-time
    scores: :math:`W \leftarrow W - \eta\, \nabla_s \ell(s, y)\, x^\top` (the perceptron only on
    mistakes; parameter-free: a Krichevsky-Trofimov bet on the normalised gradients).

    Args:
        learner: a :class:`Learner` (e.g. :func:`gaptron`).
        stream: ``Stream(x [T, d], y [T])``.
        num_classes: C.
        key: PRNG key of the exploration.
        loss: ``"hinge"``, ``"smooth_hinge"`` or ``"logistic"``.
        delay: feedback delay (>= 0).
        radius: bound on ``||x||`` for the parameter-free bet (default: the stream's maximum).

    Returns:
        :class:`OnlineResult`.

    Examples:
        >>> import jax
        >>> from jaxpapers.multiclass import linear_stream, perceptron, run_online
        >>> stream, _ = linear_stream(200, 5, 3, margin=0.1, key=jax.random.key(0))
        >>> out = run_online(perceptron(), stream, 3, key=jax.random.key(1))
        >>> int(out.mistakes.sum()) < 60
        True
    """
    check_key("key", key)
    check_loss(loss)
    if not isinstance(delay, int | np.integer) or delay < 0:
        raise ValueError(f"delay={delay!r}; expected an integer >= 0")
    check_stream(stream, num_classes)
    check_finite("stream.x", stream.x)
    if radius is None:
        radius = float(jnp.linalg.norm(stream.x, axis=-1).max()) if is_concrete(stream.x) else 1.0
    return _run(
        learner,
        Stream(jnp.asarray(stream.x, jnp.float32), jnp.asarray(stream.y, jnp.int32)),
        key,
        jnp.asarray(max(radius, 1e-12) if is_concrete(radius) else radius, jnp.float32),
        int(num_classes),
        loss,
        int(delay),
    )
