"""The `quality_gates` section of config.yaml (eval_harness.settings.gates)."""

from __future__ import annotations

import dataclasses

import pytest

from eval_harness.gates.gate import reward_to_score
from eval_harness.gates.registry import build_gates
from eval_harness.settings import ConfigError, GateSettings, QualityGateSettings, load_settings
from paths import REPO

pytestmark = pytest.mark.unit


# --- settings --------------------------------------------------------------------------------

def test_quality_gate_settings_from_the_repository_config():
    settings = load_settings(REPO / "config.yaml", environ={})
    gates = settings.quality_gates
    assert gates.answers_relation == "answers" and gates.grounding_source_chars == 500
    # the sample answers are gated in place in the demo store (tests/settings/test_gates_answers.py)
    assert gates.reflexion_threshold == 0.3 and gates.answers_file is None
    assert gates.gate("format_compliance") == GateSettings(True, 0.95, 0.90, True)
    assert gates.gate("answer_reward").blocking is False


@pytest.mark.parametrize(("section", "message"), [
    ("quality_gates: {gates: {citation_coverage: {threshold: 1.5}}}",
     "'quality_gates.gates.citation_coverage.threshold' must lie in [0, 1]"),
    ("quality_gates: {gates: {formatting: {enabled: true}}}",
     "unknown key 'quality_gates.gates.formatting'"),
    ("quality_gates: {gates: {grounding: {blocking: 'yes'}}}", "must be true or false"),
    ("quality_gates: {answers_relation: 'answers; drop table x'}", "answers_relation"),
    ("quality_gates: {partition_start: last year}", "partition_start"),
])
def test_bad_quality_gate_config_is_one_clear_error(tmp_path, section, message):
    config = tmp_path / "config.yaml"
    config.write_text(section + "\n")
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_settings(config, environ={})


def test_enabling_an_unwired_llm_gate_says_what_to_do():
    settings = QualityGateSettings()
    enabled = dataclasses.replace(
        settings, gates={**settings.gates, "grounding": GateSettings(True, 0.8, 0.9, True)})
    with pytest.raises(ConfigError, match="grounding.enabled: false"):
        build_gates(enabled)
    assert reward_to_score(0.3) == pytest.approx(0.65)  # the answer_reward threshold's scale
