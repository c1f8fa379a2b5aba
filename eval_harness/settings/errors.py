"""What every part of the settings raises: one error type and the unknown-key check.

The lowest module of :mod:`eval_harness.settings`; it imports nothing of the harness but the
error types (:mod:`eval_harness.errors`), so every section parser (datasets, judges, gates,
calibration) can use it without a cycle.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from eval_harness.errors import InvalidInput


class ConfigError(InvalidInput):
    """The configuration is invalid; the message names the file, the key and what to do."""


def reject_unknown_keys(section: Mapping[str, Any], where: str, known: Sequence[str]) -> None:
    """Raise a :class:`ConfigError` naming every key of ``section`` not in ``known``.

    ``where`` is the section's dotted key ("" for the top level). Each unknown key is named in
    full with the nearest known key when one is close (``difflib.get_close_matches``), then
    the known keys are listed. The message carries no file name: the caller adds it.
    """
    prefix = f"{where}." if where else ""
    unknown = [str(key) for key in section if str(key) not in known]
    if not unknown:
        return
    named = []
    for key in unknown:
        close = difflib.get_close_matches(key, list(known), n=1)
        named.append(f"'{prefix}{key}'" + (f" (did you mean '{prefix}{close[0]}'?)"
                                             if close else ""))
    owner = f"known keys of '{where}'" if where else "known top-level keys"
    raise ConfigError(f"unknown key{'s' if len(named) > 1 else ''} {', '.join(named)}; "
                      f"{owner}: {', '.join(known)}.")
