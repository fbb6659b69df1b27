r"""Psy-CoT and RAPO: role-aware policy optimisation for role-playing agents.

Derivation (from the abstract and its predecessors). GRPO (DeepSeekMath) trains a policy
:math:`\pi_\theta` from ``K`` sampled completions per prompt, scored by a reward model, with the
group-normalised advantage :math:`A_i = (r_i - \bar r)/(\mathrm{std}(r) + \epsilon)` and the
PPO-clipped surrogate per token (:func:`grpo_loss`). Every token of a completion receives the
same advantage, so when an LLM judge pays generic flattering phrases as much as character-specific
content, both kinds of token receive identical gradient signals and the policy drifts towards the
cheaper generic ones (reward hacking).

RAPO weights each token by how much the character's role explains it: the pointwise mutual
information :math:`\mathrm{PMI}_t = \log\pi_{ref}(y_t \mid p, x, y_{<t}) - \log\pi_{ref}(y_t \mid x,
y_{<t}^{\neg role})` under the frozen reference (the warm-up model). The second term must not see
the profile *nor* the Psy-CoT role reasoning (the empathy step's temperament, the logic step's
plan), which is a function of the profile: a reference that reads the plan finds the reply
already explained and gives the judged reply tokens PMI ~0 (derivation in :mod:`._rapo`;
:func:`mask_role`, :func:`role_pmi`). The warm-up model is trained with both masked on a
fraction of its examples, so it also models the second term. With
:math:`s_t = \tanh(\max(\mathrm{PMI}_t, 0)/\tau)`, the per-token surrogate is multiplied by
:math:`w_t = 1 + \alpha s_t` when :math:`A > 0` (amplify role-specific tokens of good
completions) and :math:`w_t = 1 - \gamma s_t` when :math:`A < 0` (attenuate them in bad ones);
:math:`w_t \in [1 - \gamma, 1 + \alpha]` is bounded and :math:`\alpha = \gamma = 0` recovers
GRPO exactly (:func:`rapo_weights`, :func:`rapo_loss`).

Psy-CoT structures the warm-up completions as three reasoning steps before the reply,
Interaction Perception, Psychological Empathy and Logical Construction (:mod:`._psycot` for
text; :func:`completions` for the token world).

What is measured (``jaxpapers reproduce P05``): a synthetic role-play world (:class:`World`)
with character profiles of four attributes, four question types, an exact fidelity rule and a
hackable judge that overrates generic flattery (it pays a generic phrase more than a mention of
the character, derivation in :mod:`._world`); a small decoder LM
(:class:`jaxpapers.core.nn.decoder.DecoderLM`) warmed up on imperfect demonstrations of
stereotyped characters (:func:`stereotyped_split`) with and without Psy-CoT, then trained by GRPO
and RAPO (KL coefficient 0.04 for both and RAPO's alpha / gamma fixed a priori), each with its
step size tuned on one shared grid on validation characters by the reward of the judge it trains
on;
fidelity, reward, role-specific and generic token fractions over training, the PMI of each kind
of token under the reference, and fidelity on characters that break the training stereotype.

Measured numbers and their history: ``results/P05/NOTES.md``.

Examples:
    >>> import jax.numpy as jnp
    >>> from jaxpapers.rapo import group_advantages, grpo_loss, rapo_loss
    >>> adv = group_advantages(jnp.array([[1.0, 0.0]])).reshape(-1)
    >>> lp, mask = jnp.full((2, 3), -1.0), jnp.ones((2, 3))
    >>> g = grpo_loss(lp, lp, adv, mask)
    >>> r = rapo_loss(lp, lp, adv, mask, jnp.ones((2, 3)), alpha=0.0, gamma=0.0)
    >>> bool(g.loss == r.loss)
    True

References:
    Psy-CoT and RAPO (NeurIPS 2026), the paper this package implements.
    Shao et al. 2024, "DeepSeekMath" (GRPO), arXiv:2402.03300.
    Yu et al. 2025, "DAPO" (token-mean aggregation, eps_high), arXiv:2503.14476.
    Schulman 2020, "Approximating KL divergence" (the k3 estimator), joschu.net/blog/kl-approx.html.
    Wei et al. 2022, "Chain-of-thought prompting", arXiv:2201.11903.
"""

from jaxpapers.rapo._grpo import GRPOLoss, group_advantages, grpo_loss
from jaxpapers.rapo._policy import (
    RLConfig,
    StepMetrics,
    completion_log_probs,
    rl_loss,
    rl_optimizer,
    rl_step,
    rollout,
    sft_loss,
)
from jaxpapers.rapo._psycot import PsyCoT, build_prompt, format_psycot, parse_psycot
from jaxpapers.rapo._rapo import profile_token_pmi, rapo_loss, rapo_weights, role_pmi
from jaxpapers.rapo._world import (
    COMPLETION_LEN,
    PROMPT_LEN,
    Batch,
    Scores,
    World,
    all_profiles,
    completion_mask,
    completions,
    draw_batch,
    extract_reply,
    ideal_reply,
    mask_role,
    prompts,
    score,
    split_profiles,
    stereotyped_split,
    warmup_replies,
)
from jaxpapers.rapo._world import (
    NULL as NULL_TOKEN,
)

__all__ = [
    "COMPLETION_LEN",
    "NULL_TOKEN",
    "PROMPT_LEN",
    "Batch",
    "GRPOLoss",
    "PsyCoT",
    "RLConfig",
    "Scores",
    "StepMetrics",
    "World",
    "all_profiles",
    "build_prompt",
    "completion_log_probs",
    "completion_mask",
    "completions",
    "draw_batch",
    "extract_reply",
    "format_psycot",
    "group_advantages",
    "grpo_loss",
    "ideal_reply",
    "mask_role",
    "parse_psycot",
    "profile_token_pmi",
    "prompts",
    "rapo_loss",
    "rapo_weights",
    "rl_loss",
    "rl_optimizer",
    "rl_step",
    "role_pmi",
    "rollout",
    "score",
    "sft_loss",
    "split_profiles",
    "stereotyped_split",
    "warmup_replies",
]
