r"""P18: Implicit Value Probing (IVP): recovering concealed, context-dependent value preferences.

Setting
-------
A persona agent holds a hidden profile :math:`r_c \in [0, 1]^{10}` over Schwartz's ten basic values
(:data:`VALUES`) in each of four contexts (:data:`CONTEXTS`: work, family, negotiation,
counselling). A prober has a budget of ``T`` questions per context and must recover every
:math:`r_c`; it is scored by Spearman correlation and top-3 accuracy of the recovered profile
(:func:`spearman`, :func:`top_k_accuracy`) and by social acceptability
(:func:`social_acceptability`: one minus the mean intrusiveness, a repeated question costing extra).

Derivation from the abstract and its predecessors
-------------------------------------------------
The abstract names two assumptions of questionnaire benchmarks that fail for people: users are
always cooperative, and preferences are static. We turn each into a model ingredient.

1. *Value-weighted choice* (Schwartz's PVQ; random-utility models of McFadden). A question offers
   answers whose utilities are linear in the profile, :math:`u_a = X_a \cdot r + b_a`, and the
   persona answers with probability :math:`\mathrm{softmax}_a(\beta u_a)`. A PVQ item "how
   important is it to you to ...?" with Likert answers is the special case of a quadratic
   utility peaked at :math:`r_v`; a scenario ("would you rather (A) ... or (B) ...?") is a choice
   between options that embody values (:mod:`jaxpapers.ivp._questions`).
2. *Concealment* (social-desirability bias). With probability
   :math:`p = c \min(1, e_q + \gamma s)` the persona answers as the socially desirable profile
   would (:data:`DESIRABLE`): :math:`c` is its concealment level, :math:`e_q` the question's
   explicitness and :math:`s` the mean explicitness of what it was asked before (feeling probed
   makes later answers guarded too).
3. *Context dependence*. Profiles differ by context: a personal circumplex orientation plus a
   pull towards the context's typical value (:func:`sample_personas`).
4. *Strategic probing* (Bayesian experimental design; Lindley 1956, Chaloner and Verdinelli 1995).
   The prober keeps the exact posterior over a discretised hypothesis space, a library of
   profiles drawn from the persona prior times a grid of concealment levels, and asks the
   question that maximises the mutual information between the answer and the *profile*
   (concealment marginalised), less a price per unit of intrusiveness
   (:func:`information_gain`, :func:`probe` with ``policy="strategic"``). Under concealment the
   explicit items stop being informative (their answers are mostly the desirable ones), so the
   information criterion itself moves the prober to indirect scenario questions; no rule says so.
5. *Value-Prober distillation*. The abstract's Value-Prober-8B internalises structured reasoning
   by distillation. In miniature: the core decoder LM is trained on the strategic prober's
   transcripts (tokens ``[context, q1, a1, q2, a2, ...]``) to predict its next question
   (:func:`distill_prober`), and then probes without any posterior computation of its own.
6. *Any chat model as prober or persona* (:class:`ChatModelProber`, :func:`persona_chat_model`):
   the same conversation through :mod:`jaxpapers.core.chat`, so an LLM served over an
   OpenAI-compatible API can be evaluated unchanged.

All probers decode their answers with the same exact posterior (recovered profile = posterior
mean of the library profiles), so they differ only in the questions they choose. The hypothesis
library is a finite set of draws from the prior (particles): a persona's true profile is not in
it, which caps recovery (at the default 256 profiles, the best library member reaches a Spearman
correlation of about 0.95 with a fresh persona).

Experiments (``jaxpapers reproduce P18``): ``concealment_sweep`` (the headline: strategic
against random scenario questions at equal turns, from no to high concealment, the
questionnaire shown alongside; its social acceptability judged no worse than random scenarios'
with a 0.05 margin), two premise checks of the persona model that are not findings, because the
simulator builds them in: ``indirect_vs_questionnaire`` (random scenario questions against the
explicit questionnaire, which personas conceal more on by construction) and
``context_dependence`` (per-context posteriors against one context-blind profile, the personas
being built with a context pull of strength 1.2), ``distilled_prober`` (student vs teacher and
vs random scenarios; acceptability no worse than the teacher's, margin 0.05) and the sanity check
``questionnaire_exact`` (a deterministic, non-concealing persona whose profiles lie on the
Likert grid is recovered exactly by the ten questionnaire items).

What the comparison isolates. The questionnaire's deficit under concealment comes from asking
*explicitly* (explicitness 0.8 against 0.05-0.35 for scenarios), not from a lack of strategy: a
prober that asks random scenario questions already avoids most of it. So the headline judges the
strategic prober against random scenario questions, both indirect and with the same number of
questions per context; the questionnaire is a separate, secondary claim.

Measured numbers and their history: ``results/P18/NOTES.md``.

Examples:
    >>> import jax
    >>> from jaxpapers import ivp
    >>> pc = ivp.PersonaConfig()
    >>> bank = ivp.make_question_bank(config=ivp.BankConfig(scenarios=4), key=jax.random.key(0))
    >>> library = ivp.profile_library(16, key=jax.random.key(1), config=pc)
    >>> personas = ivp.sample_personas(4, 0.5, key=jax.random.key(2), config=pc)
    >>> ep = ivp.probe("strategic", bank, library, personas, key=jax.random.key(3),
    ...                persona_config=pc, config=ivp.ProberConfig(turns=5))
    >>> ep.profile.shape, ep.questions.shape
    ((4, 4, 10), (4, 4, 5))

References:
    P18, "Implicit Value Probing (IVP)": persona agents, strategic multi-turn probing and the
    distilled Value-Prober-8B (the paper is known to us through its abstract only).
    Schwartz, "Universals in the content and structure of values", Advances in Experimental
    Social Psychology 25, 1992. Schwartz et al., "Refining the theory of basic individual
    values", JPSP 103(4), 2012 (the circumplex and the PVQ).
    Lindley, "On a measure of the information provided by an experiment", Ann. Math. Statist.
    27, 1956. https://doi.org/10.1214/aoms/1177728069
    Chaloner and Verdinelli, "Bayesian experimental design: a review", Statist. Sci. 10, 1995.
    Paulhus, "Measurement and control of response bias" (social desirability), 1991.
"""

from jaxpapers.ivp._chat import ChatInterview, ChatModelProber, persona_chat_model
from jaxpapers.ivp._distill import Distilled, StudentConfig, distill_prober, transcript_tokens
from jaxpapers.ivp._inference import (
    answer_likelihood,
    conceal_prob,
    information_gain,
    profile_posterior_mean,
    update_posterior,
)
from jaxpapers.ivp._metrics import social_acceptability, spearman, top_k_accuracy
from jaxpapers.ivp._personas import PersonaConfig, Personas, profile_library, sample_personas
from jaxpapers.ivp._probers import (
    POLICIES,
    Episode,
    ProberConfig,
    Student,
    answer_tables,
    pooled_profile,
    probe,
    repeated_mask,
)
from jaxpapers.ivp._questions import (
    BankConfig,
    QuestionBank,
    answer_probs,
    answer_text,
    make_question_bank,
    parse_answer,
    question_text,
)
from jaxpapers.ivp._values import (
    CONTEXTS,
    DESIRABLE,
    VALUES,
    context_index,
    desirable_profile,
    profile_from_dict,
    value_index,
)

__all__ = [
    "CONTEXTS",
    "DESIRABLE",
    "POLICIES",
    "VALUES",
    "BankConfig",
    "ChatInterview",
    "ChatModelProber",
    "Distilled",
    "Episode",
    "PersonaConfig",
    "Personas",
    "ProberConfig",
    "QuestionBank",
    "Student",
    "StudentConfig",
    "answer_likelihood",
    "answer_probs",
    "answer_tables",
    "answer_text",
    "conceal_prob",
    "context_index",
    "desirable_profile",
    "distill_prober",
    "information_gain",
    "make_question_bank",
    "parse_answer",
    "persona_chat_model",
    "pooled_profile",
    "probe",
    "profile_from_dict",
    "profile_library",
    "profile_posterior_mean",
    "question_text",
    "repeated_mask",
    "sample_personas",
    "social_acceptability",
    "spearman",
    "top_k_accuracy",
    "transcript_tokens",
    "update_posterior",
    "value_index",
]
