"""The report's two formats: Markdown, and one self-contained HTML page rendered from the
Jinja2 template ``templates/run_report.html.j2`` (autoescaped; PNGs inlined as data URIs)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from markupsafe import Markup, escape

from eval_harness.reporting.blocks import Block, Details, Figure, Paragraph, Section, Table

TEMPLATE = "run_report.html.j2"


def render_markdown(sections: Sequence[Section], *, title: str, image_prefix: str = "") -> str:
    """The report in Markdown; images link to ``image_prefix + file name``."""
    lines = [f"# {title}", ""]
    for section in sections:
        badge = f" ({section.status})" if section.status else ""
        lines += [f"## {section.title}{badge}", ""]
        if section.hint:
            lines += [f"> {section.hint}", ""]
        for block in section.blocks:
            lines += _markdown_block(block, image_prefix) + [""]
    return "\n".join(lines)


def _markdown_block(block: Block, image_prefix: str) -> list[str]:
    if isinstance(block, Paragraph):
        return [block.text]
    if isinstance(block, Figure):
        return [f"![{block.caption}]({image_prefix}{block.file_name})"]
    if isinstance(block, Details):
        return [f"<details><summary>{block.summary}</summary>", "", block.text, "",
                "</details>"]
    lines = [f"*{block.caption}*", ""] if block.caption else []
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
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def render_html(sections: Sequence[Section], *, title: str) -> str:
    """The report as one self-contained HTML page (Jinja2, autoescaped; PNGs inlined)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    environment = Environment(loader=PackageLoader("eval_harness.reporting", "templates"),
                              autoescape=True, undefined=StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)
    environment.filters["inline"] = _inline_html
    environment.tests.update(paragraph=lambda block: isinstance(block, Paragraph),
                             table=lambda block: isinstance(block, Table),
                             figure=lambda block: isinstance(block, Figure),
                             details=lambda block: isinstance(block, Details))
    return environment.get_template(TEMPLATE).render(title=title, sections=sections)


def _inline_html(text: str) -> Markup:
    """Escaped text with `code` and **bold** turned into tags (after escaping, so safe)."""
    html = str(escape(text))
    html = re.sub(r"`([^`]+)`", r"<code>\1</code>", html)
    return Markup(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html))
