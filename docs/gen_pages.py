"""mkdocs hook: generates the paper pages, the API reference and the CLI page at build time.

Nothing is written into the source tree: the pages are added to mkdocs' file collection in
memory (``File.generated``), so a paper that becomes implemented appears on the next build without
any hand-editing, and ``jaxpapers list`` and the site agree (both read ``Paper.implemented``).

Sources, per implemented paper: the registry (``jaxpapers.core.papers.PAPERS`` and
``jaxpapers.core.experiment.experiments_for``), the package docstring (the derivation), the example
script ``examples/<module>.py``, ``results/<id>/result.json`` with its PNG plots, and the paper's
section of ``benchmarks/README.md``. The reference lists every name of each package's
``__all__`` (paper packages, ``jaxpapers.core`` modules, ``jaxpapers_kernels``) and renders it with
mkdocstrings, so a broken cross-reference in a docstring fails ``mkdocs build --strict``.

A public function or class without a docstring is logged as a warning (so ``--strict`` fails and
names it); a paper whose experiments cannot be imported is logged as a warning too. Docstring
style problems (an ``Args:`` entry that griffe cannot match, say) do not fail the build.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import pkgutil
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

DOCS = Path(__file__).resolve().parent
if str(DOCS) not in sys.path:
    sys.path.insert(0, str(DOCS))
import rst_dialect  # noqa: E402  (the docstring dialect: roles, math, literal blocks)

log = logging.getLogger("mkdocs.plugins.jaxpapers")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Hand-written pages, in navigation order; the generated ones are inserted around them.
HAND_WRITTEN = [
    ("Home", "index.md"),
    ("Getting started", "getting-started.md"),
    ("Scaling out", "scaling.md"),
    ("Kernels", "kernels.md"),
]
# Modules of jaxpapers.core that are documented (private ``_x`` modules are skipped).
CORE_PACKAGE = "jaxpapers.core"
KERNELS_PACKAGE = "jaxpapers_kernels"
# Public names that still lack a docstring when this list was written: logged, not failed. Delete
# an entry once its docstring exists; any other public name without one fails the strict build.
KNOWN_UNDOCUMENTED: frozenset[str] = frozenset()


# --------------------------------------------------------------------------------------------
# What is documented
# --------------------------------------------------------------------------------------------


def implemented_papers() -> list[Any]:
    """The implemented papers of the registry, in registry order."""
    from jaxpapers.core.papers import PAPERS

    return [p for p in PAPERS if p.implemented]


def core_modules() -> list[str]:
    """Every public module of ``jaxpapers.core`` (recursively), sorted."""
    core = importlib.import_module(CORE_PACKAGE)
    names = []
    for info in pkgutil.walk_packages(core.__path__, prefix=f"{CORE_PACKAGE}."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        names.append(info.name)
    return sorted(names)


def public_names(module_name: str) -> list[str]:
    """``__all__`` of the module, or its own public functions and classes when it has none."""
    module = importlib.import_module(module_name)
    exported = getattr(module, "__all__", None)
    if exported is not None:
        return list(exported)
    names = []
    for name, obj in vars(module).items():
        if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if getattr(obj, "__module__", None) == module_name:
            names.append(name)
    return names


def reference_modules() -> list[str]:
    """Every module or package whose public names get a reference page."""
    papers = [p.import_name for p in implemented_papers()]
    return [*papers, *core_modules(), KERNELS_PACKAGE]


def missing_docstrings(module_name: str) -> list[str]:
    """Public functions and classes of the module that have no docstring of their own."""
    module = importlib.import_module(module_name)
    missing = []
    for name in public_names(module_name):
        obj = getattr(module, name, None)
        if callable(obj) and not inspect.isclass(obj):
            obj = inspect.unwrap(obj)  # jitted functions keep the wrapped one's docstring
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue  # constants and instances carry their type's docstring, not their own
        if not (obj.__doc__ or "").strip():
            missing.append(f"{module_name}.{name}")
    return missing


# --------------------------------------------------------------------------------------------
# Page bodies
# --------------------------------------------------------------------------------------------


def _slug(module_name: str) -> str:
    return f"reference/{module_name}.md"


def _md(text: str, scope: str, heading_level: int | None = None) -> str:
    """Markdown for docstring text (roles become links, math is typeset)."""
    return rst_dialect.convert(
        text, scope=scope, resolver=rst_dialect.site_resolver(), heading_level=heading_level
    )


def _is_documented_object(obj: Any) -> bool:
    """Functions, classes and jitted functions get a mkdocstrings entry; the rest are constants."""
    if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj):
        return True
    return callable(obj) and inspect.isfunction(inspect.unwrap(obj))


def _constant_entry(module_name: str, name: str, obj: Any) -> list[str]:
    """A heading (anchor ``module.name``) with the constant's type and value."""
    value = repr(obj)
    if len(value) > 200:
        value = value[:200] + " ..."
    return [
        f"## `{name}` {{#{module_name}.{name} data-toc-label='{name}'}}",
        "",
        f"`{module_name}.{name}`: constant of type `{type(obj).__name__}`.",
        "",
        "```text",
        value,
        "```",
        "",
    ]


def reference_page(module_name: str) -> str:
    """One reference page: the module's summary line, then every public name."""
    module = importlib.import_module(module_name)
    doc = inspect.getdoc(module) or ""
    summary = doc.strip().split("\n\n")[0] if doc.strip() else ""
    lines = [f"# `{module_name}` {{#{module_name}}}", "", _md(summary, module_name), ""]
    names = public_names(module_name)
    if not names:
        lines.append("This module exports no public names.")
    for name in names:
        obj = getattr(module, name)
        if _is_documented_object(obj):
            lines += [f"::: {module_name}.{name}", ""]
        else:
            lines += _constant_entry(module_name, name, obj)
    return "\n".join(lines)


def reference_index(modules: list[str]) -> str:
    lines = [
        "# API reference",
        "",
        "Every name that a package exports (its `__all__`), with signatures and shapes from the",
        "docstrings. Generated at build time; a new public name appears on the next build.",
        "",
    ]
    groups = {
        "Papers": [m for m in modules if m.count(".") == 1 and not m.startswith(CORE_PACKAGE)],
        "Shared core (`jaxpapers.core`)": [m for m in modules if m.startswith(CORE_PACKAGE)],
        "Pallas kernels (`jaxpapers_kernels`)": [m for m in modules if m == KERNELS_PACKAGE],
    }
    for title, mods in groups.items():
        lines += [f"## {title}", ""]
        lines += [f"- [`{m}`]({m}.md): {len(public_names(m))} names" for m in mods]
        lines.append("")
    return "\n".join(lines)


def _fmt(x: Any) -> str:
    if not isinstance(x, int | float):
        return str(x)
    x = float(x)
    if x != x:
        return "nan"
    if x == 0:
        return "0"
    if 1e4 <= abs(x) < 1e9 and x == round(x):
        return f"{x:,.0f}"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:.4g}"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def results_section(paper: Any, files: Files, config: Any) -> list[str]:
    """Results table and plots of ``results/<id>/result.json`` (plots copied into the site)."""
    pdir = ROOT / "results" / paper.id
    path = pdir / "result.json"
    lines = ["## Results", ""]
    if not path.is_file():
        lines += [
            f"No committed results yet: run `jaxpapers reproduce {paper.id} --quick` to make "
            f"`results/{paper.id}/result.json`.",
            "",
        ]
        return lines
    record = json.loads(path.read_text())
    lines += [
        f"From `results/{paper.id}/result.json`: size `{record.get('size')}`, "
        f"{record.get('seeds')} seeds, {_fmt(record.get('runtime_s', float('nan')))} s in all "
        f"(`jaxpapers reproduce {paper.id} --{record.get('size', 'quick')}`). Rows are mean ± "
        "standard deviation over seeds; the verdict is computed by the rule, never typed.",
        "",
    ]
    shown: set[str] = set()
    scope = f"{paper.import_name}.experiments"
    for exp in record.get("experiments", []):
        arrow = "lower is better" if exp.get("lower_is_better") else "higher is better"
        lines += [
            f"### `{exp.get('id')}`: {exp.get('verdict')}",
            "",
            f"*Claim.* {_md(exp.get('claim', ''), scope)}",
            "",
            f"*Metric.* {_md(exp.get('metric', ''), scope)} ({arrow}). "
            f"*Rule.* `{exp.get('rule', '')}`.",
            "",
            "| method | role | mean | std | seeds |",
            "|---|---|---|---|---|",
        ]
        for r in exp.get("rows", []):
            seeds = ", ".join(_fmt(s) for s in r.get("seeds", []))
            lines.append(
                f"| {_cell(_md(str(r.get('method')), scope))} | {r.get('role')} "
                f"| {_fmt(r.get('mean'))} "
                f"| {_fmt(r.get('std'))} | {seeds} |"
            )
        lines.append("")
        for plot in exp.get("plots", []) or []:
            if (pdir / plot).is_file():
                lines += [_image(paper, pdir / plot, files, config), ""]
                shown.add(plot)
    rest = sorted(p.name for p in pdir.glob("*.png") if p.name not in shown)
    if rest:
        lines += ["### Plots", ""]
        lines += [_image(paper, pdir / name, files, config) + "\n" for name in rest]
    return lines


# A plot wider than this many times its height is a strip: shrunk to the page width its labels
# would be a few pixels tall, so it is shown at its own size in a horizontally scrolling box.
WIDE_ASPECT = 2.5


def png_size(png: Path) -> tuple[int, int]:
    """(width, height) in pixels from the PNG header (IHDR), without an image library."""
    head = png.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{png} is not a PNG file")
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _image(paper: Any, png: Path, files: Files, config: Any) -> str:
    """The plot, linked to the full-size file; a wide strip scrolls at its own size."""
    uri = f"papers/{paper.id}/{png.name}"
    if files.get_file_from_path(uri) is None:
        files.append(File.generated(config, uri, abs_src_path=str(png)))
    src = f"{paper.id}/{png.name}"
    width, height = png_size(png)
    wide = width > WIDE_ASPECT * height
    kind = "jxp-plot jxp-wide" if wide else "jxp-plot"
    title = "open full size" + (" (scroll sideways)" if wide else "")
    img = f"![{png.stem}]({src}){{ width={width} height={height} loading=lazy }}"
    return f'[{img}]({src}){{ .{kind.replace(" ", " .")} title="{title}" }}'


def benchmark_section(paper: Any) -> list[str]:
    """The paper's section of benchmarks/README.md (heading ``## <id> ...``), if it has one."""
    readme = ROOT / "benchmarks" / "README.md"
    if not readme.is_file():
        return []
    sections = re.split(r"(?m)^## ", readme.read_text())
    for section in sections[1:]:
        heading, _, body = section.partition("\n")
        if heading.split()[:1] == [paper.id]:
            body = re.sub(r"(?m)^(#{3,}) ", r"#\1 ", body)  # keep it under our own heading
            return [
                "## Benchmarks",
                "",
                f"From the benchmark notes of the repository (`jaxpapers bench {paper.module}`).",
                "",
                body.strip(),
                "",
            ]
    return []


def _experiments_table(paper: Any) -> list[str]:
    from jaxpapers.core.experiment import experiments_for

    try:
        experiments = experiments_for(paper)
    except Exception as err:  # a paper under construction must not hide the others
        log.warning(f"{paper.id}: its experiments could not be imported ({err!r})")
        return ["## Experiments", "", f"The experiments could not be imported: `{err!r}`.", ""]
    lines = [
        "## Experiments",
        "",
        f"Registered in `{paper.import_name}.experiments`; run them with "
        f"`jaxpapers reproduce {paper.id} --quick` (or `--smoke`, `--full`).",
        "",
        "| id | claim | metric | rule |",
        "|---|---|---|---|",
    ]
    scope = f"{paper.import_name}.experiments"
    for exp in experiments:
        rule = exp.rule.describe(exp.lower_is_better)
        claim, metric = _md(exp.claim, scope), _md(exp.metric, scope)
        lines.append(
            f'| <code class="jxp-id">{exp.id}</code> | {_cell(claim)} | {_cell(metric)} '
            f"| {_cell(rule)} |"
        )
    return [*lines, ""]


def _derivation(paper: Any) -> list[str]:
    module = importlib.import_module(paper.import_name)
    doc = inspect.getdoc(module) or "(no package docstring)"
    summary, _, rest = doc.partition("\n")
    scope = paper.import_name
    return [
        f"*{_md(summary.strip(), scope)}*",
        "",
        "## Method and derivation",
        "",
        f"From the docstring of [`{paper.import_name}`](../{_slug(paper.import_name)}).",
        "",
        _md(rest.strip() if rest.strip() else summary.strip(), scope, heading_level=3),
        "",
    ]


def _example(paper: Any) -> list[str]:
    script = ROOT / "examples" / f"{paper.module}.py"
    if not script.is_file():
        return []
    return [
        "## Runnable example",
        "",
        f"`examples/{paper.module}.py`; run it with `python examples/{paper.module}.py`:",
        "",
        "```python",
        script.read_text().rstrip(),
        "```",
        "",
    ]


def paper_page(paper: Any, files: Files, config: Any) -> str:
    names = public_names(paper.import_name)
    lines = [
        f"# {paper.id}: {paper.title}",
        "",
        f"Package `{paper.import_name}`; API reference: [`{paper.import_name}`]"
        f"(../{_slug(paper.import_name)}) ({len(names)} public names).",
        "",
        *_derivation(paper),
        *_example(paper),
        "## Public API",
        "",
        ", ".join(f"[`{n}`](../{_slug(paper.import_name)}#{paper.import_name}.{n})" for n in names)
        or "(none exported)",
        "",
        *_experiments_table(paper),
        *results_section(paper, files, config),
        *benchmark_section(paper),
    ]
    return "\n".join(lines)


def papers_index(papers: list[Any]) -> str:
    from jaxpapers.core.papers import PAPERS

    done = {p.id for p in papers}
    lines = [
        "# Papers",
        "",
        "The same list as `jaxpapers list`; an implemented paper has a page generated from its",
        "registry entry, docstrings, results and benchmarks.",
        "",
        "| id | module | status | title |",
        "|---|---|---|---|",
    ]
    for p in PAPERS:
        if p.id in done:
            lines.append(f"| [{p.id}]({p.id}.md) | `{p.module}` | implemented | {p.title} |")
        else:
            lines.append(f"| {p.id} | `{p.module}` | not yet | {p.title} |")
    return "\n".join([*lines, ""])


def _schema_block(doc: str, start: str) -> str:
    """The paragraph of ``doc`` that begins with ``start`` and the literal block after it."""
    i = doc.find(start)
    if i < 0:
        raise ValueError(f"the docstring no longer contains {start!r}")
    return doc[i:].split("\n\n\n")[0]


def cli_page() -> str:
    from jaxpapers import cli
    from jaxpapers.core import bench, experiment

    parser = cli._build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    lines = [
        "# Command line and output schemas",
        "",
        "The console script `jaxpapers` (also `python -m jaxpapers`) has three commands. Unknown",
        "paper ids, bad flags and unwritable output folders exit with status 2 and one message.",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
        "",
    ]
    for name, subparser in sub.choices.items():
        lines += [f"## `jaxpapers {name}`", "", "```text", subparser.format_help().rstrip()]
        lines += ["```", ""]
    exp_doc = inspect.getdoc(experiment) or ""
    bench_doc = inspect.getdoc(bench) or ""
    schema = _schema_block(exp_doc, "Schema of ``result.json``")
    head, _, body = schema.partition("::")
    lines += [
        "## `result.json`",
        "",
        "`jaxpapers reproduce --out DIR` writes `DIR/<paper id>/result.json` (one per paper, "
        "rewritten atomically after each experiment) and `DIR/RESULTS.md`. "
        f"{head.strip().replace('``', '`')}:",
        "",
        "```text",
        textwrap.dedent(body).strip("\n"),
        "```",
        "",
        "From the docstring of [`jaxpapers.core.experiment`]"
        f"({_slug('jaxpapers.core.experiment')}):",
        "",
        _md(exp_doc.split("Schema of")[0].strip(), "jaxpapers.core.experiment", heading_level=3),
        "",
        "## Benchmark rows",
        "",
        "`jaxpapers bench NAME --out DIR` writes `DIR/bench/NAME.json`, a list of rows. From the "
        f"docstring of [`jaxpapers.core.bench`]({_slug('jaxpapers.core.bench')}):",
        "",
        _md(bench_doc, "jaxpapers.core.bench", heading_level=3),
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# mkdocs hooks
# --------------------------------------------------------------------------------------------


def _generated(config: Any) -> Iterator[tuple[str, str]]:
    """(uri, title) of every generated page, in navigation order."""
    yield "papers/index.md", "Overview"
    for p in implemented_papers():
        yield f"papers/{p.id}.md", f"{p.id} {p.module}"


def on_config(config: Any) -> Any:
    """Build the navigation: hand-written pages, papers, reference, CLI."""
    nav: list[Any] = [{title: uri} for title, uri in HAND_WRITTEN]
    nav.append({"Papers": [{title: uri} for uri, title in _generated(config)]})
    nav.append({"Command line and schemas": "cli.md"})
    modules = reference_modules()
    nav.append(
        {"API reference": [{"Overview": "reference/index.md"}] + [{m: _slug(m)} for m in modules]}
    )
    config["nav"] = nav
    return config


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages (and the plots they show) to the site."""
    papers = implemented_papers()
    pages: dict[str, str] = {"papers/index.md": papers_index(papers), "cli.md": cli_page()}
    for paper in papers:
        pages[f"papers/{paper.id}.md"] = paper_page(paper, files, config)
    modules = reference_modules()
    pages["reference/index.md"] = reference_index(modules)
    for module_name in modules:
        pages[_slug(module_name)] = reference_page(module_name)
        for name in missing_docstrings(module_name):
            report = log.info if name in KNOWN_UNDOCUMENTED else log.warning
            report(f"public name without a docstring: {name}")
    for uri, text in pages.items():
        files.append(File.generated(config, uri, content=text))
    return files
