"""The value types the sections of ``config.yaml`` are declared with, and validating one.

Every section is a frozen pydantic dataclass with :data:`SECTION` as its config: unknown keys
are refused (a typo must not silently keep a default), numbers are finite, and a flag or a
number is never coerced from text or from the other (``"yes"`` is no flag, ``true`` no number).
:func:`validated` checks a parsed mapping against one and turns pydantic's error into the
one-sentence :class:`~eval_harness.settings.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
)

from eval_harness.settings.errors import config_error, problem

SECTION = ConfigDict(extra="forbid", allow_inf_nan=False)

Flag = Annotated[bool, Strict()]
Number = Annotated[float, Strict()]
NonNegative = Annotated[float, Strict(), Field(ge=0.0)]
Positive = Annotated[float, Strict(), Field(gt=0.0)]
Share = Annotated[float, Strict(), Field(ge=0.0, le=1.0)]       # a proportion, 0..1
Natural = Annotated[int, Strict(), Field(ge=0)]
Count = Annotated[int, Strict(), Field(ge=1)]


def budget_of(value: Any) -> float | None:
    """A budget in USD: a number >= 0, or none (``none``, ``null`` or empty: no limit)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null", "")):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise problem(f"must be a number of USD or none, got {value!r}.") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise problem(f"must be a number, got {value!r}.")
    if value < 0:
        raise problem(f"must be >= 0, got {value!r}.")
    return float(value)


def resolved_path(value: Any, info: ValidationInfo) -> Path:
    """A path of the file, relative to the config file's folder (``root`` of the context)."""
    if not isinstance(value, (str, Path)) or not str(value):
        raise problem(f"must be a path, got {value!r}.")
    root = (info.context or {}).get("root")
    return (Path(root) / str(value)).resolve() if root is not None else Path(value)


T = TypeVar("T")
_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def validated(model: type[T], raw: Any, where: tuple[str, ...] = (),
              context: Mapping[str, Any] | None = None) -> T:
    """``raw`` (a parsed mapping, ``None`` for an absent section) as ``model``."""
    adapter = _ADAPTERS.get(model)
    if adapter is None:
        adapter = _ADAPTERS[model] = TypeAdapter(model)
    try:
        return adapter.validate_python({} if raw is None else raw, context=dict(context or {}))
    except ValidationError as exc:
        raise config_error(exc, model, where) from None


def _empty_if_none(value: Any) -> Any:
    return {} if value is None else value


# A nested section: absent or empty in the file (``judges:`` with nothing under it) is {}.
OrEmpty = BeforeValidator(_empty_if_none)
