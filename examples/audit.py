"""A Petri-style audit with critique refinement and DISH, and its realism win rate.

Every role is a chat model: swap any of them for ``OpenAIChat(base_url=..., model=...)`` to audit
a real model served by vLLM, llama.cpp, Ollama or ``jaxpapers serve`` (the PRNG key travels as
the request's ``seed``). With ``OPENAI_BASE_URL`` set, the target below is that server's model.

    python examples/audit.py
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

auditor, scorer, user = make_writer(), make_scorer(), make_writer(USER, name="user")
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
    print(f"depth {depth}: win rate {win.rate:.2f} (95% CI {win.low:.2f}-{win.high:.2f})")
