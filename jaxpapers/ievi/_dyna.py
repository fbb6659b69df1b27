"""Sample-based tabular variants: IE-Dyna and its Dyna-Q baseline (generative-model access).

Both agents see the same stream of real transitions: every round draws ``samples_per_pair`` next
states from the true model for every state-action pair and adds them to a count table, whose
normalisation :math:`P_n` is the learned model. Both are allowed the same *real-model work per
round*: one sweep of backups through the learned model :math:`P_n` (Dyna's planning budget).

- Dyna-Q (Sutton, 1990): a Q-learning update on each real transition (step ``1/N(s, a)``), then
  ``planning_sweeps`` expected backups :math:`Q \\leftarrow R + \\gamma P_n \\max Q` in the
  learned model.
- IE-Dyna: the learned model plays the role of the true model in IE-VI (its sweep
  :math:`T_n(V)` is the "query"), and the implicit step is planned in a fixed approximate
  simulator :math:`\\hat P` (cheap, biased) by defect correction. Because the correction uses
  :math:`T_n`, the fixed point is the learned model's :math:`V^*(P_n) \\to V^*(P)` whatever
  :math:`\\hat P` is, while propagation over the horizon happens in the simulator.

The comparison is therefore "real samples to reach a target error at equal learned-model work per
round": Dyna-Q's value propagation is limited to :math:`\\gamma` per sweep, IE-Dyna's to
:math:`1/(1 + h(1-\\gamma))`-type contraction (plus the statistical error of :math:`P_n`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_finite, check_int, check_key, check_positive, check_range
from jaxpapers.core.mdp import TabularMDP, check_transitions
from jaxpapers.ievi._mdp import bellman, check_mdp, check_values, q_values
from jaxpapers.ievi._planners import implicit_step
from jaxpapers.ievi._problems import sample_counts


class DynaResult(NamedTuple):
    """Output of :func:`dyna_q` and :func:`ie_dyna`.

    Attributes:
      V: ``[S]`` final values.
      errors: ``[rounds]`` sup-norm error to ``v_star`` after each round.
      samples: ``[rounds]`` cumulative real transitions drawn after each round.
    """

    V: Float[Array, " S"]
    errors: Float[Array, " rounds"]
    samples: Int[Array, " rounds"]


def _check(mdp: TabularMDP, v_star, key, rounds: int, samples_per_pair: int) -> None:
    check_key("key", key)
    check_mdp(mdp)
    check_values(mdp, v_star, "v_star")
    check_finite("v_star", v_star)
    check_int("rounds", rounds, minimum=1)
    check_int("samples_per_pair", samples_per_pair, minimum=1)


def _learned(counts: jax.Array) -> jax.Array:
    return counts / jnp.maximum(counts.sum(-1, keepdims=True), 1.0)


def dyna_q(
    mdp: TabularMDP,
    v_star: Float[Array, " S"],
    *,
    key: jax.Array,
    rounds: int,
    samples_per_pair: int = 1,
    planning_sweeps: int = 1,
) -> DynaResult:
    """Dyna-Q with a count-based model and expected planning backups (the baseline).

    Args:
      mdp: true MDP (only sampled from, and its known rewards used).
      v_star: ``[S]`` true optimal values, for the error curve.
      key: PRNG key of the sample stream (pass the same key to :func:`ie_dyna` to compare).
      rounds: number of rounds.
      samples_per_pair: real transitions per state-action pair per round.
      planning_sweeps: expected backups through the learned model per round.
    """
    _check(mdp, v_star, key, rounds, samples_per_pair)
    check_int("planning_sweeps", planning_sweeps, minimum=0)
    S, A = mdp.num_states, mdp.num_actions
    Q0 = jnp.zeros((S, A), mdp.R.dtype)
    counts0 = jnp.zeros_like(mdp.P)

    def round_(carry, k):
        Q, counts = carry
        new = sample_counts(mdp.P, samples_per_pair, key=k)
        counts = counts + new
        # Q-learning on each real transition, with step 1 / N(s, a): an incremental average.
        v_next = jnp.max(Q, axis=-1)
        target = mdp.R + mdp.gamma * jnp.einsum("sat,t->sa", new, v_next) / samples_per_pair
        n = counts.sum(-1)
        Q = Q + (samples_per_pair / n) * (target - Q)
        model = TabularMDP(_learned(counts), mdp.R, gamma=mdp.gamma)
        Q = jax.lax.fori_loop(
            0,
            planning_sweeps,
            lambda _, q: q_values(model, q.max(-1)),
            Q,
        )
        V = Q.max(-1)
        return (Q, counts), jnp.max(jnp.abs(V - v_star))

    (Q, _), errors = jax.lax.scan(round_, (Q0, counts0), jax.random.split(key, rounds))
    samples = jnp.arange(1, rounds + 1) * (S * A * samples_per_pair)
    return DynaResult(Q.max(-1), errors, samples)


def ie_dyna(
    mdp: TabularMDP,
    model_P: Float[Array, "S A S"],
    v_star: Float[Array, " S"],
    *,
    key: jax.Array,
    rounds: int,
    h: float,
    samples_per_pair: int = 1,
) -> DynaResult:
    r"""IE-Dyna: implicit-Euler steps planned in the simulator ``model_P``, corrected by the
    learned model's backup :math:`T_n(V)` once per round.

    Args:
      mdp: true MDP (only sampled from, and its known rewards used).
      model_P: ``[S, A, S]`` approximate simulator :math:`\hat P`.
      v_star: ``[S]`` true optimal values, for the error curve.
      key: PRNG key of the sample stream.
      rounds: number of rounds.
      h: implicit step size (``> 0``).
      samples_per_pair: real transitions per state-action pair per round.
    """
    _check(mdp, v_star, key, rounds, samples_per_pair)
    check_transitions(model_P, "model_P")
    if model_P.shape != mdp.P.shape:
        raise ValueError(f"model_P must have shape {mdp.P.shape}; got {model_P.shape}")
    check_positive("h", h)
    V0 = jnp.zeros(mdp.num_states, mdp.R.dtype)

    def round_(carry, k):
        V, counts = carry
        counts = counts + sample_counts(mdp.P, samples_per_pair, key=k)
        learned = TabularMDP(_learned(counts), mdp.R, gamma=mdp.gamma)
        TV = bellman(learned, V)
        V, _ = implicit_step(learned, model_P, V, V, TV, h)
        return (V, counts), jnp.max(jnp.abs(V - v_star))

    (V, _), errors = jax.lax.scan(
        round_, (V0, jnp.zeros_like(mdp.P)), jax.random.split(key, rounds)
    )
    samples = jnp.arange(1, rounds + 1) * (mdp.num_states * mdp.num_actions * samples_per_pair)
    return DynaResult(V, errors, samples)


def samples_to_error(result: DynaResult, target: float | Float[Array, ""]) -> Float[Array, ""]:
    """Real samples drawn when the error first drops to ``target`` and stays there (``inf`` if
    it never does within the run)."""
    if not isinstance(result, DynaResult):
        raise ValueError(f"result must be a DynaResult; got {type(result).__name__}")
    check_range("target", target, 0.0)
    above = result.errors > target
    # Last round still above target: everything after it stays below.
    idx = jnp.where(above.any(), result.errors.shape[0] - jnp.argmax(above[::-1]), 0)
    ok = idx < result.errors.shape[0]
    return jnp.where(ok, result.samples[jnp.minimum(idx, result.errors.shape[0] - 1)], jnp.inf)
