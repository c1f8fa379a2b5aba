"""The ``print`` of every command: what reaches stdout and stderr cannot control the terminal.

:func:`say` writes the program's own lines as they are and every other control character as
its escape (:mod:`eval_harness.escaping.visible`), so an id holding ``ESC ]0;... BEL`` or
``ESC [2J`` neither retitles nor clears the terminal of whoever reads the output or the CI log.
A value from data that the line quotes goes through :func:`~.visible.visible` first, so that its
newlines cannot fake a line of their own either.
"""

from __future__ import annotations

import sys
from typing import TextIO

from eval_harness.escaping.visible import visible, visible_lines


def say(*values: object, file: TextIO | None = None, flush: bool = False) -> None:
    """``print(*values)`` with every control character but the line breaks shown as escapes.

    Progress bars do not come through here: they draw with CR on a terminal, on purpose."""
    text = " ".join(value if isinstance(value, str) else str(value) for value in values)
    print(visible_lines(text), file=sys.stdout if file is None else file, flush=flush)


def say_error(message: str, *, program: str = "eval-harness") -> None:
    """The one-sentence error of a command on stderr, ``<program>: error: <message>``, on
    one line whatever the message quotes (an id, a file name, a server's error text)."""
    say(f"{program}: error: {visible(message)}", file=sys.stderr)
