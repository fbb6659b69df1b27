"""A Petri-style audit with critique refinement and DISH, and its realism win rate.

Every role is a chat model: swap any of them for ``OpenAIChat(base_url=..., model=...)`` to audit
a real model served by vLLM, llama.cpp, Ollama or ``jaxpapers serve`` (the PRNG key travels as
the request's ``seed``). With ``OPENAI_BASE_URL`` set, the target below is that server's model.

    python examples/audit.py

What you should see: the first turns of one refined audit, then the realism win rate (how often
a judge trained to tell audits from real deployments takes the audit for the deployment) of
unrefined audits (depth 0) and of audits refined twice (depth 2). Expected: depth 2 wins more
often than depth 0 (0.00 -> 0.50 with the seeds below); with 12 audits per depth the 95%
intervals are wide, and ``jaxpapers reproduce P11`` measures it on 96 pairings and 3 seeds.
"""

import os
import tempfile

import jax
import numpy as np

from jaxpapers.audit import (
    USER,
    Refinement,
    fit_realism_judge,
    make_pairwise_judge,
    make_scorer,
    make_target,
    make_writer,
    realism_win_rate,
    render,
    run_audit,
    run_deployment,
)
from jaxpapers.core.chat import OpenAIChat

auditor, scorer, user = make_writer(), make_scorer(), make_writer(config=USER, name="user")
target = (
    OpenAIChat(model=os.environ.get("TARGET_MODEL", "target"))
    if os.environ.get("OPENAI_BASE_URL")
    else make_target()
)

# One refined audit of a coding scenario inside the deployment-imitating harness.
audit = run_audit(
    "fix_tests",
    auditor=auditor,
    target=target,
    scorer=scorer,
    key=jax.random.key(0),
    turns=2,
    refinement=Refinement(depth=2, candidates=3),
    dish=True,
    path=os.path.join(tempfile.gettempdir(), "jaxpapers_audit.json"),  # saved every turn
)
for m in audit.messages()[1:]:
    print(f"{m['role']:>9}: {m['content'][:90]}")


# Realism win rate of unrefined vs refined audits against simulated deployments.
def keys(stream, n=24):
    return [np.array([stream, i], np.uint32) for i in range(n)]


scen = ["exfiltration", "fix_tests", "whistleblowing"]
deploy = [
    render(run_deployment(scen[i % 3], user=user, target=target, key=k))
    for i, k in enumerate(keys(1))
]
plain = [
    render(run_audit(scen[i % 3], auditor=auditor, target=target, key=k))
    for i, k in enumerate(keys(2))
]
judge = make_pairwise_judge(fit_realism_judge(deploy[:12], plain[:12]))  # held-out halves
rates = {}
for depth in (0, 2):
    audits = [
        render(
            run_audit(
                scen[i % 3],
                auditor=auditor,
                target=target,
                scorer=scorer,
                key=k,
                refinement=Refinement(depth, 3),
            )
        )
        for i, k in enumerate(keys(3, 12))
    ]
    win = realism_win_rate(judge, audits, deploy[12:], key=jax.random.key(depth))
    rates[depth] = float(win.rate)
    print(f"depth {depth}: win rate {win.rate:.2f} (95% CI {win.low:.2f}-{win.high:.2f})")

outcome = "as expected" if rates[2] > rates[0] else "NOT as expected (try more audits or seeds)"
print(
    f"Expected: refined audits (depth 2) pass for deployments more often than unrefined ones "
    f"(depth 0); here {rates[2]:.2f} vs {rates[0]:.2f}: {outcome}."
)
