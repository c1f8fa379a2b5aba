"""What every command prints (eval_harness.escaping.terminal): its own lines as they are, and
no control character from data that could retitle, clear or recolour the terminal or fake a
line of its own."""

from __future__ import annotations

import io

import pytest

from eval_harness.escaping.terminal import say, say_error

pytestmark = pytest.mark.unit

HOSTILE = "a1\x1b]0;pwned\x07\x1b[2J\x1b[31mALL GATES PASSED\x1b[0m"


def test_say_keeps_line_breaks_and_shows_every_other_control_character():
    out = io.StringIO()
    say("gate:", HOSTILE, 3, "\tdone\nnext line", file=out)
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert text.endswith("\n") and text.count("\n") == 2  # the program's own break is kept
    assert text.startswith("gate: a1") and " 3 " in text and "next line" in text


def test_say_writes_to_stdout_by_default(capsys):
    say("one", "two")
    assert capsys.readouterr() == ("one two\n", "")


def test_say_error_is_one_line_on_stderr_whatever_the_message_quotes(capsys):
    say_error(f"Unknown answer id '{HOSTILE}\nall gates passed'.")
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("eval-harness: error: Unknown answer id 'a1")
    assert err.count("\n") == 1 and err.endswith("'.\n") and "\x1b" not in err
    say_error("no store", program="eval-harness-pipelines")
    assert capsys.readouterr().err == "eval-harness-pipelines: error: no store\n"
