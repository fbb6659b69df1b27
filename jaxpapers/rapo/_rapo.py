r"""RAPO: per-token weights from profile-token pointwise mutual information, asymmetric in the sign
of the advantage.

Under the frozen reference model, a completion token :math:`y_t` gets

.. math:: \mathrm{PMI}_t = \log \pi_{ref}(y_t \mid \text{profile}, x, y_{<t})
                          - \log \pi_{ref}(y_t \mid x, y_{<t}),

the evidence the profile gives for the token (large for role-specific tokens, about 0 for generic
ones that any character could say). With :math:`s_t = \tanh(\max(\mathrm{PMI}_t, 0) / \tau) \in
[0, 1)` the weight is

.. math:: w_t = 1 + \alpha s_t \ (A > 0), \qquad w_t = 1 - \gamma s_t \ (A < 0), \qquad
          w_t = 1 \ (A = 0),

bounded in :math:`[1 - \gamma, 1 + \alpha]`: role-specific tokens are pushed up harder when the
completion was better than its group and pulled down more gently when it was worse, so a reward
model that pays generic flattery as much as role content no longer moves both alike. With
:math:`\alpha = \gamma = 0` every weight is 1 and RAPO is GRPO exactly.
"""

from __future__ import annotations

from typing import Literal

import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_shape, is_concrete
from jaxpapers.rapo._grpo import GRPOLoss, grpo_loss


def profile_token_pmi(
    log_probs_with_profile: Float[Array, "batch time"],
    log_probs_without_profile: Float[Array, "batch time"],
) -> Float[Array, "batch time"]:
    """``log p(token | profile, context) - log p(token | context)`` per token."""
    check_shape(
        "log_probs_without_profile", log_probs_without_profile, log_probs_with_profile.shape
    )
    return log_probs_with_profile - log_probs_without_profile


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
