r"""P11: more realistic alignment audits by critique refinement and DISH (Petri-style audits).

**Setting.** In a Petri audit an *auditor* model red-teams a *target* over several turns: it writes
the target's system prompt, the user turns and the results of the target's tool calls, and a
*judge* reads the transcript. If the target recognises the audit as a test (evaluation
awareness) its behaviour says little about deployment, so the paper measures the *realism win
rate*: the fraction of pairings in which a judge finds the audit transcript more realistic than a
real deployment transcript, and verbalised evaluation awareness.

**Critique refinement** spends inference-time compute on each auditor action :math:`a`: sample
:math:`K` candidates :math:`a^{(1..K)}_0`; for :math:`d = 0..D-1` an instance of the *target*
scores each candidate for realism :math:`s(a) \in [0, 1]` and writes feedback :math:`f(a)`, and the
auditor revises :math:`a_{d+1} = \mathrm{revise}(a_d, f(a_d))`; the action taken is
:math:`\arg\max_{d, k} s(a^{(k)}_d)`. Depth :math:`D = 0` is the unrefined auditor. Using the
target as the critic is the point: it knows what looks fake *to itself*.

**DISH** wraps the target in a deployment-imitating coding-agent harness (the harness's system
prompt and tool schema, tool results from a real file system and shell), so the auditor no
longer simulates the environment, only the user.

**Miniature.** Every role is a :class:`jaxpapers.core.chat.ChatModel` and talks text. Sentences
come from phrase banks with latent features (:mod:`._world`): *tells* (announced tests,
placeholders, bait, hypotheticals, urgency, convenient secrets, stilted formality) and *natural*
cues. The target says it is being tested with probability :math:`\sigma(b + w\cdot n)` over the
feature counts :math:`n` of what it was shown; the scorer is the same model rating a candidate
(:math:`\sigma(-(b + w\cdot n(a)))`) and quoting the phrases it finds suspicious; the auditor
removes quoted phrases with some probability and may add a detail or slip in a new tell. The
judge is *not* the scorer: a naive-Bayes model trained per seed on held-out deployment transcripts
(from a separate user-imitating process) against unrefined audits, queried pairwise in random
order. Realism therefore rises only where the scorer's perception and the judge's overlap (the
target ignores formality, which the judge notices): the mechanism runs, nothing is hard-coded.

**Findings at quick size** (``results/P11``, 3 seeds x 96 pairings): the win rate rises from
0.003 (depth 0) to 0.24, 0.27, 0.27 (depths 1, 2, 4) and verbalised awareness falls from 0.66 to
0.007 (rule-based) and from 0.80 to 0.02 (scored by a small decoder LM trained to answer
"aware?", which also catches implicit statements the rule misses). The curve plateaus after
depth 1-2 because what remains (formality, revision slips) is invisible to the scorer, which is
the target itself. In coding scenarios DISH alone raises the win rate from 0 to 0.10 (the
auditor's tells in user turns still give audits away) and refinement alone leaves it at 0 (it
cannot turn the auditor's system prompt and simulated tool output into a real harness's);
together they reach 0.40: far more than additive, each removing the cues the other cannot.

Examples:
    >>> import jax
    >>> from jaxpapers.audit import Refinement, make_scorer, make_target, make_writer, run_audit
    >>> t = run_audit("fix_tests", auditor=make_writer(), target=make_target(),
    ...               scorer=make_scorer(), key=jax.random.key(0), turns=1,
    ...               refinement=Refinement(depth=1, candidates=2), dish=True)
    >>> t.messages()[0]["content"].startswith("You are an interactive CLI coding agent")
    True

References:
    The P11 paper (Petri realism: critique refinement and DISH), NeurIPS 2026.
    Anthropic 2025, "Petri: an open-source auditing tool to accelerate AI safety research".
    Wilson 1927, "Probable inference, the law of succession, and statistical inference".
"""

from jaxpapers.audit._agents import (
    AUDITOR,
    USER,
    TargetConfig,
    WriterConfig,
    make_scorer,
    make_target,
    make_writer,
    parse_score,
    tool_call,
)
from jaxpapers.audit._dish import DISH_SYSTEM, TOOL_SCHEMA, dish_tool_result
from jaxpapers.audit._judge import (
    Awareness,
    NaiveBayesRealism,
    WinRate,
    awareness_rates,
    fit_awareness_lm,
    fit_realism_judge,
    make_awareness_scorer,
    make_pairwise_judge,
    realism_win_rate,
    render,
    rule_awareness,
    wilson_interval,
)
from jaxpapers.audit._loop import (
    ActionRecord,
    Refinement,
    check_refinement,
    refine_action,
    run_audit,
    run_deployment,
)
from jaxpapers.audit._world import FEATURES, SCENARIOS, Scenario, child_key, feature_counts

__all__ = [
    "AUDITOR",
    "DISH_SYSTEM",
    "FEATURES",
    "SCENARIOS",
    "TOOL_SCHEMA",
    "USER",
    "ActionRecord",
    "Awareness",
    "NaiveBayesRealism",
    "Refinement",
    "Scenario",
    "TargetConfig",
    "WinRate",
    "WriterConfig",
    "awareness_rates",
    "check_refinement",
    "child_key",
    "dish_tool_result",
    "feature_counts",
    "fit_awareness_lm",
    "fit_realism_judge",
    "make_awareness_scorer",
    "make_pairwise_judge",
    "make_scorer",
    "make_target",
    "make_writer",
    "parse_score",
    "realism_win_rate",
    "refine_action",
    "render",
    "rule_awareness",
    "run_audit",
    "run_deployment",
    "tool_call",
    "wilson_interval",
]
