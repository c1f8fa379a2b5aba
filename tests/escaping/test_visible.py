"""eval_harness.escaping.visible: which characters are shown as escapes, and that ordinary text
of any script is left as it is."""

from __future__ import annotations

import doctest
import json
import random

import pytest

import eval_harness.escaping.visible as module
from eval_harness.escaping.visible import encodable, visible, visible_lines

pytestmark = pytest.mark.unit

ORDINARY = ["sa-0304-07", "Café au lait, naïve résumé", "東京の答え", "데이터", "Ελληνικά",
            "עברית", "العربية", "emoji 👩‍💻 ✓", "C:\\data\\answers.jsonl", "a\\nb (a backslash)",
            "tabs and  spaces", "🇫🇷 flag"]


def test_the_doctests_run():
    assert doctest.testmod(module).failed == 0


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_unchanged(text):
    assert visible(text) == text.replace("\t", "\\t")
    assert visible_lines(text) == text and encodable(text) == text


@pytest.mark.parametrize(("char", "shown"), [
    ("\x1b", "\\x1b"), ("\x07", "\\x07"), ("\x00", "\\x00"), ("\n", "\\n"), ("\r", "\\r"),
    ("\t", "\\t"), ("\x7f", "\\u007f"), ("\x85", "\\u0085"), ("\x9b", "\\u009b"),
    ("\u2028", "\\u2028"), ("\u2029", "\\u2029"), ("\u202e", "\\u202e"), ("\u2066", "\\u2066"),
    ("\u200f", "\\u200f"), ("\u061c", "\\u061c"), ("\ud800", "\\ud800"), ("\udfff", "\\udfff"),
    ("\ufffe", "\\ufffe")])
def test_each_acting_character_is_shown_as_its_escape(char, shown):
    assert visible(f"a{char}b") == f"a{shown}b"


def test_visible_lines_keeps_the_programs_line_breaks_only():
    assert visible_lines("row 1\n\trow 2\r\x1b[2J") == "row 1\n\trow 2\\r\\x1b[2J"


def test_escaping_json_output_keeps_it_the_same_json():
    rng = random.Random(31)
    alphabet = "aé東\x00\x1b\x07\n\r\t\x7f\x85\x9b\u2028\u202e\ud800\ufffe\"\\/"
    for _ in range(300):
        value = {"id": "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))}
        text = json.dumps(value, ensure_ascii=False)
        shown = visible_lines(text)
        assert json.loads(shown) == value
        assert visible(shown) == shown  # nothing left that acts


def test_encodable_text_encodes_as_utf8_and_keeps_the_controls():
    assert encodable("a\x1b\n\ud800b\udc80").encode("utf-8") == b"a\x1b\n\\ud800b\\udc80"
