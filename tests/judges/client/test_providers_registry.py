"""The provider registry: a third provider is one module and one entry point.

``vllm_provider`` (tests/support/) is an OpenAI-compatible local server with its own key
variable and no key required; installed as a plugin package installs it (an entry point of
``eval_harness.chat_providers``), it is accepted by config validation, its
requests go through the real pipeline to the fake server, its errors are classified by its own
module and the doctor names its key variable. And an unused provider's SDK is never imported.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import uuid
from dataclasses import replace

import pytest

from eval_harness.cli.doctor_judges import check_judge_key, effective_judges
from eval_harness.judges.client.providers import provider
from eval_harness.judges.client.retry import classify_error
from eval_harness.judges.client.session import JudgeSession
from eval_harness.judges.protocol import Outcome
from eval_harness.settings import ConfigError, load_settings
from eval_harness.settings.judges import RateLimit, parse_judge_settings
from fake_llm_server import FakeTime, Fault, judge_settings
from paths import REPO


def install_plugin(folder, monkeypatch) -> None:
    """What ``pip install`` of a package declaring the vllm provider leaves on the path: its
    metadata with the one entry point."""
    dist = folder / "vllm_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[eval_harness.chat_providers]\n"
                                           "vllm = vllm_provider\n")
    monkeypatch.syspath_prepend(str(folder))


@pytest.fixture
def vllm(tmp_path, monkeypatch):
    install_plugin(tmp_path, monkeypatch)
    return provider("vllm")


def _vllm_settings(settings, fake, **variables):
    """Judge 1 on the vllm provider, pointed at the fake server's OpenAI API by its own
    variable (VLLM_BASE_URL), as the settings read it from the environment."""
    variables = {"VLLM_BASE_URL": fake.openai_base_url, **variables}
    parsed = parse_judge_settings({"judge1": "vllm:gpt-4o", "judge2": "local:lexical"})
    configured = judge_settings(settings, fake, judge1=parsed.judge1, judge2=parsed.judge2,
                                rate_limits={"vllm": RateLimit(1e6, None)})
    return replace(configured, provider_variables=variables)


def _session(settings, conn, time_):
    return JudgeSession(settings, conn, run_id=uuid.uuid4().hex[:12], rng=random.Random(7),
                        **time_.options())


@pytest.mark.unit
def test_config_accepts_an_installed_provider_only(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"unknown provider 'vllm' \(known: openai, "
                                          r"anthropic, local\)"):
        parse_judge_settings({"judge1": "vllm:my-model"}, {})
    with monkeypatch.context() as installed:
        install_plugin(tmp_path, installed)
        judges = parse_judge_settings({"judge1": "vllm:my-model",
                                       "rate_limits": {"vllm": {"requests_per_minute": 30}}},
                                      {})
        assert judges.judge1 == "vllm:my-model"
        assert judges.rate_limits["vllm"] == RateLimit(30, None)
        with pytest.raises(ConfigError, match="'judges.judge1' names an unknown provider "
                                              "'google' .known: openai, anthropic, vllm, local"):
            parse_judge_settings({"judge1": "google:gemini"}, {})
        with pytest.raises(ConfigError, match="'judges.rate_limits.vllm' needs "
                                              "'requests_per_minute'"):
            parse_judge_settings({"rate_limits": {"vllm": {"tokens_per_minute": 9}}}, {})
    with pytest.raises(ConfigError, match="unknown provider 'vllm'"):
        parse_judge_settings({"judge1": "vllm:my-model"}, {})


@pytest.mark.unit
def test_the_settings_keep_each_providers_variables_out_of_sight(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no config.yaml: defaults
    settings = load_settings(None, environ={"VLLM_API_KEY": "vllm-key-0123", "HOME": "/root"})
    assert dict(settings.provider_variables) == {"VLLM_API_KEY": "vllm-key-0123"}
    assert "vllm-key" not in repr(settings)


def test_its_requests_go_through_the_pipeline_without_a_key(vllm, settings, conn, fake):
    time_ = FakeTime()
    session = _session(_vllm_settings(settings, fake), conn, time_)
    assert session.judge1.spec == "vllm:gpt-4o"  # no key needed: no fallback to a local judge

    async def run():
        async with session:
            return await session.judge1.relevance(f"aspirin {uuid.uuid4().hex}",
                                                  "aspirin lowers heart attack risk")

    result = asyncio.run(run())
    assert result.outcome is Outcome.SCORED
    assert session.pipeline.base_url("vllm") == fake.openai_base_url.rstrip("/")
    sent = fake.chat_records("openai")[-1]
    assert sent.headers.get("authorization") == "Bearer EMPTY"  # the provider's quirk
    rows = conn.execute("SELECT api_name FROM api_cost_log WHERE run_id = %s",
                        (session.run_id,)).fetchall()
    assert rows == [("vllm",)]


def test_its_errors_are_classified_by_its_module(vllm, settings, conn, fake):
    time_ = FakeTime()
    fake.enqueue(Fault("429", retry_after=3), "503")
    session = _session(_vllm_settings(settings, fake, VLLM_API_KEY="vllm-key-0123456789"),
                       conn, time_)

    async def run():
        async with session:
            return await session.judge1.relevance(f"aspirin {uuid.uuid4().hex}", "aspirin")

    result = asyncio.run(run())
    assert result.scored and result.attempts == 3
    assert time_.waits[0] == 3.0  # the server's Retry-After, carried in the decision
    rows = conn.execute("SELECT api_name, error_type, status_code FROM api_retry_log "
                        "WHERE run_id = %s ORDER BY id", (session.run_id,)).fetchall()
    assert rows == [("vllm", "rate_limit", 429), ("vllm", "server_error", 503)]
    assert fake.chat_records("openai")[-1].headers.get("authorization") == \
        "Bearer vllm-key-0123456789"
    assert classify_error(TimeoutError("slow"), "vllm").kind == "timeout"


def test_the_doctor_names_its_key_variable(vllm, settings, fake):
    keyless = _vllm_settings(settings, fake)
    check = check_judge_key(keyless, "judge1", effective_judges(keyless)["judge1"])
    assert check.detail == "vllm:gpt-4o: VLLM_API_KEY not set (none needed)"
    keyed = _vllm_settings(settings, fake, VLLM_API_KEY="vllm-key-0123456789")
    check = check_judge_key(keyed, "judge1", effective_judges(keyed)["judge1"])
    assert check.detail == "vllm:gpt-4o: VLLM_API_KEY set"


def test_an_unused_providers_sdk_is_not_imported():
    code = ("import sys\n"
            "from eval_harness.judges.client.providers import provider\n"
            "from eval_harness.judges.client import session, runner, batch\n"
            "provider('openai')\n"
            "print('anthropic' in sys.modules, 'openai' in sys.modules)\n")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=REPO, check=True).stdout.split()
    assert shown == ["False", "True"]
