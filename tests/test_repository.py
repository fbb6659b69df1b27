"""The repository speaks for itself, and what it shows a reader runs: every script in examples/
executes, and no shipped file points to notes the repository does not ship."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
SHIPPED = ["README.md", "jaxpapers", "kernels", "benchmarks", "examples", "tests"]
OUTSIDE = re.compile(r"\.\./shared|shared/(DESIGN|FACTS|PAPERS)|\b(DESIGN|FACTS|PAPERS)\.md")


def test_no_file_points_outside_the_repository():
    offenders = []
    for entry in SHIPPED:
        path = ROOT / entry
        files = [path] if path.is_file() else path.rglob("*")
        for f in files:
            if f.suffix not in {".py", ".md", ".toml", ".txt"} or f == Path(__file__):
                continue
            for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
                if OUTSIDE.search(line):
                    offenders.append(f"{f.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "files pointing outside the repository:\n" + "\n".join(offenders)


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(script, tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu", MPLBACKEND="Agg")
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip(), f"{script.name} printed nothing"
    # an example says what a user should see, and whether this run shows it
    expected = [ln for ln in proc.stdout.splitlines() if ln.startswith("Expected")]
    assert expected, f"{script.name} prints no 'Expected: ...' line"


def test_examples_state_their_expected_outcome():
    """Cheap static half of the check above: each example's docstring says what a user should
    see and the script prints an ``Expected: ...`` line."""
    missing = []
    for path in EXAMPLES:
        source = path.read_text()
        doc = ast.get_docstring(ast.parse(source)) or ""
        says = "what you should see" in doc.lower() or "expected" in doc.lower()
        if not says or '"Expected' not in source:
            missing.append(path.name)
    assert not missing, f"examples without an expected outcome: {missing}"
