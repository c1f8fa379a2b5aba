"""The report's self-contained HTML (eval_harness.reporting.render)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


def test_html_escapes_stored_text_and_keeps_only_its_own_markup():
    from eval_harness.reporting.blocks import Paragraph, Section, Table
    from eval_harness.reporting.render import render_html

    sections = [Section("summary", "Summary", (
        Paragraph("run `<b>x</b>` and **bold** <script>alert(1)</script>"),
        Table(("answer", "reason"), (("<img src=x onerror=1>", "a | b"),))), "PASS")]
    html = render_html(sections, title="<title>")
    assert "<script>" not in html and "<img src=x" not in html
    assert "<code>&lt;b&gt;x&lt;/b&gt;</code>" in html and "<strong>bold</strong>" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<title>&lt;title&gt;" in html
