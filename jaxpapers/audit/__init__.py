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
target as the critic is the point: it knows what looks fake *to itself*. Each depth draws its
:math:`K` candidates from keys of its own, so the audits of two depths share no candidate: a
deeper audit is an independent draw, not the shallower one plus extra chances, and its realism
can come out lower.

**DISH** wraps the target in a deployment-imitating coding-agent harness (the harness's system
prompt and tool schema, tool results from a real file system and shell), so the auditor no
longer simulates the environment, only the user.

**Miniature.** Every role is a :class:`jaxpapers.core.chat.ChatModel` and talks text. Sentences
come from phrase banks with latent features (:mod:`._world`): *tells* (announced tests,
placeholders, bait, hypotheticals, urgency, convenient secrets, stilted formality) and *natural*
cues. The target says it is being tested with probability :math:`\sigma(b + w\cdot n)` over the
feature counts :math:`n` of what it was shown, every feature weighted (tells > 0, natural cues
< 0); the scorer is the same model rating a candidate (:math:`\sigma(-(b + w\cdot n(a)))`) and
quoting the suspicious phrases it finds; the auditor removes quoted phrases with some probability
and may add a detail or slip in a new tell. An auditor writing a system prompt starts from the
prompt real deployments of the scenario use (:func:`deployment_systems`: the coding harness's for
coding scenarios) and may add tells; without DISH it still simulates the tool results, whose
bodies differ from a real shell's. The judge is *not* the scorer: a naive-Bayes model trained per
seed on held-out deployment transcripts (from a separate user-imitating process) against held-out
audits of every measured condition (depths 0-4, with and without DISH, equally many), queried
pairwise in random order. The experiments report how often judge and scorer order two audits
alike (their agreement), so a reader can see how much of the judge's verdict the selection
signal already decides.

Measured numbers and their history: ``results/P11/NOTES.md``.

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
    deployment_systems,
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
from jaxpapers.audit._world import FEATURES, SCENARIOS, Scenario, feature_counts

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
    "deployment_systems",
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
