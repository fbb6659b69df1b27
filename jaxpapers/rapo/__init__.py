r"""Psy-CoT and RAPO: role-aware policy optimisation for role-playing agents.

Derivation (from the abstract and its predecessors). GRPO (DeepSeekMath) trains a policy
:math:`\pi_\theta` from ``K`` sampled completions per prompt, scored by a reward model, with the
group-normalised advantage :math:`A_i = (r_i - \bar r)/(\mathrm{std}(r) + \epsilon)` and the
PPO-clipped surrogate per token (:func:`grpo_loss`). Every token of a completion receives the
same advantage, so when an LLM judge pays generic flattering phrases as much as character-specific
content, both kinds of token receive identical gradient signals and the policy drifts towards the
cheaper generic ones (reward hacking).

RAPO weights each token by how much the character profile explains it: the pointwise mutual
information :math:`\mathrm{PMI}_t = \log\pi_{ref}(y_t \mid p, x, y_{<t}) - \log\pi_{ref}(y_t \mid x,
y_{<t})` under the frozen reference (the warm-up model, trained with the profile sometimes masked
so that it also models :math:`p(y_t \mid x, y_{<t})`). With :math:`s_t = \tanh(\max(\mathrm{PMI}_t,
0)/\tau)`, the per-token surrogate is multiplied by :math:`w_t = 1 + \alpha s_t` when
:math:`A > 0` (amplify role-specific tokens of good completions) and :math:`w_t = 1 - \gamma s_t`
when :math:`A < 0` (attenuate them in bad ones); :math:`w_t \in [1 - \gamma, 1 + \alpha]` is
bounded and :math:`\alpha = \gamma = 0` recovers GRPO exactly (:func:`rapo_weights`,
:func:`rapo_loss`).

Psy-CoT structures the warm-up completions as three reasoning steps before the reply,
Interaction Perception, Psychological Empathy and Logical Construction (:mod:`._psycot` for
text; :func:`completions` for the token world).

What is measured (``jaxpapers reproduce P05``): a synthetic role-play world (:class:`World`)
with character profiles of four attributes, four question types, an exact fidelity rule and a
judge that can be hacked by generic flattery; a small decoder LM
(:class:`jaxpapers.core.nn.decoder.DecoderLM`) warmed up on imperfect demonstrations with and
without Psy-CoT, then trained by GRPO and RAPO; fidelity, reward, role-specific and generic token
fractions over training, and fidelity on profiles never seen in training.

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
    rl_step,
    rollout,
    sft_loss,
)
from jaxpapers.rapo._psycot import PsyCoT, build_prompt, format_psycot, parse_psycot
from jaxpapers.rapo._rapo import profile_token_pmi, rapo_loss, rapo_weights
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
    prompts,
    score,
    split_profiles,
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
    "parse_psycot",
    "profile_token_pmi",
    "prompts",
    "rapo_loss",
    "rapo_weights",
    "rl_loss",
    "rl_step",
    "rollout",
    "score",
    "sft_loss",
    "split_profiles",
    "warmup_replies",
]
