"""Sources of an answer, as the rule-based gates take them: ``count`` numbered documents;
and the rule-based gates themselves, for tests that gate without a judge."""

from __future__ import annotations

import dataclasses

from eval_harness.gates.registry import build_gates
from eval_harness.settings.gates import QualityGateSettings

JUDGED_GATES = ("grounding", "answer_reward")  # their tests: tests/gates/test_llm_gates.py


def rule_gates(**changes):
    """The gates of the default config without the two judged ones (which run by default),
    some gate settings replaced (``name=GateSettings``)."""
    defaults = QualityGateSettings()
    gates = {name: dataclasses.replace(cfg, enabled=False) if name in JUDGED_GATES else cfg
             for name, cfg in defaults.gates.items()}
    gates.update(changes)
    return build_gates(dataclasses.replace(defaults, gates=gates))


def sources(count: int) -> list[dict[str, str]]:
    return [{"id": f"doc-{n}", "text": f"text of source {n}"} for n in range(1, count + 1)]
