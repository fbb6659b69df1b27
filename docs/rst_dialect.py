"""The library's docstring dialect, turned into Markdown with typeset math at docs build time.

The docstrings of ``jaxpapers`` and ``jaxpapers_kernels`` are written in one dialect: Google-style
sections (``Args:``, ``Returns:``) with reST inline markup, i.e. the roles ``:math:`...```,
``:func:``, ``:class:``, ``:mod:``, ``:meth:``, ``:attr:``, ``:data:`` (also ``:obj:``, ``:exc:``,
``:const:``), the ``.. math::`` directive, ``Example::`` literal blocks, ``>>>`` doctest blocks and
underlined section headings. This file converts that dialect, without touching the source files:

* :func:`convert` rewrites a docstring into Markdown: roles become cross-references
  (``[`name`][jaxpapers.x.name]``, resolved by mkdocs-autorefs, or plain code when the target is
  not on the site), math becomes an opaque token, literal and doctest blocks become fenced code,
  headings become Markdown headings (or bold lines);
* :class:`RstDialect` is a griffe extension (listed under mkdocstrings' ``extensions``) that runs
  :func:`convert` on every docstring before mkdocstrings renders it;
* the mkdocs hook :func:`on_page_content` replaces the math tokens of the finished HTML by
  MathML, rendered server-side by ``latex2mathml``: the site needs no JavaScript, CDN or network
  to show equations (Chromium, Firefox and Safari render MathML Core natively).

A math token is the LaTeX source, hex-encoded, between two markers (``XMI``/``XMD`` and ``XME``):
Markdown leaves such a word alone, so no backslash, underscore, asterisk or pipe of the formula is
ever seen by the Markdown parser, and the token needs no state shared between the griffe
extension and the hook (mkdocs and griffe load this file as two separate modules).

A formula that ``latex2mathml`` cannot convert is logged as a warning, which fails
``mkdocs build --strict`` and so the docs test.
"""

from __future__ import annotations

import html
import importlib
import inspect
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger("mkdocs.plugins.jaxpapers.rst")

# --------------------------------------------------------------------------------------------
# Math
# --------------------------------------------------------------------------------------------

_TOKEN = re.compile(r"XM([ID])([0-9a-f]+)XME")
_PARA_TOKEN = re.compile(r"<p>\s*XMD([0-9a-f]+)XME\s*</p>")
# latex2mathml gaps, rewritten to equivalent LaTeX it knows.
_LATEX_FIXES = [
    (re.compile(r"\\arg\s*\\max"), r"\\operatorname{argmax}"),
    (re.compile(r"\\arg\s*\\min"), r"\\operatorname{argmin}"),
    (re.compile(r"\\arg(?![a-zA-Z])"), r"\\operatorname{arg}"),
]


def math_token(latex: str, display: bool = False) -> str:
    """An opaque word that :func:`render_math` later turns into MathML."""
    latex = " ".join(latex.split())
    return f"XM{'D' if display else 'I'}{latex.encode().hex()}XME"


def _mathml(latex: str, display: bool) -> str:
    try:
        from latex2mathml.converter import convert as l2m

        for pattern, repl in _LATEX_FIXES:
            latex = pattern.sub(repl, latex)
        out = l2m(latex, display="block" if display else "inline")
    except Exception as err:  # a formula the converter rejects: shown as source, build fails
        log.warning(f"formula not typeset ({err!r}): {latex}")
        return f'<code class="jxp-math-source">{html.escape(latex)}</code>'
    leftover = re.findall(r"<mi>(\\[A-Za-z]+)</mi>", out)
    if leftover:
        log.warning(f"formula with unknown LaTeX command(s) {leftover}: {latex}")
    out = re.sub(r"&(?!#?\w+;)", "&amp;", out)
    cls = "jxp-math jxp-math-block" if display else "jxp-math"
    return out.replace("<math ", f'<math class="{cls}" alttext="{html.escape(latex)}" ', 1)


def render_math(page_html: str) -> str:
    """Replace every math token of a rendered page by MathML."""

    def block(m: re.Match[str]) -> str:
        latex = bytes.fromhex(m.group(1)).decode()
        return f'<div class="jxp-equation">{_mathml(latex, True)}</div>'

    def token(m: re.Match[str]) -> str:
        latex = bytes.fromhex(m.group(2)).decode()
        return _mathml(latex, m.group(1) == "D")

    return _TOKEN.sub(token, _PARA_TOKEN.sub(block, page_html))


# --------------------------------------------------------------------------------------------
# Cross-references
# --------------------------------------------------------------------------------------------


class Resolver:
    """Maps a role's target, seen from a scope, to the identifier of an anchor on the site.

    ``index`` maps every identifier a reader may write (the documented name ``pkg.name``, the
    defining module's ``pkg._impl.name``, members ``pkg.Class.member``) to the documented anchor.
    """

    def __init__(self, index: dict[str, str], modules: Iterable[str] = ()) -> None:
        self.index = dict(index)
        self.modules = set(modules)

    @classmethod
    def for_modules(cls, modules: Iterable[str], public_names: Callable[[str], list[str]]):
        """Index every public name of ``modules`` (as :mod:`gen_pages` documents them)."""
        index: dict[str, str] = {}
        canonical: dict[str, str] = {}
        modules = list(modules)
        for module_name in modules:
            module = importlib.import_module(module_name)
            for name in public_names(module_name):
                anchor = f"{module_name}.{name}"
                index[anchor] = anchor
                obj = getattr(module, name, None)
                target = inspect.unwrap(obj) if callable(obj) else obj
                qual = getattr(target, "__qualname__", None)
                home = getattr(target, "__module__", None)
                if (inspect.isclass(target) or inspect.isfunction(target)) and qual and home:
                    canonical.setdefault(f"{home}.{qual}", anchor)
                if inspect.isclass(obj):
                    for member in _class_members(obj):
                        index[f"{anchor}.{member}"] = f"{anchor}.{member}"
                        if qual and home:
                            canonical.setdefault(f"{home}.{qual}.{member}", f"{anchor}.{member}")
        for key, anchor in canonical.items():
            index.setdefault(key, anchor)
        return cls(index, modules)

    def resolve(self, target: str, scope: str) -> str | None:
        """The anchor for ``target`` written inside ``scope`` (a dotted path), or None."""
        target = target.strip().lstrip("~").lstrip(".").removesuffix("()")
        if not target:
            return None
        parts = scope.split(".") if scope else []
        for i in range(len(parts), -1, -1):
            candidate = ".".join([*parts[:i], target])
            if candidate in self.index:
                return self.index[candidate]
            if candidate in self.modules:
                return candidate
        return None


def _class_members(cls: type) -> list[str]:
    """Public members that mkdocstrings shows for a class (its own, not inherited ones)."""
    names = set()
    for klass in (cls,):
        names |= {n for n in vars(klass) if not n.startswith("_")}
        names |= {n for n in getattr(klass, "__annotations__", {}) if not n.startswith("_")}
        names |= {n for n in getattr(klass, "_fields", ()) if not n.startswith("_")}
    return sorted(names)


_ROLE = re.compile(
    r":(?:py:)?(math|func|class|mod|meth|attr|data|obj|exc|const|ref|term):`([^`]+)`",
)


def _role(kind: str, body: str, scope: str, resolver: Resolver | None) -> str:
    if kind == "math":
        return math_token(body)
    body = " ".join(body.split())
    title_target = re.fullmatch(r"(.*?)\s*<([^>]+)>", body)
    if title_target:
        title, target = title_target.group(1), title_target.group(2)
    else:
        target = body
        shown = body.lstrip("~.")
        title = shown.rsplit(".", 1)[-1] if body.startswith("~") else shown
    anchor = resolver.resolve(target, scope) if resolver is not None else None
    text = f"`{title}`"
    return f"[{text}][{anchor}]" if anchor else text


# --------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------

_HEADING_UNDERLINE = re.compile(r"^\s*([-=~^\"'`#*+])\1{2,}\s*$")
_GOOGLE_SECTION = re.compile(
    r"^(Examples?|References?|Notes?|Args|Arguments|Returns|Yields|Raises|Attributes|"
    r"See Also|Warnings?|Methods|Parameters):\s*$"
)
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+\S")
_URL = re.compile(r"(?<![<(\[`\"'=])\b(https?://[^\s<>`)\]]+[^\s<>`)\].,;:])")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _take_block(lines: list[str], i: int, base: int) -> tuple[list[str], int]:
    """The lines from ``i`` indented deeper than ``base`` (blank lines inside included)."""
    block = []
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
        block.append(lines[i])
        i += 1
    while block and not block[-1].strip():
        block.pop()
        i -= 1
    return block, i


def _dedent(block: list[str]) -> list[str]:
    width = min((_indent(ln) for ln in block if ln.strip()), default=0)
    return [ln[width:] for ln in block]


def _looks_like_python(block: list[str]) -> bool:
    text = "\n".join(block)
    return bool(re.search(r"(^|\n)\s*(import |from |>>> )|=|\w\(", text))


def _blocks(text: str, heading_level: int | None) -> str:
    """Directives, literal blocks, doctest blocks, headings and lists, line by line."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        pad = " " * _indent(line)
        math = re.match(r"^(\s*)\.\. math::\s*(.*)$", line)
        if math:
            first = math.group(2)
            block, i = _take_block(lines, i + 1, _indent(line))
            body = [first, *(_dedent(block) if block else [])]
            equations = "\n".join(body).strip().split("\n\n")
            out.append("")
            for eq in equations:
                if eq.strip():
                    out += [pad + math_token(eq, display=True), ""]
            continue
        section = _GOOGLE_SECTION.match(line)
        if heading_level is not None and section and i + 1 < len(lines):
            block, j = _take_block(lines, i + 1, _indent(line))
            if block:  # a Google-style section of a page-level docstring: heading + body
                out += ["", f"{'#' * heading_level} {section.group(1)}", ""]
                out += [_blocks("\n".join(_dedent(block)), heading_level), ""]
                i = j
                continue
        if re.match(r"^\s*\.\. \w[\w-]*::", line):  # any other directive: its text as code
            block, i = _take_block(lines, i + 1, _indent(line))
            out += ["", pad + "```text", *(pad + b for b in _dedent([line.strip(), *block]))]
            out += [pad + "```", ""]
            continue
        if stripped.endswith("::") and i + 1 < len(lines) and not lines[i + 1].strip():
            block, j = _take_block(lines, i + 1, _indent(line))
            if block:
                intro = stripped[:-2].rstrip()
                if intro:
                    out.append(pad + (intro if intro.endswith(":") else intro + ":"))
                lang = "python" if _looks_like_python(block) else "text"
                body = _dedent([b for b in block])
                while body and not body[0].strip():
                    body.pop(0)
                out += ["", pad + f"```{lang}", *(pad + b if b else "" for b in body)]
                out += [pad + "```", ""]
                i = j
                continue
        if stripped.startswith(">>>") and (not out or not out[-1].strip()):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out += [pad + "```pycon", *(pad + b for b in _dedent(block)), pad + "```", ""]
            continue
        if (
            stripped
            and i + 1 < len(lines)
            and _HEADING_UNDERLINE.match(lines[i + 1])
            and len(lines[i + 1].strip()) >= len(stripped)
            and not _LIST_ITEM.match(line)
        ):
            title = stripped
            if heading_level is None:
                out += ["", f"{pad}**{title}**", ""]
            else:
                out += ["", f"{'#' * heading_level} {title}", ""]
            i += 2
            continue
        if _LIST_ITEM.match(line) and out and out[-1].strip() and not _LIST_ITEM.match(out[-1]):
            # reST tolerates ``References:`` directly above a list; Markdown needs a blank line
            prev_indent = _indent(out[-1])
            if prev_indent <= _indent(line) and not out[-1].rstrip().endswith(","):
                if not _continues_list(out):
                    out.append("")
        out.append(line)
        i += 1
    return "\n".join(out)


def _continues_list(out: list[str]) -> bool:
    """Whether the last output line belongs to a list item (a wrapped item's second line)."""
    for prev in reversed(out):
        if not prev.strip():
            return False
        if _LIST_ITEM.match(prev):
            return True
    return False


def convert(
    text: str,
    *,
    scope: str = "",
    resolver: Resolver | None = None,
    heading_level: int | None = None,
) -> str:
    """Markdown for a docstring written in the library's dialect.

    Args:
        text: the docstring (already dedented, as ``inspect.getdoc`` gives it).
        scope: dotted path of the documented object, for resolving relative role targets.
        resolver: maps role targets to site anchors; ``None`` renders every role as code.
        heading_level: Markdown level for underlined headings; ``None`` makes them bold lines
            (inside an API entry, whose headings belong to mkdocstrings).
    """
    # Inline math first, so that no later rule (or Markdown) sees its backslashes.
    text = re.sub(r":math:`([^`]+)`", lambda m: math_token(m.group(1)), text)
    text = _blocks(text, heading_level)
    text = _ROLE.sub(lambda m: _role(m.group(1), m.group(2), scope, resolver), text)
    # bare URLs become links, except inside fenced code (odd parts of the split)
    parts = re.split(r"(^[ \t]*```.*?^[ \t]*```[ \t]*$)", text, flags=re.M | re.S)
    return "".join(p if i % 2 else _URL.sub(r"<\1>", p) for i, p in enumerate(parts))


# --------------------------------------------------------------------------------------------
# griffe extension (mkdocstrings) and mkdocs hook
# --------------------------------------------------------------------------------------------

_RESOLVER: Resolver | None = None


def site_resolver() -> Resolver:
    """The resolver over every module of the API reference (built once per process)."""
    global _RESOLVER
    if _RESOLVER is None:
        import sys
        from pathlib import Path

        docs = str(Path(__file__).resolve().parent)
        if docs not in sys.path:
            sys.path.insert(0, docs)
        import gen_pages

        _RESOLVER = Resolver.for_modules(gen_pages.reference_modules(), gen_pages.public_names)
    return _RESOLVER


try:
    from griffe import Extension as _GriffeExtension
except ImportError:  # the docs extra is not installed: the converter still imports
    _GriffeExtension = object  # type: ignore[assignment,misc]


class RstDialect(_GriffeExtension):  # type: ignore[misc,valid-type]
    """griffe extension: every docstring converted by :func:`convert` before it is rendered."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        docstring = getattr(obj, "docstring", None)
        if docstring is None or not docstring.value:
            return
        scope = obj.path if obj.is_module else obj.parent.path if obj.parent else obj.path
        if getattr(obj, "is_class", False):
            scope = obj.path
        docstring.value = convert(docstring.value, scope=scope, resolver=site_resolver())


def on_page_content(html_text: str, **kwargs: Any) -> str:
    """mkdocs hook: math tokens of every page become MathML."""
    return render_math(html_text)
