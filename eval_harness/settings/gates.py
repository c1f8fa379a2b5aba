"""The ``quality_gates:`` section of ``config.yaml``: the answers relation, the daily
partitions and the four gates (:class:`QualityGateSettings`, :class:`GateSettings`)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, Strict, model_validator
from pydantic.dataclasses import dataclass

from eval_harness.settings.errors import ConfigError, problem, sentence, unknown
from eval_harness.settings.gates_answers import AnswersMapping
from eval_harness.settings.values import SECTION, Count, Flag, Number, Share, resolved_path


@dataclass(frozen=True, config=SECTION)
class GateSettings:
    """One gate of ``quality_gates.gates``: when an answer passes, when the check passes."""

    enabled: Flag = True          # false: the gate does not run
    threshold: Number = 0.5       # an answer passes when its score reaches it
    min_pass_rate: Share = 0.90   # the check passes when the partition's pass rate reaches it
    blocking: Flag = True         # True: ERROR severity, `gate` exits 1; False: a WARN only


# answer_reward's threshold is on the judge's reward scale, -1..+1; the others on 0..1.
# All four run unless a config switches one off: a config without quality_gates.gates gates
# grounding too (with judge 1, or its offline stand-in local:lexical without an API key).
DEFAULT_GATES: Mapping[str, GateSettings] = {
    "format_compliance": GateSettings(True, 0.95, 0.90, True),
    "citation_coverage": GateSettings(True, 0.70, 0.90, True),
    "grounding": GateSettings(True, 0.80, 0.90, True),
    "answer_reward": GateSettings(True, 0.30, 0.90, False),
}

_RELATION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$")


def _each_gate_over_its_defaults(given: Any) -> Any:
    """``quality_gates.gates``: each gate's keys over that gate's own defaults."""
    if given is None:
        given = {}
    if not isinstance(given, Mapping):
        raise problem("must be a mapping.")
    extra = [str(name) for name in given if name not in DEFAULT_GATES]
    if extra:
        raise unknown(extra, tuple(DEFAULT_GATES))
    gates: dict[str, Any] = {}
    for name, default in DEFAULT_GATES.items():
        section = given.get(name)
        if isinstance(section, GateSettings) or section is None:
            gates[name] = section or default
        elif isinstance(section, Mapping):
            gates[name] = {**dataclasses.asdict(default), **section}
        else:
            gates[name] = section  # refused by GateSettings: not a mapping
    return gates


def _thresholds_on_their_scales(gates: Mapping[str, GateSettings]) -> Mapping[str, GateSettings]:
    for name, gate in gates.items():
        low = -1.0 if name == "answer_reward" else 0.0  # the reward scale is -1..+1
        if not low <= gate.threshold <= 1.0:
            raise problem(f"must lie in [{low:g}, 1].", key=f"{name}.threshold")
    return gates


def _relation_name(value: Any) -> str:
    if not isinstance(value, str) or not _RELATION_NAME.match(value):
        raise problem("must be a table or view name such as answers or myschema.answers, "
                      f"got {value!r}.")
    return value


def _a_date(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    if hasattr(value, "date") and callable(value.date):  # a datetime: its day
        return value.date()
    if not isinstance(value, date):
        raise problem(f"must be a date YYYY-MM-DD, got {value!r}.")
    return value


@dataclass(frozen=True, config=SECTION)
class QualityGateSettings:
    """The ``quality_gates:`` section: the answers relation, partitions and the four gates."""

    # table or view with the answers contract
    answers_relation: Annotated[str, BeforeValidator(_relation_name)] = "answers"
    # first day (UTC) of the daily partitions
    partition_start: Annotated[date, BeforeValidator(_a_date)] = date(2024, 1, 1)
    # JSONL the main job imports (None: nothing), relative to the config file
    answers_file: Annotated[Path, BeforeValidator(resolved_path)] | None = None
    grounding_source_chars: Count = 500   # each source is cut to this length for the judge
    # reward below it triggers a reflexion
    reflexion_threshold: Annotated[float, Strict(), Field(ge=-1.0, le=1.0)] = 0.3
    gates: Annotated[Mapping[str, GateSettings], BeforeValidator(_each_gate_over_its_defaults),
                     AfterValidator(_thresholds_on_their_scales)] = dataclasses.field(
        default_factory=lambda: dict(DEFAULT_GATES))
    # the RAG system's own answers table, read in place (None: answers_relation)
    answers: AnswersMapping | None = None

    def gate(self, name: str) -> GateSettings:
        try:
            return self.gates[name]
        except KeyError:
            raise ConfigError(f"Unknown quality gate '{name}' "
                              f"(known: {', '.join(DEFAULT_GATES)}).") from None

    @model_validator(mode="before")
    @classmethod
    def _one_source_of_answers(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and not data.get("answers_file", True):
            data = {**data, "answers_file": None}  # empty: nothing to import
        if isinstance(data, Mapping) and data.get("answers") is not None:
            if "answers_relation" in data:
                raise sentence("'quality_gates.answers' and 'quality_gates.answers_relation' "
                               "both name the answers the gates read; keep one (answers maps "
                               "the RAG system's own table, answers_relation names a relation "
                               "with the answers contract).")
            if data.get("answers_file"):
                raise sentence("'quality_gates.answers_file' imports into the harness's own "
                               "answers table, which the gates do not read while "
                               "'quality_gates.answers' maps the RAG system's; set "
                               "answers_file to null.")
        return data
