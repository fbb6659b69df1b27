"""Smoke test of the P08 experiments at tiny size (one shared protocol run)."""

from __future__ import annotations

import json

from jaxpapers.core.experiment import run_paper


def test_p08_smoke(tmp_path):
    record = run_paper("P08", tmp_path, size="smoke", seeds=2, log=lambda _: None)
    ids = [e["id"] for e in record["experiments"]]
    assert ids == ["forgetting", "ablations", "temporal_coherence", "scoa_exactness"]
    for e in record["experiments"]:
        assert e["verdict"] in ("holds", "does not hold", "inconclusive")
        for row in e["rows"]:
            assert len(row["seeds"]) == 2
    sanity = record["experiments"][-1]
    # The known answers hold even at smoke size: SCOA and folding are exact.
    assert sanity["verdict"] == "holds", sanity
    saved = json.loads((tmp_path / "P08" / "result.json").read_text())
    assert saved["paper"] == "P08"
    assert (tmp_path / "P08" / "forgetting.png").exists()
