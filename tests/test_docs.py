"""The documentation site: a strict mkdocs build, a page per implemented paper, every exported name
in the API reference, and the Python snippets of the hand-written pages executed."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("mkdocs") is None
        or importlib.util.find_spec("mkdocstrings_handlers") is None
        or importlib.util.find_spec("material") is None,
        reason="the docs extra is not installed (pip install -e '.[docs]')",
    ),
]


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)


HAND_WRITTEN = sorted(DOCS.glob("*.md"))
WITH_SNIPPETS = [p for p in HAND_WRITTEN if _python_blocks(p)]


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """Build the site with ``--strict`` (any warning, e.g. a broken cross-reference, fails).

    Session scope: the module's tests are one xdist group, but a worker may interleave other
    modules' tests between them, which would tear a module-scoped site down and build it again.
    """
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        warnings = [
            line for line in proc.stderr.splitlines() if "WARNING" in line or "Error" in line
        ]
        pytest.fail(
            "mkdocs build --strict failed:\n" + "\n".join(warnings or [proc.stderr[-4000:]])
        )
    return out


def _gen_pages():
    spec = importlib.util.spec_from_file_location("jaxpapers_docs_gen_pages", DOCS / "gen_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_implemented_paper_has_a_page(site):
    from jaxpapers.core.papers import PAPERS

    index = (site / "papers" / "index.html").read_text()
    for paper in PAPERS:
        page = site / "papers" / paper.id / "index.html"
        assert page.is_file() == paper.implemented, (paper.id, paper.implemented)
        if paper.implemented:
            html = page.read_text()
            assert paper.title.split(":")[0] in html
            assert f'href="{paper.id}/"' in index
            if (ROOT / "results" / paper.id / "result.json").is_file():
                assert "<table>" in html, f"{paper.id}: no results table"
            # every plot shown is shipped with the site (results/ may change while this runs)
            for src in re.findall(r'<img[^>]* src="([^"]+)"', html):
                assert (page.parent / src).resolve().is_file(), (paper.id, src)
            if list((ROOT / "results" / paper.id).glob("*.png")):
                assert "<img" in html, f"{paper.id}: results/{paper.id} has plots, page shows none"


def test_every_exported_name_is_in_the_reference(site):
    gen = _gen_pages()
    modules = gen.reference_modules()
    from jaxpapers.core.papers import PAPERS

    expected = {p.import_name for p in PAPERS if p.implemented} | {"jaxpapers_kernels"}
    assert expected <= set(modules)
    assert any(m.startswith("jaxpapers.core.") for m in modules)
    missing = []
    for module_name in modules:
        html = (site / "reference" / module_name / "index.html").read_text()
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or gen.public_names(module_name)
        missing += [f"{module_name}.{n}" for n in names if f'id="{module_name}.{n}"' not in html]
    assert not missing, f"not in the API reference: {missing}"


def test_reference_shows_shapes(site):
    html = (site / "reference" / "jaxpapers.ievi" / "index.html").read_text()
    assert "Float[Array, &#39;A S S&#39;]" in html or "Float[Array, 'A S S']" in html


def test_cli_page_has_every_command_and_both_schemas(site):
    html = (site / "cli" / "index.html").read_text()
    for command in ("list", "reproduce", "bench"):
        assert f"jaxpapers {command}" in html
    assert "lower_is_better" in html  # result.json schema
    assert "&quot;unit&quot;" in html or '"unit"' in html  # benchmark rows


@pytest.mark.parametrize("page", WITH_SNIPPETS, ids=lambda p: p.name)
def test_snippets_of_hand_written_pages_run(page):
    """A page's python blocks run in order in one fresh interpreter (a stale name fails)."""
    code = "\n\n".join(_python_blocks(page))
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"{page.name}:\n{proc.stderr[-3000:]}"


def test_hand_written_pages_have_snippets():
    names = {p.name for p in WITH_SNIPPETS}
    assert {"getting-started.md", "scaling.md", "kernels.md"} <= names


def test_public_name_without_docstring_is_reported(monkeypatch):
    """The hook turns a public function or class without a docstring into a build warning."""
    import types

    module = types.ModuleType("jaxpapers_docs_probe")

    def documented():
        """Has one."""

    def bare():
        pass

    class Bare:
        pass

    module.documented, module.bare, module.Bare, module.CONSTANT = documented, bare, Bare, 3
    module.__all__ = ["CONSTANT", "Bare", "bare", "documented"]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    gen = _gen_pages()
    assert gen.missing_docstrings(module.__name__) == [
        "jaxpapers_docs_probe.Bare",
        "jaxpapers_docs_probe.bare",
    ]
