"""Hostile text in answers, through the command line: `eval-harness answers import` of a JSONL
file whose ids, queries and answers hold terminal escapes, newlines, other control characters,
XML-invalid characters, bidi overrides and Markdown/HTML, then `eval-harness gate` with
`--junit-xml` and `--summary`, then the run report. Nothing from the data may act on the
terminal, fake a line, break the JUnit file, or inject Markdown or HTML; ordinary text
(accents, CJK) prints unchanged."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import date
from html.parser import HTMLParser

import pytest

from answer_files import answer_row, harness_answers_config, write_jsonl
from cli_runs import run_cli

DAY = "2025-03-10"
FAKE = "ALL GATES PASSED"
# The id: sets the terminal title, clears the screen, prints a red fake verdict.
TITLE_AND_CLEAR = f"ax-esc\x1b]0;pwned\x07\x1b[2J\x1b[31m{FAKE}\x1b[0m"
NEWLINE = f"ax-nl\r\n{FAKE}"
CONTROLS = "ax-ctl\x01\x0b\x0c\x7f\x9b\ufffe\u202eevil"  # XML forbids \x01 \x0b \x0c \ufffe
MARKUP = "ax-md|cell|<img src=x onerror=alert(1)>[link](http://evil.example)`tick`"
ORDINARY = "ax-café-東京"
IDS = (TITLE_AND_CLEAR, NEWLINE, CONTROLS, MARKUP, ORDINARY)
# What the data holds that must never reach a terminal or a CI file as itself.
ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

# The shipped config.yaml on a database of its own (the gates read the harness's own answers
# table; the LLM gates fall back to local judges without API keys).
pytestmark = pytest.mark.project(config=lambda path: harness_answers_config(path.parent),
                                 database="fresh")


def hostile_answers(folder):
    """One answer per hostile id (none cites its sources, so every one fails
    citation_coverage and is listed), in a file whose name holds an escape too."""
    rows = [answer_row(answer_id, f"The answer of {answer_id}: it shows \x1b[2J nothing.\n"
                                  f"{FAKE}", f"{DAY}T10:0{n}:00Z",
                       query=f"What does {answer_id} show?\x1b]0;pwned\x07")
            for n, answer_id in enumerate(IDS)]
    return write_jsonl(folder / "hostile\x1b[2J.jsonl", rows)


def assert_terminal_safe(text: str) -> None:
    assert ACTING.search(text) is None, ACTING.search(text)
    # the fake verdict is never a line of its own (nor the start of one)
    assert not any(line.lstrip().startswith(FAKE) for line in text.splitlines())


class HtmlText(HTMLParser):
    """Every tag, the cells of each table row and the text of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.cells: list[int] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.cells.append(0)
        elif tag in ("td", "th"):
            self.cells[-1] += 1

    def handle_data(self, data):
        self.text += data


def rendered_markdown(markdown: str) -> HtmlText:
    """``markdown`` as a CommonMark renderer with GitHub's tables shows it."""
    from markdown_it import MarkdownIt

    page = HtmlText()
    page.feed(MarkdownIt("commonmark").enable("table").render(markdown))
    page.close()
    return page


def test_hostile_ids_and_texts_are_escaped_on_the_terminal_and_in_ci_files(project, capsys,
                                                                          tmp_path):
    path = hostile_answers(tmp_path)
    code, out, err = run_cli(capsys, "--config", project, "answers", "import", path)
    assert code == 0, err
    assert_terminal_safe(out + err)
    assert "hostile\\x1b[2J.jsonl" in out and "5 new" in out

    junit, summary = tmp_path / "gates.xml", tmp_path / "summary.md"
    code, out, err = run_cli(capsys, "--config", project, "gate", "--since", DAY,
                             "--junit-xml", junit, "--summary", summary)
    assert code == 1, err
    assert_terminal_safe(out + err)
    failing = next(line for line in out.splitlines() if line.startswith("citation_coverage:"))
    assert "ax-esc\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mALL GATES PASSED\\x1b[0m" in failing
    assert "ax-nl\\r\\nALL GATES PASSED" in failing
    assert "ax-ctl\\x01\\x0b\\x0c\\u007f\\u009b\\ufffe\\u202eevil" in failing
    assert ORDINARY in failing  # ordinary text prints as it is

    # the Dagster-backed --partition path prints the same table
    code, out, err = run_cli(capsys, "--config", project, "gate", "--partition", DAY)
    assert code == 1, err
    assert_terminal_safe(out + err)
    assert "ax-nl\\r\\nALL GATES PASSED" in out

    # --json: still JSON, and the ids read back exactly as stored
    code, out, _ = run_cli(capsys, "--config", project, "gate", "--since", DAY, "--json")
    assert_terminal_safe(out)
    checks = {check["gate"]: check for check in json.loads(out)["checks"]}
    assert set(checks["citation_coverage"]["failing_answer_ids"]) == set(IDS)

    # JUnit: valid XML; the ids are there as visible escapes, one line of text each
    text = junit.read_text(encoding="utf-8")
    assert ACTING.search(text) is None
    suite = ET.fromstring(text)
    failure = next(case.find("failure") for case in suite.iter("testcase")
                   if case.get("name").startswith("citation_coverage"))
    assert "ax-esc\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mALL GATES PASSED\\x1b[0m" in failure.text
    assert "ax-ctl\\x01\\x0b\\x0c\\u007f\\u009b\\ufffe\\u202eevil" in failure.text
    assert not any(line.startswith(FAKE) for line in failure.text.splitlines())
    assert ORDINARY in failure.text

    # Markdown summary: no control character; rendered (CommonMark + GFM tables), no tag
    # but the table's, no link, every row of the table has its 10 cells
    markdown = summary.read_text(encoding="utf-8")
    assert ACTING.search(markdown) is None
    assert not any(line.startswith(FAKE) for line in markdown.splitlines())
    page = rendered_markdown(markdown)
    assert set(page.tags) <= {"h3", "table", "thead", "tbody", "tr", "th", "td", "ul", "li",
                              "code", "strong"}
    assert set(page.cells) == {10}
    assert "ax-esc\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mALL GATES PASSED\\x1b[0m" in page.text
    assert MARKUP in page.text and ORDINARY in page.text  # shown as they are, as code


def test_a_gate_that_cannot_run_writes_valid_files_whatever_the_reason_quotes(project, capsys,
                                                                             tmp_path):
    junit, summary = tmp_path / "gates.xml", tmp_path / "summary.md"
    hostile = f"\x1b[2J\n{FAKE}\x01 <b>|x|</b> [a](http://evil.example)"
    code, out, err = run_cli(capsys, "--config", project, "gate", "--partition", hostile,
                             "--junit-xml", junit, "--summary", summary)
    assert code == 2 and out == ""
    assert_terminal_safe(err)
    assert err.count("\n") == 1 and "\\x1b[2J\\nALL GATES PASSED\\x01" in err
    error = ET.fromstring(junit.read_text(encoding="utf-8")).find("testcase/error")
    assert "\\x1b[2J\\nALL GATES PASSED\\x01 <b>|x|</b>" in error.get("message")
    assert error.text.count("\n") == 0
    markdown = summary.read_text(encoding="utf-8")
    assert ACTING.search(markdown) is None
    page = rendered_markdown(markdown)
    assert set(page.tags) == {"h3", "p"}
    assert "\\x1b[2J\\nALL GATES PASSED\\x01 <b>|x|</b> [a](http://evil.example)" in page.text


def test_the_run_report_escapes_them_too(project, capsys, tmp_path, fresh):
    from eval_harness.reporting.run_report import build_run_report
    from eval_harness.settings import load_settings

    assert run_cli(capsys, "--config", project, "answers", "import",
                   hostile_answers(tmp_path))[0] == 0
    assert run_cli(capsys, "--config", project, "gate", "--since", DAY)[0] == 1
    settings = load_settings(project, environ={"DATABASE_URL": fresh.url})
    with fresh.connection() as conn:
        report = build_run_report(conn, settings, run_id=None, days=[date(2025, 3, 10)],
                                  out_dir=tmp_path / "reports")
    html = report.html_path.read_text(encoding="utf-8")
    assert ACTING.search(html) is None
    page = HtmlText()
    page.feed(html)
    page.close()
    assert "img" not in page.tags  # the id's <img> is text, not a tag
    assert "ax-esc\\x1b]0;pwned\\x07\\x1b[2J" in page.text
    assert "<img src=x onerror=alert(1)>" in page.text and ORDINARY in page.text
    markdown = report.markdown_path.read_text(encoding="utf-8")
    assert ACTING.search(markdown) is None
    page = rendered_markdown(markdown)
    assert {"img", "a"}.isdisjoint(page.tags) and "<img src=x onerror=alert(1)>" in page.text
    assert "ax-esc\\x1b]0;pwned\\x07\\x1b[2J" in page.text


def test_an_error_quoting_a_hostile_id_is_one_line(project, capsys, tmp_path):
    rows = [answer_row(TITLE_AND_CLEAR, "An answer [1].", f"{DAY}T10:00:00Z")] * 2
    path = write_jsonl(tmp_path / "twice.jsonl", rows)
    code, out, err = run_cli(capsys, "--config", project, "answers", "import", path)
    assert code == 2, err
    assert_terminal_safe(out + err)
    assert err.count("\n") == 1 and err.startswith("eval-harness: error: ")
    assert "duplicate id 'ax-esc\\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mALL GATES PASSED" in err
