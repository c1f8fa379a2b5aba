"""Which characters of a data value a reader must see as escapes, and how they are written.

A value from data may hold characters that act instead of showing: ESC starts a terminal
control sequence (clear the screen, set the title, recolour), BEL rings, CR and LF start a
line the program never wrote, the bidi overrides (U+202A..U+202E, U+2066..U+2069) reorder
what follows, U+2028 / U+2029 break lines in editors and browsers, and a lone surrogate (a
file name that is not UTF-8, a JSON ``"\\ud800"``) cannot be encoded at all. Each of them is
written as a visible escape instead: the C0 controls as ``\\n``, ``\\r``, ``\\t`` or ``\\x1b``,
every other as ``\\u202e``. Every other character, ASCII or not, stays as it is.

The ``\\uXXXX`` form for everything above C0 keeps a JSON document JSON: ``json.dumps`` never
writes a C0 control raw, so escaping its output changes how it looks, not what it parses to.
A backslash is not doubled: paths and regular expressions print as they are, at the cost of
``\\n`` in a value being ambiguous with an escaped newline.
"""

from __future__ import annotations

import re

# Bidi embeddings, overrides and isolates, the Arabic letter mark and the two directional
# marks: invisible, and they reorder the text around them ("Trojan Source").
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# C0 and DEL, C1, the line and paragraph separators, bidi controls, surrogates, and the two
# noncharacters U+FFFE / U+FFFF (no text holds them; XML forbids them).
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f\u2028\u2029{_BIDI}\ud800-\udfff\ufffe\uffff]")
_UNSAFE_KEEPING_LINES = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{_BIDI}"
                                   "\ud800-\udfff\ufffe\uffff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_character(char: str) -> str:
    """How one character is shown: ``\\n``, ``\\r``, ``\\t``, ``\\xNN`` (other C0 controls) or
    ``\\uNNNN`` (everything else).

    >>> escape_character("\\x1b"), escape_character("\\n"), escape_character("\\u202e")
    ('\\\\x1b', '\\\\n', '\\\\u202e')
    """
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code < 0x20:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(value: object) -> str:
    """``value`` as text on one line: every character that would act rather than show
    (controls, newlines, bidi overrides, lone surrogates) as its escape.

    >>> visible("sa-01\\x1b[2J\\nALL GATES PASSED")
    'sa-01\\\\x1b[2J\\\\nALL GATES PASSED'
    >>> visible("Café 東京 ✓")
    'Café 東京 ✓'
    """
    text = value if isinstance(value, str) else str(value)
    return _UNSAFE.sub(lambda match: escape_character(match.group()), text)


def visible_lines(text: str) -> str:
    """Text the program composed of several lines: like :func:`visible`, but its own line
    breaks (LF) and tabs stay as they are. A value from data inside it must already have gone
    through :func:`visible`, or its newlines would start lines here."""
    return _UNSAFE_KEEPING_LINES.sub(lambda match: escape_character(match.group()), text)


def encodable(text: str) -> str:
    """``text`` that encodes as UTF-8: each lone surrogate (which no UTF-8 encoder, protobuf's
    included, accepts) as its visible escape; everything else, controls included, as it is,
    for a channel that escapes them itself (JSON, protobuf strings).

    >>> encodable("ax-\\x1b\\ud800")
    'ax-\\x1b\\\\ud800'
    """
    return _SURROGATE.sub(lambda match: escape_character(match.group()), text)
