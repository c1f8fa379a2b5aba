"""``eval-harness doctor``: the judges. Whether the key each configured judge needs is set
(never any part of its value) and priced, which local judge a keyless one falls back to, and
one cheap authenticated request per provider in use (a models list, no retries, skipped with
``--offline``), every error mapped to one sanitised line.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import contextmanager
from typing import Iterator

from eval_harness.cli.doctor_check import FAIL, OK, SKIP, WARN, Check, first_line
from eval_harness.settings.judges import KEY_VARIABLES, JudgeSettings
from eval_harness.judges.client.pricing import PriceTable
from eval_harness.settings import Settings
from eval_harness.store.connection import redact_url

PROBE_TIMEOUT_SECONDS = 5.0
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1",
                     "anthropic": "https://api.anthropic.com"}


def _api_key(settings: Settings, provider: str) -> str | None:
    return {"openai": settings.openai_api_key,
            "anthropic": settings.anthropic_api_key}.get(provider)


def _base_url(settings: Settings, provider: str) -> str:
    given = {"openai": settings.openai_base_url,
             "anthropic": settings.anthropic_base_url}.get(provider)
    return given or DEFAULT_BASE_URLS[provider]


@contextmanager
def _quiet_judge_notices() -> Iterator[None]:
    """The doctor prints fallbacks as its own lines; keep the session's notice off stderr."""
    logger = logging.getLogger("eval_harness.judges")
    was_disabled, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = was_disabled


def effective_judges(settings: Settings) -> dict[str, str | None]:
    """The judge each slot will use, by the session's own fallback rules; ``None`` for a
    slot that cannot be built (its key is missing and fallback is off)."""
    from eval_harness.judges.client.session import JudgeUnavailable, resolve_judge_specs  # SDKs: late

    config: JudgeSettings = settings.judges
    try:
        with _quiet_judge_notices():
            judge1, judge2, _ = resolve_judge_specs(settings)
        return {"judge1": judge1, "judge2": judge2}
    except JudgeUnavailable:
        return {slot: spec if spec.startswith("local:") or _api_key(settings, spec.split(":")[0])
                else None for slot, spec in (("judge1", config.judge1), ("judge2", config.judge2))}


def check_judge_key(settings: Settings, slot: str, effective: str | None) -> Check:
    """Whether the key a judge needs is set (never any part of its value) and priced."""
    spec = getattr(settings.judges, slot)
    provider, model = spec.split(":", 1)
    if provider == "local":
        return Check(OK, slot, f"{spec}: no key needed")
    variable = KEY_VARIABLES[provider]
    if _api_key(settings, provider):
        try:
            PriceTable(settings.judges.prices).require(model, spec)
        except LookupError as exc:
            return Check(FAIL, slot, f"{spec}: {variable} set, but {exc}")
        return Check(OK, slot, f"{spec}: {variable} set")
    if effective is not None:
        return Check(WARN, slot, f"{spec}: {variable} not set: falls back to {effective}")
    return Check(FAIL, slot, f"{spec}: {variable} not set and judges.fallback_to_local is "
                 f"false: set {variable} or choose a local judge (judges.{slot}: local:lexical)")


async def _list_models(provider: str, key: str, base_url: str, timeout: float) -> None:
    """One cheap authenticated request (a models list), no retries."""
    if provider == "anthropic":
        from anthropic import AsyncAnthropic

        client = AsyncAnthropic(api_key=key, base_url=base_url, timeout=timeout, max_retries=0)
        try:
            await client.models.list(limit=1)
        finally:
            await client.close()
        return
    from openai import AsyncOpenAI

    client = AsyncOpenAI(api_key=key, base_url=base_url, timeout=timeout, max_retries=0)
    try:
        await client.models.list()
    finally:
        await client.close()


def _provider_message(exc: Exception) -> str:
    """The provider's own error message when the body carries one, else the first line."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return first_line(exc)


def _probe_failure(provider: str, exc: Exception, where: str, timeout: float,
                   secrets: tuple[str | None, ...]) -> Check:
    """One sanitised line for a failed probe: rejected keys FAIL, busy providers warn."""
    import anthropic  # the SDKs load only when a probe ran: the CLI starts fast
    import openai

    from eval_harness.judges.client.retry import sanitize

    message = sanitize(_provider_message(exc), secrets)[:160]
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        variable = KEY_VARIABLES[provider]
        seen = f"HTTP {status} from {where}: {message}"
        if status in (401, 403):
            return Check(FAIL, provider, f"{variable} was rejected ({seen}): check the key")
        if status == 404:
            return Check(WARN, provider, f"{seen}: the server offers no models list; "
                         "chat requests were not tried")
        if status == 429 or status >= 500:
            return Check(WARN, provider, f"{seen}: reachable but busy or failing; try later")
        return Check(FAIL, provider, seen)
    if isinstance(exc, (openai.APITimeoutError, anthropic.APITimeoutError)):
        return Check(FAIL, provider, f"no answer from {where} within {timeout:g} s")
    if isinstance(exc, (openai.APIConnectionError, anthropic.APIConnectionError)):
        return Check(FAIL, provider, f"cannot connect to {where}: {message}")
    return Check(FAIL, provider, f"{where}: {type(exc).__name__}: {message}")


def check_provider_reachable(settings: Settings, provider: str,
                             timeout: float = PROBE_TIMEOUT_SECONDS) -> Check:
    key = _api_key(settings, provider)
    base_url = _base_url(settings, provider)
    where = redact_url(base_url)
    secrets = (settings.openai_api_key, settings.anthropic_api_key)
    started = time.monotonic()
    try:
        asyncio.run(_list_models(provider, key or "", base_url, timeout))
    except Exception as exc:  # every SDK or transport error becomes one line
        return _probe_failure(provider, exc, where, timeout, secrets)
    return Check(OK, provider, f"reachable at {where}, key accepted "
                 f"({time.monotonic() - started:.2f} s)")


def judge_checks(settings: Settings, *, offline: bool,
                 timeout: float = PROBE_TIMEOUT_SECONDS) -> Iterator[Check]:
    effective = effective_judges(settings)
    for slot in ("judge1", "judge2"):
        yield check_judge_key(settings, slot, effective[slot])
    used = [spec for spec in dict.fromkeys(effective.values()) if spec is not None]
    local = [spec for spec in used if spec.startswith("local:")]
    if local:
        yield Check(OK, "local", f"{', '.join(local)}: offline, no key or network needed")
    for provider in dict.fromkeys(spec.split(":")[0] for spec in used if spec not in local):
        if offline:
            yield Check(SKIP, provider, "network check skipped (--offline)")
        else:
            yield check_provider_reachable(settings, provider, timeout)
