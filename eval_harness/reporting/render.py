"""The report's two formats: Markdown, and one self-contained HTML page rendered from the
Jinja2 template ``templates/run_report.html.j2`` (autoescaped; PNGs inlined as data URIs).

Blocks carry text from data (answer ids, queries, judge reasons, dataset names, error
messages), escaped for each format (:mod:`eval_harness.escaping`): control characters, ESC
sequences and bidi overrides are shown as visible escapes in both; a table cell is one line
and literal Markdown; in HTML every value is escaped by Jinja2's autoescape."""

from __future__ import annotations

import re
from collections.abc import Sequence

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from eval_harness.escaping.markdown_text import markdown_inline
from eval_harness.escaping.visible import visible, visible_lines
from eval_harness.reporting.blocks import Block, Details, Figure, Paragraph, Section, Table

TEMPLATE = "run_report.html.j2"


def render_markdown(sections: Sequence[Section], *, title: str, image_prefix: str = "") -> str:
    """The report in Markdown; images link to ``image_prefix + file name``."""
    lines = [f"# {visible(title)}", ""]
    for section in sections:
        badge = f" ({section.status})" if section.status else ""
        lines += [f"## {section.title}{badge}", ""]
        if section.hint:
            lines += [f"> {visible(section.hint)}", ""]
        for block in section.blocks:
            lines += _markdown_block(block, image_prefix) + [""]
    return "\n".join(lines)


def _markdown_block(block: Block, image_prefix: str) -> list[str]:
    # A paragraph's own Markdown (`code`, **bold**) stays; what it quotes stays on its line.
    if isinstance(block, Paragraph):
        return [visible(block.text)]
    if isinstance(block, Figure):
        return [f"![{markdown_inline(block.caption)}]({image_prefix}{block.file_name})"]
    if isinstance(block, Details):
        return [f"<details><summary>{markdown_inline(block.summary)}</summary>", "",
                visible_lines(block.text), "", "</details>"]
    lines = [f"*{markdown_inline(block.caption)}*", ""] if block.caption else []
    numeric = block.numeric or (False,) * len(block.columns)
    lines += ["| " + " | ".join(_cell(c) for c in block.columns) + " |",
              "|" + "|".join("---:" if right else "---" for right in numeric) + "|"]
    for position, row in enumerate(block.rows):
        cells = [_cell(value) for value in row]
        if position in block.marked:
            cells = [f"**{cell}**" if cell else cell for cell in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell: one line (each run of whitespace, line breaks
    included, as one space), literal (no link, HTML or cell break)."""
    return markdown_inline(" ".join(str(text).split()))


def render_html(sections: Sequence[Section], *, title: str) -> str:
    """The report as one self-contained HTML page (Jinja2, autoescaped; PNGs inlined)."""
    environment = Environment(loader=PackageLoader("eval_harness.reporting", "templates"),
                              autoescape=True, undefined=StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True, finalize=_shown)
    environment.filters.update(inline=_inline_html, one_line=visible)
    environment.tests.update(paragraph=lambda block: isinstance(block, Paragraph),
                             table=lambda block: isinstance(block, Table),
                             figure=lambda block: isinstance(block, Figure),
                             details=lambda block: isinstance(block, Details))
    return environment.get_template(TEMPLATE).render(title=title, sections=sections)


def _shown(value: object) -> object:
    """Every ``{{ value }}`` of the template: control characters as visible escapes (line
    breaks and tabs kept for ``<pre>``), before autoescape. A visible escape is letters,
    digits and a backslash, so an already escaped :class:`Markup` stays safe."""
    if isinstance(value, Markup):
        return Markup(visible_lines(str(value)))
    return visible_lines(value) if isinstance(value, str) else value


def _inline_html(text: str) -> Markup:
    """Escaped text with `code` and **bold** turned into tags (after escaping, so safe)."""
    html = str(escape(visible(text)))
    html = re.sub(r"`([^`]+)`", r"<code>\1</code>", html)
    return Markup(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html))
