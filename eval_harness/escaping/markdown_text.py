"""Values from data inside Markdown (the CI step summary of ``gate --summary``, the run
report's Markdown), so that a value cannot open a table cell, a link, an image, emphasis, code
or raw HTML, whatever renderer (CommonMark, GitHub) shows it.

:func:`markdown_inline` first writes control characters, newlines and bidi overrides as
visible escapes (:func:`~eval_harness.escaping.visible.visible`), then backslash-escapes the
characters that start or delimit Markdown's inline constructs: ``\\ ` * < > | ~ @``, ``]``
before ``(`` or ``[`` (a link or image), ``&`` of an entity, ``_`` where it could start
emphasis (not inside a word: ``format_compliance`` stays), ``:`` of ``://`` and ``.`` of
``www.`` (GitHub turns those into links). A backslash-escaped
ASCII punctuation character renders as itself, so the rendered text is the value; ordinary
text (``sa-0304-07``, ``format issues: empty_heading``, ``[0.60, 0.80]``) is written as it is.
:func:`markdown_code` shows a value as inline code, in which Markdown and HTML mean nothing.
"""

from __future__ import annotations

import re

from eval_harness.escaping.visible import visible

# A link or image needs "](" or "][" (no value can write a reference definition: that takes
# a line of its own), an entity "&name;" or "&#n;": escaping those, not every "[" or "&",
# keeps "[0.60, 0.80]" and "Q&A" as they are.
_SPECIAL = re.compile(r"[\\`*<>|~@]|\](?=[(\[])|&(?=#?\w+;)|(?<![^\W_])_|_(?![^\W_])"
                      r"|:(?=//)|(?<=www)\.", re.IGNORECASE)
_BACKTICKS = re.compile("`+")


def markdown_inline(value: object) -> str:
    """``value`` as literal Markdown text on one line (also safe inside a table cell).

    >>> markdown_inline("a|b <img src=x> [x](http://e.com) format_compliance [0.6, 0.8]")
    'a\\\\|b \\\\<img src=x\\\\> [x\\\\](http\\\\://e.com) format_compliance [0.6, 0.8]'
    """
    return _SPECIAL.sub(lambda match: "\\" + match.group(), visible(value))


def markdown_code(value: object) -> str:
    """``value`` as inline code on one line: `sa-01` stays `` `sa-01` ``; a value holding
    backticks gets a longer fence (padded with spaces where it starts or ends with one).
    Not for a table cell: there a ``|`` would still end the cell.

    >>> markdown_code("sa-01"), markdown_code("a`b")
    ('`sa-01`', '``a`b``')
    """
    text = visible(value)
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    if text.startswith("`") or text.endswith("`") or (text.startswith(" ")
                                                        and text.endswith(" ") and text.strip()):
        text = f" {text} "
    return f"{fence}{text}{fence}"
