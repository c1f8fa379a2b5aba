"""Text that comes from data (answer, query and document ids, answer texts, reflections, judge
reasons, dataset names, error messages quoting them), made safe for where it is shown.

- :mod:`.visible`: the one rule for which characters a reader must see as escapes (control
  characters, ESC sequences, newlines, bidi overrides, lone surrogates) and how they are
  written (``\\x1b``, ``\\n``, ``\\u202e``); every other writer builds on it.
- :mod:`.terminal`: :func:`~.terminal.say`, the ``print`` of every command.
- :mod:`.xml_text`: JUnit XML that is always well-formed XML 1.0.
- :mod:`.markdown_text`: values inside Markdown (CI step summaries) that cannot open a link,
  a table cell, HTML or a heading.

Ordinary text (letters of any script, accents, CJK, emoji, punctuation) is left as it is.
"""
