"""What every part of the settings raises, and the one place a validation error becomes it.

The sections of ``config.yaml`` are pydantic models (:mod:`eval_harness.settings.values` has
the shared value types). When one refuses its input, :func:`config_error` turns pydantic's
error into the one sentence a user reads: the key's dotted path, what it must be, and for an
unknown key the nearest known one ("did you mean") and the keys the section knows. The file's
name is put in front by the caller (:func:`eval_harness.settings.load_settings`).

A rule pydantic's types cannot state (a SQL name, a judge spec, two keys that exclude each
other) raises :func:`problem` (the rest of a sentence about the key it is checking) or
:func:`sentence` (a whole sentence) from its validator.
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import annotated_types
from pydantic import ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from eval_harness.errors import InvalidInput

_PROBLEM, _SENTENCE, _UNKNOWN = "config_problem", "config_sentence", "config_unknown"


class ConfigError(InvalidInput):
    """The configuration is invalid; the message names the file, the key and what to do."""


def problem(rest: str, key: str | None = None) -> PydanticCustomError:
    """A validator's finding about the value it checks: ``'<dotted key>' <rest>`` (``rest``
    ends the sentence, e.g. ``"must have five fields, got '0 2 *'."``); ``key`` names a key
    inside the mapping the validator checks."""
    return PydanticCustomError(_PROBLEM, "{rest}", {"rest": rest, "key": key})


def unknown(keys: Sequence[str], known: Sequence[str],
            key: str | None = None) -> PydanticCustomError:
    """A validator's finding that the mapping it checks (or its entry ``key``) holds ``keys``,
    which are not among ``known`` (a form the type's fields do not spell out)."""
    return PydanticCustomError(_UNKNOWN, "unknown keys", {"keys": list(keys),
                                                          "known": list(known), "key": key})


def sentence(text: str) -> PydanticCustomError:
    """A validator's finding that is a whole sentence of its own (it names its keys)."""
    return PydanticCustomError(_SENTENCE, "{text}", {"text": text})


def unknown_keys_message(unknown: Sequence[str], where: str, known: Sequence[str]) -> str:
    """Each unknown key named in full with the nearest known key when one is close
    (``difflib.get_close_matches``), then the known keys. ``where`` is the section's dotted
    key ("" for the top level)."""
    prefix = f"{where}." if where else ""
    named = []
    for key in unknown:
        close = difflib.get_close_matches(key, list(known), n=1)
        named.append(f"'{prefix}{key}'" + (f" (did you mean '{prefix}{close[0]}'?)"
                                             if close else ""))
    owner = f"known keys of '{where}'" if where else "known top-level keys"
    return (f"unknown key{'s' if len(named) > 1 else ''} {', '.join(named)}; "
            f"{owner}: {', '.join(known)}.")


def reject_unknown_keys(section: Mapping[str, Any], where: str, known: Sequence[str]) -> None:
    """Raise a :class:`ConfigError` naming every key of ``section`` not in ``known``."""
    unknown = [str(key) for key in section if str(key) not in known]
    if unknown:
        raise ConfigError(unknown_keys_message(unknown, where, known))


def config_error(error: ValidationError, model: Any, where: tuple[str, ...] = ()) -> ConfigError:
    """The one sentence of ``error``, raised by validating ``model`` (a pydantic dataclass)
    for the section at dotted path ``where``.

    Unknown keys come first (a typo must not hide behind the value error it causes): every
    unknown key of the first section holding one, named together. Otherwise the first error.
    """
    errors = error.errors(include_url=False)
    extra = [e for e in errors if e["type"] in ("unexpected_keyword_argument", "extra_forbidden")]
    if extra:
        parent = extra[0]["loc"][:-1]
        unknown = [str(e["loc"][-1]) for e in extra if e["loc"][:-1] == parent]
        _, owner = _node(model, parent)
        return ConfigError(unknown_keys_message(unknown, _dotted(where, parent),
                                                _field_names(owner)))
    first = errors[0]
    field, _ = _node(model, first["loc"])
    ctx = first.get("ctx") or {}
    loc = (*first["loc"], ctx["key"]) if ctx.get("key") else first["loc"]
    if first["type"] == _UNKNOWN:
        return ConfigError(unknown_keys_message(ctx["keys"], _dotted(where, loc), ctx["known"]))
    return ConfigError(_message(first, _dotted(where, loc), field))


def _message(error: Any, key: str, field: FieldInfo | None) -> str:
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == _SENTENCE:
        return str(ctx["text"])
    if kind == _PROBLEM:
        rest = str(ctx["rest"])
    elif kind in ("bool_type", "bool_parsing"):
        rest = f"must be true or false, got {value!r}."
    elif kind in ("int_type", "int_parsing", "int_from_float") or (
            field is not None and field.annotation is int):
        low = _bound_ends(field)[0]
        rest = f"must be an integer >= {low:g}, got {value!r}." if low is not None \
            else f"must be an integer, got {value!r}."
    elif kind in ("float_type", "float_parsing", "finite_number"):
        rest = f"must be a number, got {value!r}."
    elif kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        rest = _range(field, value)
    elif kind in ("dict_type", "dataclass_type", "mapping_type", "model_type"):
        rest = "must be a mapping."
    elif kind in ("missing", "missing_argument"):
        rest = "is missing."
    elif kind == "literal_error":
        rest = f"must be {str(ctx.get('expected', '')).replace(chr(39), '')}, got {value!r}."
    elif kind in ("string_type", "path_type"):
        rest = f"must be text, got {value!r}."
    else:  # a type this project does not declare: pydantic's own words
        rest = f"{error['msg'][:1].lower()}{error['msg'][1:]}, got {value!r}."
    return f"'{key}' {rest}" if key else rest[:1].upper() + rest[1:]


def _range(field: FieldInfo | None, value: Any) -> str:
    """A number out of its bounds: a range with both ends is named alone (``must lie in [0,
    1].``), a single bound with the value given."""
    low, low_open, high, high_open = _bound_ends(field)
    if low is not None and high is not None:
        if low_open and high_open:
            return f"must lie strictly between {low:g} and {high:g}."
        opening, closing = "(" if low_open else "[", ")" if high_open else "]"
        return f"must lie in {opening}{low:g}, {high:g}{closing}."
    if high is not None:
        return f"must be {'<' if high_open else '<='} {high:g}, got {value!r}."
    return f"must be {'>' if low_open else '>='} {low if low is not None else 0:g}, " \
           f"got {value!r}."


def _bound_ends(field: FieldInfo | None) -> tuple[float | None, bool, float | None, bool]:
    low = high = None
    low_open = high_open = False
    for item in field.metadata if field is not None else ():
        if isinstance(item, annotated_types.Ge):
            low = float(item.ge)  # type: ignore[arg-type]
        elif isinstance(item, annotated_types.Gt):
            low, low_open = float(item.gt), True  # type: ignore[arg-type]
        elif isinstance(item, annotated_types.Le):
            high = float(item.le)  # type: ignore[arg-type]
        elif isinstance(item, annotated_types.Lt):
            high, high_open = float(item.lt), True  # type: ignore[arg-type]
    if high is not None and math.isinf(high):
        high = None
    return low, low_open, high, high_open


def _dotted(where: tuple[str, ...], loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in (*where, *loc))


def _field_names(owner: Any) -> list[str]:
    fields = getattr(owner, "__pydantic_fields__", None) or {}
    return list(fields)


def _node(model: Any, loc: tuple[Any, ...]) -> tuple[FieldInfo | None, Any]:
    """The field at ``loc`` under ``model`` and the type it holds (a mapping's values are
    its entries' type; None where the walk leaves the declared types)."""
    field: FieldInfo | None = None
    current = model
    for part in loc:
        current = _unwrapped(current)
        fields = getattr(current, "__pydantic_fields__", None)
        if fields is not None:
            field = fields.get(str(part))
            if field is None:
                return None, None
            current = field.annotation
        elif typing.get_origin(current) in (dict, Mapping, typing.Mapping):
            field = FieldInfo.from_annotation(typing.get_args(current)[1])
            current = field.annotation
        else:
            return None, None
    return field, _unwrapped(current)


def _unwrapped(kind: Any) -> Any:
    """``X`` of ``X | None`` (the declared type a mapping of the file is checked against)."""
    arguments = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and arguments:
        return next((a for a in arguments if hasattr(a, "__pydantic_fields__")), arguments[0])
    return kind
