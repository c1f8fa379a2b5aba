"""The ``quality_gates:`` section of ``config.yaml``: the answers relation, the daily
partitions and the four gates (:class:`QualityGateSettings`, :class:`GateSettings`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from eval_harness.settings.errors import ConfigError, reject_unknown_keys
from eval_harness.settings.gates_answers import AnswersMapping, parse_answers_mapping
from eval_harness.settings.values import flag_of, mapping_of, number_of


@dataclass(frozen=True)
class GateSettings:
    """One gate of ``quality_gates.gates``: when an answer passes, when the check passes."""

    enabled: bool = True
    threshold: float = 0.5        # an answer passes when its score reaches it
    min_pass_rate: float = 0.90   # the check passes when the partition's pass rate reaches it
    blocking: bool = True         # True: ERROR severity, `gate` exits 1; False: a WARN only


# answer_reward's threshold is on the judge's reward scale, -1..+1; the others on 0..1.
# All four run unless a config switches one off: a config without quality_gates.gates gates
# grounding too (with judge 1, or its offline stand-in local:lexical without an API key).
DEFAULT_GATES: Mapping[str, GateSettings] = {
    "format_compliance": GateSettings(True, 0.95, 0.90, True),
    "citation_coverage": GateSettings(True, 0.70, 0.90, True),
    "grounding": GateSettings(True, 0.80, 0.90, True),
    "answer_reward": GateSettings(True, 0.30, 0.90, False),
}


@dataclass(frozen=True)
class QualityGateSettings:
    """The ``quality_gates:`` section: the answers relation, partitions and the four gates."""

    answers_relation: str = "answers"           # table or view with the answers contract
    partition_start: date = date(2024, 1, 1)    # first day (UTC) of the daily partitions
    answers_file: Path | None = None            # JSONL the main job imports (None: nothing)
    grounding_source_chars: int = 500           # each source is cut to this length for the judge
    reflexion_threshold: float = 0.3            # reward below it triggers a reflexion
    gates: Mapping[str, GateSettings] = field(default_factory=lambda: dict(DEFAULT_GATES))
    # the RAG system's own answers table, read in place (None: answers_relation)
    answers: AnswersMapping | None = None

    def gate(self, name: str) -> GateSettings:
        try:
            return self.gates[name]
        except KeyError:
            raise ConfigError(f"Unknown quality gate '{name}' "
                              f"(known: {', '.join(DEFAULT_GATES)}).") from None


_RELATION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$")


def parse_gate(name: str, section: Any, default: GateSettings) -> GateSettings:
    where = f"quality_gates.gates.{name}"
    if section is None:
        return default
    if not isinstance(section, Mapping):
        raise ConfigError(f"'{where}' must be a mapping.")
    reject_unknown_keys(section, where, tuple(GateSettings.__dataclass_fields__))
    threshold = number_of(section, "threshold", default.threshold, where)
    low = -1.0 if name == "answer_reward" else 0.0  # the reward scale is -1..+1
    if not low <= threshold <= 1.0:
        raise ConfigError(f"'{where}.threshold' must lie in [{low:g}, 1].")
    min_pass_rate = number_of(section, "min_pass_rate", default.min_pass_rate, where)
    if not 0.0 <= min_pass_rate <= 1.0:
        raise ConfigError(f"'{where}.min_pass_rate' must lie in [0, 1].")
    return GateSettings(enabled=flag_of(section, "enabled", default.enabled, where),
                        threshold=threshold, min_pass_rate=min_pass_rate,
                        blocking=flag_of(section, "blocking", default.blocking, where))


def parse_quality_gates(raw: Mapping[str, Any], root: Path) -> QualityGateSettings:
    section = mapping_of(raw, "quality_gates", tuple(QualityGateSettings.__dataclass_fields__))
    d = QualityGateSettings()
    relation = section.get("answers_relation", d.answers_relation)
    if not isinstance(relation, str) or not _RELATION_NAME.match(relation):
        raise ConfigError("'quality_gates.answers_relation' must be a table or view "
                          f"name such as answers or myschema.answers, got {relation!r}.")
    start = section.get("partition_start", d.partition_start)
    if isinstance(start, str):
        try:
            start = date.fromisoformat(start)
        except ValueError:
            pass
    if not isinstance(start, date):
        raise ConfigError("'quality_gates.partition_start' must be a date "
                          f"YYYY-MM-DD, got {start!r}.")
    answers_file = section.get("answers_file")
    answers = None
    if section.get("answers") is not None:
        if "answers_relation" in section:
            raise ConfigError("'quality_gates.answers' and 'quality_gates.answers_relation' "
                              "both name the answers the gates read; keep one (answers maps "
                              "the RAG system's own table, answers_relation names a relation "
                              "with the answers contract).")
        answers = parse_answers_mapping(section["answers"])
        if answers_file:
            raise ConfigError("'quality_gates.answers_file' imports into the harness's own "
                              "answers table, which the gates do not read while "
                              "'quality_gates.answers' maps the RAG system's; set "
                              "answers_file to null.")
    chars = section.get("grounding_source_chars", d.grounding_source_chars)
    if isinstance(chars, bool) or not isinstance(chars, int) or chars < 1:
        raise ConfigError("'quality_gates.grounding_source_chars' must be a "
                          "positive integer.")
    reflexion = number_of(section, "reflexion_threshold", d.reflexion_threshold, "quality_gates")
    if not -1.0 <= reflexion <= 1.0:
        raise ConfigError("'quality_gates.reflexion_threshold' must lie in [-1, 1].")
    gates = mapping_of(section, "gates", tuple(DEFAULT_GATES), where="quality_gates")
    return QualityGateSettings(
        answers_relation=relation,
        partition_start=start.date() if hasattr(start, "date") else start,
        answers_file=(root / str(answers_file)).resolve() if answers_file else None,
        grounding_source_chars=chars, reflexion_threshold=reflexion, answers=answers,
        gates={name: parse_gate(name, gates.get(name), default)
               for name, default in DEFAULT_GATES.items()})
