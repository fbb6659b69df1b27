r"""GRPO: group-normalised advantages and the clipped surrogate loss, as TRL and verl define them.

For ``K`` completions of one prompt with rewards :math:`r_1..r_K`,
:math:`A_i = (r_i - \bar r) / (\mathrm{std}(r) + \epsilon)` (unbiased std, as ``torch.std``).
Per token, with :math:`\rho_t = \exp(\log\pi_\theta - \log\pi_{\mathrm{old}})`,

.. math::
    \ell_t = -\min\big(\rho_t A,
             \mathrm{clip}(\rho_t, 1 - \epsilon_{low}, 1 + \epsilon_{high}) A\big)
             + \beta\, k_3, \qquad
    k_3 = e^{\log\pi_{ref} - \log\pi_\theta} - (\log\pi_{ref} - \log\pi_\theta) - 1,

optionally multiplied per token by weights :math:`w_t` (RAPO's; GRPO has :math:`w_t = 1`), and
aggregated either as the global token mean (``"token_mean"``, DAPO / verl's default) or as the
mean over sequences of each sequence's token mean (``"sequence_mean"``, the original GRPO).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax.numpy as jnp
from jaxtyping import Array, Float

from jaxpapers.core.checks import check_shape, is_concrete


class GRPOLoss(NamedTuple):
    """The loss and diagnostics: fraction of clipped tokens and mean k3 KL to the reference."""

    loss: Float[Array, ""]
    clip_fraction: Float[Array, ""]
    kl: Float[Array, ""]


def group_advantages(
    rewards: Float[Array, "groups group_size"], *, eps: float = 1e-4, scale: bool = True
) -> Float[Array, "groups group_size"]:
    """``(r - mean) / (std + eps)`` within each group (unbiased std); ``scale=False`` only centres.

    Examples:
        >>> import jax.numpy as jnp
        >>> adv = group_advantages(jnp.array([[1.0, 0.0, 0.0, 1.0]]), eps=0.0)
        >>> [round(float(a), 4) for a in adv[0]]
        [0.866, -0.866, -0.866, 0.866]
    """
    if rewards.ndim != 2 or rewards.shape[1] < 2:
        raise ValueError(
            f"rewards has shape {rewards.shape}; expected [groups, group_size >= 2] (a group of "
            "one completion has no baseline)"
        )
    centred = rewards - jnp.mean(rewards, axis=1, keepdims=True)
    if not scale:
        return centred
    return centred / (jnp.std(rewards, axis=1, ddof=1, keepdims=True) + eps)


def grpo_loss(
    log_probs: Float[Array, "batch time"],
    old_log_probs: Float[Array, "batch time"],
    advantages: Float[Array, " batch"],
    mask: Float[Array, "batch time"],
    *,
    ref_log_probs: Float[Array, "batch time"] | None = None,
    token_weights: Float[Array, "batch time"] | None = None,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    beta: float | Array = 0.0,
    aggregation: Literal["token_mean", "sequence_mean"] = "token_mean",
) -> GRPOLoss:
    """The GRPO clipped-surrogate loss over completion tokens.

    Args:
      log_probs: ``[B, T]`` log-probabilities of the sampled tokens under the current policy.
      old_log_probs: ``[B, T]`` the same under the policy that sampled them.
      advantages: ``[B]`` per-sequence advantages (:func:`group_advantages`, flattened).
      mask: ``[B, T]`` 1 on completion tokens, 0 on prompt and padding.
      ref_log_probs: ``[B, T]`` reference-policy log-probabilities (needed when ``beta > 0``).
      token_weights: ``[B, T]`` per-token weights of the surrogate term (default 1).
      eps_low, eps_high: clip range ``[1 - eps_low, 1 + eps_high]`` of the ratio.
      beta: coefficient of the k3 KL penalty.
      aggregation: ``"token_mean"`` or ``"sequence_mean"``.

    Returns:
      :class:`GRPOLoss`.
    """
    check_shape("log_probs", log_probs, (None, None))
    for name, x in [("old_log_probs", old_log_probs), ("mask", mask)]:
        check_shape(name, x, log_probs.shape)
    check_shape("advantages", advantages, (log_probs.shape[0],))
    if token_weights is not None:
        check_shape("token_weights", token_weights, log_probs.shape)
    if ref_log_probs is None and not (is_concrete(beta) and float(beta) == 0.0):
        raise ValueError(f"beta={beta} needs ref_log_probs")
    if aggregation not in ("token_mean", "sequence_mean"):
        raise ValueError(f"aggregation={aggregation!r}; expected 'token_mean' or 'sequence_mean'")
    mask = mask.astype(log_probs.dtype)
    ratio = jnp.exp(log_probs - old_log_probs)
    adv = advantages[:, None]
    clipped = jnp.clip(ratio, 1.0 - eps_low, 1.0 + eps_high)
    per_token = -jnp.minimum(ratio * adv, clipped * adv)
    if token_weights is not None:
        per_token = per_token * token_weights
    kl = jnp.zeros_like(per_token)
    if ref_log_probs is not None:
        check_shape("ref_log_probs", ref_log_probs, log_probs.shape)
        d = ref_log_probs - log_probs
        kl = jnp.exp(d) - d - 1.0
        per_token = per_token + beta * kl
    is_clipped = (ratio * adv > clipped * adv).astype(log_probs.dtype)

    def reduce(x):
        if aggregation == "token_mean":
            return jnp.sum(x * mask) / jnp.maximum(jnp.sum(mask), 1.0)
        per_seq = jnp.sum(x * mask, axis=1) / jnp.maximum(jnp.sum(mask, axis=1), 1.0)
        return jnp.mean(per_seq)

    return GRPOLoss(reduce(per_token), reduce(is_clipped), reduce(kl))
