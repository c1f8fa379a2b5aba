"""eval_harness.escaping.markdown_text: a value rendered by a CommonMark renderer with GitHub's
tables (markdown-it-py) shows as itself, and opens no link, HTML, emphasis or table cell."""

from __future__ import annotations

import doctest
import html
import re

import pytest
from markdown_it import MarkdownIt

import eval_harness.escaping.markdown_text as module
from eval_harness.escaping.markdown_text import markdown_code, markdown_inline

pytestmark = pytest.mark.unit

RENDERER = MarkdownIt("commonmark").enable(["table", "strikethrough"])
HOSTILE = ["<img src=x onerror=alert(1)>", "[link](http://evil.example)", "![i](x.png)",
           "<http://evil.example>", "**bold** _em_ *em* ~~del~~", "a | b | c", "`code`",
           "&lt;b&gt; &#60;", "\\*", "x<!-- c -->y", "<script>alert(1)</script>",
           "line\n# heading", "sa-0304-07", "format issues: empty_heading", "Café 東京",
           "``` fence", " spaced ", "[ref][x] [x]", "Q&A [0.6, 0.8]"]


def text_and_tags(rendered: str) -> tuple[str, list[str]]:
    return html.unescape(re.sub(r"<[^>]+>", "", rendered)), re.findall(r"<(\w+)", rendered)


def test_the_doctests_run():
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_in_a_paragraph_renders_as_itself(value):
    text, tags = text_and_tags(RENDERER.render(f"value: {markdown_inline(value)} end"))
    assert tags == ["p"] and text == f"value: {value.replace(chr(10), chr(92) + 'n')} end\n"


@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_in_a_table_cell_stays_one_cell(value):
    table = f"| a | b |\n|---|---|\n| {markdown_inline(value)} | z |\n"
    rendered = RENDERER.render(table)
    assert len(re.findall("<td>", rendered)) == 2
    assert set(re.findall(r"<(\w+)", rendered)) == {"table", "thead", "tbody", "tr", "th", "td"}


@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_as_code_renders_as_itself(value):
    rendered = RENDERER.render(f"id: {markdown_code(value)}")
    text, tags = text_and_tags(rendered)
    assert tags == ["p", "code"]
    assert text == f"id: {value.replace(chr(10), chr(92) + 'n')}\n"


def test_ordinary_text_is_written_as_it_is():
    for value in ("sa-0304-07", "format issues: empty_heading", "0.700", "Cohen's kappa",
                  "Café 東京", "gate --partition 2025-03-04", "2.0% [1.0%, 7.0%]", "Q&A"):
        assert markdown_inline(value) == value
