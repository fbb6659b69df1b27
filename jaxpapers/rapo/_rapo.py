r"""RAPO: per-token weights from profile-token pointwise mutual information, asymmetric in the sign
of the advantage.

The reference (derived from the abstract's "profile--token mutual information"). For a token
:math:`y_t` of a completion sampled for the prompt (profile :math:`p`, message :math:`x`), the
pointwise mutual information between the profile and the token is

.. math:: \mathrm{PMI}_t = \log \pi_{ref}(y_t \mid p, x, y_{<t})
                          - \log \pi_{ref}(y_t \mid x, y_{<t}^{\neg role}),
          \qquad \pi_{ref}(y_t \mid x, \cdot) = \sum_{p'} \pi(p' \mid x, \cdot)\,
                                                 \pi_{ref}(y_t \mid p', x, \cdot),

the evidence the profile gives for the token. A Psy-CoT completion carries role reasoning
:math:`c` before its reply: the Psychological Empathy step names the character's temperament and
the Logical Construction step its planned content, both functions of the profile. A reference
that masks only the prompt's profile still reads :math:`c`, so it computes
:math:`\mathrm{PMI}(p; y_t \mid x, c, y_{<t})`, what the profile adds *beyond the plan*: about 0 for
a reply that follows its plan however role-specific it is, while the plan tokens get the full
PMI. RAPO would then up-weight reasoning tokens the judge never scores and leave the judged reply
at weight ~1 (GRPO). The reference here therefore sees neither the profile nor the contents of
the role-reasoning steps (:func:`~jaxpapers.rapo.mask_role`: the profile and the empathy and
logic contents become ``NULL``; the perception step, the markers and the reply's own prefix stay).
The marginal over profiles is learned, not summed: the warm-up model is trained with that
masking on a fraction of its examples (as classifier-free guidance drops its condition), so one
network supplies both terms (:func:`role_pmi`).

Known answers (``tests/test_rapo.py``): under the warm-up data distribution (each reply token is
the planned, ideal one with probability :math:`1 - \rho`, a uniform generic token otherwise), a
reply token naming attribute kind :math:`k` of the profile gets :math:`\mathrm{PMI} = \log n_k`
(the masked reference knows the kind from the question, not which of its :math:`n_k` values), a
generic token gets 0, and under the profile-only reference the same reply token gets 0.

The weights. With :math:`s_t = \tanh(\max(\mathrm{PMI}_t, 0) / \tau) \in [0, 1)`,

.. math:: w_t = 1 + \alpha s_t \ (A > 0), \qquad w_t = 1 - \gamma s_t \ (A < 0), \qquad
          w_t = 1 \ (A = 0),

bounded in :math:`[1 - \gamma, 1 + \alpha]`: role-specific tokens are pushed up harder when the
completion was better than its group and pulled down more gently when it was worse, so a reward
model that pays generic flattery as much as role content no longer moves both alike. With
:math:`\alpha = \gamma = 0` every weight is 1 and RAPO is GRPO exactly.

Under a judge that overrates generic phrases (:func:`~jaxpapers.rapo.score`, ``generic_pay``
:math:`g > 1`). A token's surrogate gradient is its advantage times its weight, so per sampled
role token (PMI :math:`\approx \log n_k`, :math:`s \approx 1`) RAPO's expected signal is
:math:`E[wA \mid \text{role}] = E[A \mid \text{role}] + s\,(\alpha E[A^+ \mid \text{role}]
+ \gamma E[A^- \mid \text{role}])` (:math:`A^\pm = \max(\pm A, 0)`), against
:math:`E[A \mid \text{generic}]` for a generic one (PMI :math:`\approx 0`, weight 1). The judge
makes :math:`E[A \mid \text{role}] < E[A \mid \text{generic}]` (the hack), while the added term is
non-negative and, advantages being normalised within each group, of order
:math:`s(\alpha + \gamma)E|A|/2`: RAPO counters the hack's pull towards generic phrases with a
bias towards role tokens; whether it is enough depends on how strongly the judge overrates
them (the experiment measures it, ``jaxpapers reproduce P05``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from jaxpapers.core.checks import check_dtype, check_ndim, check_shape, is_concrete
from jaxpapers.rapo._grpo import GRPOLoss, grpo_loss
from jaxpapers.rapo._world import mask_role


def profile_token_pmi(
    log_probs_with_profile: Float[Array, "batch time"],
    log_probs_without_profile: Float[Array, "batch time"],
) -> Float[Array, "batch time"]:
    """``log p(token | role, context) - log p(token | context)`` per token (the subtraction of
    :func:`role_pmi`)."""
    check_shape(
        "log_probs_without_profile", log_probs_without_profile, log_probs_with_profile.shape
    )
    return log_probs_with_profile - log_probs_without_profile


def role_pmi(
    log_probs: Callable[[Array, Array], Array],
    tokens: Int[Array, "batch total"],
    *,
    reasoning: bool = True,
) -> tuple[Float[Array, "batch completion"], Float[Array, "batch completion"]]:
    """RAPO's PMI of every completion token of ``tokens`` under a reference, and the reference's
    log-probabilities with the full context.

    ``log_probs(contexts, targets)`` returns ``[N, completion]`` log-probabilities of the
    completion tokens of ``targets`` when the model reads ``contexts`` (position by position,
    causally; e.g. :func:`~jaxpapers.rapo.completion_log_probs` with ``context=``). It is called
    once, on the full rollouts and their role-masked copies (:func:`~jaxpapers.rapo.mask_role`)
    batched together, with the rollouts as targets in both halves.

    Args:
      log_probs: the reference's log-probability function.
      tokens: ``[B, total]`` prompts and completions.
      reasoning: mask the role-reasoning steps as well as the profile (RAPO's reference, see the
        module docstring); ``False`` masks the profile only.

    Returns:
      ``(pmi, full)``: ``full - masked`` and ``full``, both ``[B, completion]``.
    """
    check_ndim("tokens", tokens, 2)
    check_dtype("tokens", tokens, "integer")
    contexts = jnp.concatenate([tokens, mask_role(tokens, reasoning=reasoning)], axis=0)
    both = log_probs(contexts, jnp.concatenate([tokens, tokens], axis=0))
    check_shape("log_probs(contexts, targets)", both, (2 * tokens.shape[0], None))
    full, masked = jnp.split(both, 2, axis=0)
    return profile_token_pmi(full, masked), full


def rapo_weights(
    pmi: Float[Array, "batch time"],
    advantages: Float[Array, " batch"],
    *,
    alpha: float | Array = 1.0,
    gamma: float | Array = 0.5,
    temperature: float = 1.0,
) -> Float[Array, "batch time"]:
    """RAPO's bounded asymmetric token weights (see the module docstring).

    Args:
      pmi: ``[B, T]`` profile-token PMI (:func:`profile_token_pmi`).
      advantages: ``[B]`` per-sequence advantages.
      alpha: amplification of role-specific tokens under positive advantage (``>= 0``).
      gamma: attenuation under negative advantage, in ``[0, 1)`` so weights stay positive.
      temperature: PMI scale ``tau`` of the squashing ``tanh(max(pmi, 0) / tau)``.

    Examples:
        >>> import jax.numpy as jnp
        >>> rapo_weights(jnp.array([[0.0, 10.0], [0.0, 10.0]]), jnp.array([1.0, -1.0])).round(4)
        Array([[1. , 2. ],
               [1. , 0.5]], dtype=float32)
    """
    check_shape("pmi", pmi, (None, None))
    check_shape("advantages", advantages, (pmi.shape[0],))
    if is_concrete(alpha) and not float(alpha) >= 0:
        raise ValueError(f"alpha={alpha!r}; expected >= 0")
    if is_concrete(gamma) and not 0 <= float(gamma) < 1:
        raise ValueError(f"gamma={gamma!r}; expected a value in [0, 1) so weights stay positive")
    s = jnp.tanh(jnp.maximum(pmi, 0.0) / temperature)
    adv = advantages[:, None]
    return jnp.where(adv > 0, 1.0 + alpha * s, jnp.where(adv < 0, 1.0 - gamma * s, 1.0))


def rapo_loss(
    log_probs: Float[Array, "batch time"],
    old_log_probs: Float[Array, "batch time"],
    advantages: Float[Array, " batch"],
    mask: Float[Array, "batch time"],
    pmi: Float[Array, "batch time"],
    *,
    alpha: float | Array = 1.0,
    gamma: float | Array = 0.5,
    temperature: float = 1.0,
    ref_log_probs: Float[Array, "batch time"] | None = None,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    beta: float = 0.0,
    aggregation: Literal["token_mean", "sequence_mean"] = "token_mean",
) -> GRPOLoss:
    """GRPO's loss with RAPO's token weights; ``alpha = gamma = 0`` gives GRPO exactly."""
    check_shape("pmi", pmi, log_probs.shape)
    weights = rapo_weights(pmi, advantages, alpha=alpha, gamma=gamma, temperature=temperature)
    return grpo_loss(
        log_probs,
        old_log_probs,
        advantages,
        mask,
        ref_log_probs=ref_log_probs,
        token_weights=weights,
        eps_low=eps_low,
        eps_high=eps_high,
        beta=beta,
        aggregation=aggregation,
    )
