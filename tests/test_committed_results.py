"""The committed results agree with the code that judges them: every verdict, rule text and
comparison in ``results/*/result.json`` (and ``results/full``) is what the registered rules compute
now from the stored per-seed rows (:func:`jaxpapers.core.experiment.rejudge`), and
``results/RESULTS.md`` is rendered from those files. A change to a rule, a threshold or a
precondition therefore fails here until the committed results are judged again."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from jaxpapers.core.experiment import rejudge, render_markdown

RESULTS = Path(__file__).resolve().parents[1] / "results"
FILES = sorted(RESULTS.glob("*/result.json")) + sorted((RESULTS / "full").glob("*/result.json"))


def _number(x):
    return np.nan if x is None else x


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(RESULTS).parent))
def test_committed_verdicts_are_what_the_rules_compute(path):
    old = json.loads(path.read_text())
    new = json.loads(json.dumps(rejudge(old)))
    assert [e["id"] for e in new["experiments"]] == [e["id"] for e in old["experiments"]]
    for a, b in zip(old["experiments"], new["experiments"], strict=True):
        where = f"{path.parent.name}/{a['id']}"
        assert a["rows"] == b["rows"], where
        for key in ("rule", "verdict", "rule_verdict", "precondition"):
            assert a.get(key) == b.get(key), (where, key, a.get(key), b.get(key))
        assert len(a["comparisons"]) == len(b["comparisons"]), where
        for ca, cb in zip(a["comparisons"], b["comparisons"], strict=True):
            assert (ca["verdict"], ca.get("confidence"), ca["n"]) == (
                cb["verdict"],
                cb.get("confidence"),
                cb["n"],
            ), where
            # Recomputed from the same float64 rows by the same NumPy code: equal up to the last
            # bits that a different BLAS or summation order could change.
            for key in ("estimate", "low", "high"):
                np.testing.assert_allclose(
                    _number(ca[key]), _number(cb[key]), rtol=1e-9, atol=1e-12, err_msg=where
                )


def test_results_md_is_rendered_from_the_committed_results():
    assert render_markdown(RESULTS) == (RESULTS / "RESULTS.md").read_text()


def test_results_md_names_what_quick_mode_leaves_out():
    """An experiment that a size leaves out (``Experiment.sizes``) is named in the runs list, with
    its committed run under ``results/full`` when there is one."""
    text = render_markdown(RESULTS)
    assert (
        "not run at size quick: lambda_sweep (runs at smoke, full; a run of it: `full/P01/`)"
        in (text)
    )
