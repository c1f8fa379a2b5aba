"""The judges: section of config.yaml, environment overrides, fallbacks and prices."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from eval_harness.judges.client import session as session_module
from eval_harness.settings.judges import JudgeSettings, Price, parse_judge_settings
from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.protocol import ChatRequest, Message, Usage
from eval_harness.judges.client.session import JudgeSession, JudgeUnavailable, resolve_judge_specs
from eval_harness.settings import ConfigError, load_settings

REPO_CONFIG = Path(__file__).resolve().parents[1] / "config.yaml"


def test_repository_config_has_the_issue_defaults():
    judges = load_settings(REPO_CONFIG, environ={}).judges
    assert (judges.judge1, judges.judge2) == ("openai:gpt-4o", "anthropic:claude-haiku-4-5")
    assert dict(judges.temperatures) == {"relevance": 0.0, "evaluation": 0.0, "grounding": 0.0,
                                         "reflexion": 0.7}
    assert dict(judges.max_tokens) == {"relevance": 100, "evaluation": 500, "grounding": 500,
                                       "reflexion": 1000}
    assert judges.retry.max_retries == 4 and judges.retry.base_delay_seconds == 1.0
    assert judges.retry.jitter == 0.2 and judges.hybrid_top_k == 5
    assert judges.prices["gpt-4o"].batch_discount == 0.5
    assert judges == replace(JudgeSettings(), prices=judges.prices)  # file == built-in defaults


def test_environment_overrides_judges_and_budget():
    judges = parse_judge_settings({"judge1": "openai:gpt-4o", "budget_usd": 3},
                                  {"EVAL_HARNESS_JUDGE1": "local:embedding",
                                   "EVAL_HARNESS_JUDGE2": "anthropic:claude-3-5-haiku-20241022",
                                   "EVAL_HARNESS_JUDGE_BUDGET_USD": "none"})
    assert judges.judge1 == "local:embedding"
    assert judges.judge2 == "anthropic:claude-3-5-haiku-20241022"  # any model name is accepted
    assert judges.budget_usd is None
    assert parse_judge_settings({}, {"EVAL_HARNESS_JUDGE_BUDGET_USD": "2.5"}).budget_usd == 2.5


def test_api_keys_are_read_by_settings_and_never_shown():
    settings = load_settings(REPO_CONFIG, environ={"ANTHROPIC_API_KEY": "sk-ant-secret-123",
                                                   "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
                                                   "OPENAI_API_KEY": "sk-openai-secret-456"})
    assert settings.anthropic_api_key == "sk-ant-secret-123"
    assert settings.anthropic_base_url == "http://127.0.0.1:9"
    assert "secret" not in repr(settings)


@pytest.mark.parametrize("section, message", [
    ({"judge1": "gpt-4o"}, "must look like provider:model"),
    ({"judge1": "google:gemini"}, "unknown provider 'google'"),
    ({"judge2": "local:bm25"}, "unknown local judge 'bm25'"),
    ({"judge2": "openai:"}, "names no model"),
    ({"concurency": 4}, "unknown key 'judges.concurency'"),
    ({"concurrency": 0}, "'judges.concurrency' must be an integer >= 1"),
    ({"budget_usd": -1}, "'judges.budget_usd' must be >= 0"),
    ({"budget_usd": "lots"}, "number of USD or none"),
    ({"temperatures": {"judging": 0.0}}, "unknown key 'judges.temperatures.judging'"),
    ({"max_tokens": {"relevance": 0}}, "'judges.max_tokens.relevance' must be an integer"),
    ({"rate_limits": {"openai": {"requests_per_minute": 0}}}, "must be > 0"),
    ({"prices": {"my-model": {"input": 1.0}}}, "needs 'output'"),
    ({"retry": {"max_retries": -1}}, "'judges.retry.max_retries'"),
    ({"local": {"embedding_floor": 0.9, "embedding_ceiling": 0.3}}, "must be below"),
    ({"send_temperature": {"anthropic": "yes"}}, "must be true or false"),
])
def test_configuration_errors_name_the_key(section, message):
    with pytest.raises(ConfigError, match=message) as error:
        parse_judge_settings(section, {})
    assert str(error.value).startswith("config.yaml:") and "\n" not in str(error.value)


def _settings(**judges):
    base = load_settings(REPO_CONFIG, environ={})
    return replace(base, judges=replace(base.judges, **judges))


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


def test_fallback_keeps_the_two_judges_different():
    judge1, judge2, notices = resolve_judge_specs(
        _settings(judge1="local:embedding", judge2="anthropic:claude-haiku-4-5"))
    assert (judge1, judge2) == ("local:embedding", "local:lexical") and len(notices) == 1


def test_without_fallback_a_missing_key_is_an_error_naming_it():
    with pytest.raises(JudgeUnavailable, match="ANTHROPIC_API_KEY is not set"):
        resolve_judge_specs(_settings(judge1="local:lexical", fallback_to_local=False))


def test_a_paid_model_without_a_price_is_refused_with_what_to_add(conn):
    settings = replace(_settings(judge1="openai:my-finetune", judge2="local:lexical"),
                       openai_api_key="sk-test-key-000000")
    with pytest.raises(JudgeUnavailable, match="judges.prices .* no entry for model "
                                               "'my-finetune'"):
        JudgeSession(settings, conn)


def test_prices_match_by_longest_prefix_and_apply_batch_discount():
    table = PriceTable({"claude-haiku-4-5": Price(1.0, 5.0, 0.1),
                        "claude-haiku": Price(9.0, 9.0)})
    usage = Usage(input_tokens=1_000_000, output_tokens=200_000, cached_tokens=400_000)
    # 600k uncached * $1 + 400k cached * $0.10 + 200k out * $5 = 0.6 + 0.04 + 1.0 = $1.64
    assert table.cost("claude-haiku-4-5-20251001", usage) == pytest.approx(1.64)
    assert table.cost("claude-haiku-4-5", usage, batch=True) == pytest.approx(0.82)
    assert table.lookup("gpt-4o") is None
    request = ChatRequest("anthropic", "claude-haiku-4-5", "relevance", "v", "s" * 300,
                          (Message("user", "u" * 600),), 0.0, 100)
    # worst case: 900 chars / 3 + 8 * 2 = 316 input tokens, 100 output tokens
    assert table.worst_case(request) == pytest.approx((316 * 1.0 + 100 * 5.0) / 1e6)
