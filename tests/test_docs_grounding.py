"""The quality-gates guide (docs/guides/quality-gates.md) says what the offline grounding judge can
and cannot be trusted with: with the measured figures, each of which must be a figure of
benchmarks/RESULTS.md's "Grounding validation" (so the two cannot drift apart), that summaries
are out of its reach, and an LLM-judge configuration for them that the settings accept as it is
written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from eval_harness.settings import load_settings

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "guides" / "quality-gates.md"
HEADING = "## What it can and cannot be trusted with"


def section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end, text.index(start))]


def test_the_trust_section_has_the_measured_figures_of_results_md():
    guide = GUIDE.read_text(encoding="utf-8")
    assert HEADING in guide
    trust = section(guide, HEADING, "**The verdict**")
    results = section((REPO / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8"),
                      "## Grounding validation", "### Speed")
    table = [line for line in trust.splitlines() if line.startswith("| ")][1:]
    figures = {f for line in table for f in re.findall(r"\b0\.\d{3}\b", line)}
    assert len(figures) >= 20
    assert sorted(f for f in figures if f not in results) == []


def test_it_sends_summaries_to_an_llm_judge_with_a_config_that_loads(tmp_path):
    guide = GUIDE.read_text(encoding="utf-8")
    trust = section(guide, HEADING, "**The verdict**")
    assert "Do not trust it with summaries" in trust and "news articles" in trust
    assert "no figure for it is given here" in trust  # nothing invented
    assert "use an LLM grounding judge" in trust
    snippet = trust.split("```yaml\n", 1)[1].split("```", 1)[0]
    config = tmp_path / "config.yaml"
    config.write_text(snippet, encoding="utf-8")
    settings = load_settings(config, environ={})
    assert yaml.safe_load(snippet)["judges"]["judge1"] == settings.judges.judge1
    assert settings.judges.judge1.split(":")[0] in ("openai", "anthropic")
    assert settings.quality_gates.gate("grounding").enabled
