"""eval_harness.escaping.xml_text: whatever the text, the document parses as XML 1.0 and the
text reads back with the forbidden characters as visible escapes."""

from __future__ import annotations

import doctest
import random
import xml.etree.ElementTree as ET
from xml.parsers import expat

import pytest

import eval_harness.escaping.xml_text as module
from eval_harness.escaping.xml_text import xml_safe, xml_safe_tree

pytestmark = pytest.mark.unit


def test_the_doctests_run():
    assert doctest.testmod(module).failed == 0


def test_allowed_text_is_unchanged():
    text = "sa-0304-07 Café 東京 \t\n\r <&> \"' \x85 \u202e \U0001f600"
    assert xml_safe(text) == text


def test_any_text_in_text_and_attributes_makes_a_document_an_xml_parser_reads():
    rng = random.Random(27)
    alphabet = "aé東<&>\"'\x00\x01\x08\x0b\x0c\x1b\x1f\t\n\r\ud800\udfff\ufffe\uffff\x85"
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16)))
        root = ET.Element("testsuite", name=text)
        ET.SubElement(root, "failure", message=text).text = text
        document = ET.tostring(xml_safe_tree(root), encoding="unicode")
        parser = expat.ParserCreate()
        parser.Parse(document.encode("utf-8"), True)  # raises on a character XML forbids
        parsed = ET.fromstring(document)
        assert parsed.get("name") == xml_safe(text)
        assert parsed.find("failure").get("message") == xml_safe(text)
        # expat reads a lone CR in text as LF (XML's line-end normalisation)
        assert parsed.find("failure").text == xml_safe(text).replace("\r\n", "\n").replace(
            "\r", "\n")


def test_the_issues_id_is_readable_in_the_document():
    root = ET.Element("case")
    root.text = "ax\x1b]0;pwned\x07\x1b[2J"
    assert ET.fromstring(ET.tostring(xml_safe_tree(root))).text == "ax\\x1b]0;pwned\\x07\\x1b[2J"
