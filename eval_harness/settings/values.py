"""Reading typed values out of a parsed ``config.yaml`` section, with the error a user sees.

Shared by every section parser of :mod:`eval_harness.settings`; the messages carry the dotted
key and no file name (:func:`eval_harness.settings.load_settings` adds it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eval_harness.settings.errors import ConfigError, reject_unknown_keys


def mapping_of(raw: Mapping[str, Any], key: str, known: Sequence[str] | None = None, *,
               where: str = "") -> Mapping[str, Any]:
    """``raw[key]`` as a mapping ({} when absent); with ``known``, unknown keys are refused."""
    dotted = f"{where}.{key}" if where else key
    value = raw.get(key) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"'{dotted}' must be a mapping.")
    if known is not None:
        reject_unknown_keys(value, dotted, known)
    return value


def number_of(section: Mapping[str, Any], key: str, default: float, where: str) -> float:
    """``section[key]`` (``default`` when absent) as a float; a bool or a non-number is refused."""
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"'{where}.{key}' must be a number, got {value!r}.")
    return float(value)


def flag_of(section: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    """``section[key]`` (``default`` when absent), which must be true or false."""
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"'{where}.{key}' must be true or false, got {value!r}.")
    return value
