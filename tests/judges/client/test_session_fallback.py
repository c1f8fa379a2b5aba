"""Which judges a session runs: without a key the default falls back to two different local
judges (said once), or refuses naming the key; a paid model needs a price."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from eval_harness.judges.client import session as session_module
from eval_harness.judges.client.session import JudgeSession, JudgeUnavailable, resolve_judge_specs
from eval_harness.settings import load_settings
from paths import REPO

REPO_CONFIG = REPO / "config.yaml"


def _settings(**judges):
    base = load_settings(REPO_CONFIG, environ={})
    return replace(base, judges=replace(base.judges, **judges))


@pytest.mark.unit
def test_without_keys_the_default_falls_back_to_two_different_local_judges(caplog,
                                                                           monkeypatch):
    monkeypatch.setattr(session_module, "_announced", set())
    with caplog.at_level(logging.WARNING, logger="eval_harness.judges"):
        first = resolve_judge_specs(_settings())
        second = resolve_judge_specs(_settings())
    assert first[:2] == ("local:lexical", "local:embedding")
    assert any("OPENAI_API_KEY is not set" in n for n in first[2])
    assert any("ANTHROPIC_API_KEY is not set" in n for n in first[2])
    assert second == first
    assert caplog.text.count("OPENAI_API_KEY is not set") == 1  # said once


@pytest.mark.unit
def test_fallback_keeps_the_two_judges_different():
    judge1, judge2, notices = resolve_judge_specs(
        _settings(judge1="local:embedding", judge2="anthropic:claude-haiku-4-5"))
    assert (judge1, judge2) == ("local:embedding", "local:lexical") and len(notices) == 1


@pytest.mark.unit
def test_without_fallback_a_missing_key_is_an_error_naming_it():
    with pytest.raises(JudgeUnavailable, match="ANTHROPIC_API_KEY is not set"):
        resolve_judge_specs(_settings(judge1="local:lexical", fallback_to_local=False))


def test_a_paid_model_without_a_price_is_refused_with_what_to_add(conn):
    settings = replace(_settings(judge1="openai:my-finetune", judge2="local:lexical"),
                       openai_api_key="sk-test-key-000000")
    with pytest.raises(JudgeUnavailable, match="judges.prices .* no entry for model "
                                               "'my-finetune'"):
        JudgeSession(settings, conn)
