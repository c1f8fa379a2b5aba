"""XML that is always well-formed XML 1.0, whatever the data in it (the JUnit file of
``gate --junit-xml``).

ElementTree escapes ``&``, ``<``, ``>`` and quotes, but writes every other character as it is,
and XML 1.0 forbids most C0 controls, the surrogates, U+FFFE and U+FFFF: one ESC in an answer
id made the whole JUnit file unreadable to CI (``PCDATA invalid Char value 27``). Those
characters are written as visible escapes (``\\x1b``; :mod:`eval_harness.escaping.visible`)
instead, so a parser reads the file and a person reads the id.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from eval_harness.escaping.visible import escape_character

# Everything outside XML 1.0's Char production: #x9 | #xA | #xD | [#x20-#xD7FF] |
# [#xE000-#xFFFD] | [#x10000-#x10FFFF].
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """``text`` with every character XML 1.0 forbids written as its visible escape.

    >>> xml_safe("sa-01\\x1b[2J\\x07 ok")
    'sa-01\\\\x1b[2J\\\\x07 ok'
    """
    return _NOT_XML.sub(lambda match: escape_character(match.group()), text)


def xml_safe_tree(root: ET.Element) -> ET.Element:
    """Make every text, tail, attribute name and value under ``root`` :func:`xml_safe`, in
    place, just before it is written; returns ``root``."""
    for element in root.iter():
        if element.text:
            element.text = xml_safe(element.text)
        if element.tail:
            element.tail = xml_safe(element.tail)
        if element.attrib:
            element.attrib = {xml_safe(name): xml_safe(value)
                              for name, value in element.attrib.items()}
    return root
