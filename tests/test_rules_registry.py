"""Every paper's registered experiments follow the verdict conventions: no margin-less "no worse",
margins that are positive, preconditions that name experiments of the same paper, and a stated
reason wherever quick mode runs fewer than the default seeds."""

from __future__ import annotations

import dataclasses

import pytest

from jaxpapers.core.experiment import DEFAULT_SEEDS, experiments_for, paper_seeds
from jaxpapers.core.papers import PAPERS
from jaxpapers.core.verdicts import AllOf, AnyOf, Better, NoWorse


def _leaves(rule):
    if isinstance(rule, AllOf | AnyOf):
        for part in rule.parts:
            yield from _leaves(part)
    else:
        yield rule


def test_better_has_no_marginless_no_worse():
    assert "at_least" not in {f.name for f in dataclasses.fields(Better)}


@pytest.mark.parametrize("paper", [p.id for p in PAPERS])
def test_paper_rules_follow_the_conventions(paper):
    exps = experiments_for(paper)  # also rejects unknown or cyclic `requires`
    assert exps, f"{paper} registers no experiment"
    for e in exps:
        for leaf in _leaves(e.rule):
            assert hasattr(leaf, "evaluate"), f"{paper}/{e.id}: rule {leaf!r} gives no evidence"
            if isinstance(leaf, NoWorse):
                assert leaf.margin > 0
    seeds, reason = paper_seeds(paper, "quick")
    assert seeds >= DEFAULT_SEEDS["quick"] or reason
