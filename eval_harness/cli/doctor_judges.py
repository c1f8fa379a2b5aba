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
from eval_harness.settings.judges import LOCAL, JudgeSettings
from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.client.providers import provider as provider_named
from eval_harness.judges.client.providers.base import Provider
from eval_harness.settings import Settings
from eval_harness.store.connection import redact_url

# Only `doctor` needs the judges' request pipeline (the session and its retry rules, a dozen
# modules), and every command loads this module: it is imported where the checks run.

PROBE_TIMEOUT_SECONDS = 5.0


def _needs_key(settings: Settings, provider: Provider) -> bool:
    """Whether ``provider`` is missing a key it needs."""
    return provider.key_required and not provider.api_key(settings)


def _base_url(settings: Settings, provider: Provider) -> str:
    return provider.configured_base_url(settings) or provider.default_base_url or ""


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
    from eval_harness.judges.client.session import JudgeUnavailable, resolve_judge_specs
    config: JudgeSettings = settings.judges
    try:
        with _quiet_judge_notices():
            judge1, judge2, _ = resolve_judge_specs(settings)
        return {"judge1": judge1, "judge2": judge2}
    except JudgeUnavailable:
        return {slot: spec if spec.startswith(f"{LOCAL}:")
                or not _needs_key(settings, provider_named(spec.split(":")[0]))
                else None for slot, spec in (("judge1", config.judge1), ("judge2", config.judge2))}


def check_judge_key(settings: Settings, slot: str, effective: str | None) -> Check:
    """Whether the key a judge needs is set (never any part of its value) and priced."""
    spec = getattr(settings.judges, slot)
    name, model = spec.split(":", 1)
    if name == LOCAL:
        return Check(OK, slot, f"{spec}: no key needed")
    provider = provider_named(name)
    variable = provider.key_variable
    if not _needs_key(settings, provider):
        # a server that takes any key (or none) is said so
        state = "set" if provider.api_key(settings) else "not set (none needed)"
        try:
            PriceTable(settings.judges.prices).require(model, spec)
        except LookupError as exc:
            return Check(FAIL, slot, f"{spec}: {variable} {state}, but {exc}")
        return Check(OK, slot, f"{spec}: {variable} {state}")
    if effective is not None:
        return Check(WARN, slot, f"{spec}: {variable} not set: falls back to {effective}")
    return Check(FAIL, slot, f"{spec}: {variable} not set and judges.fallback_to_local is "
                 f"false: set {variable} or choose a local judge (judges.{slot}: local:lexical)")


def _provider_message(exc: Exception) -> str:
    """The provider's own error message when the body carries one, else the first line."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return first_line(exc)


def _probe_failure(provider: Provider, exc: Exception, where: str, timeout: float,
                   secrets: tuple[str | None, ...]) -> Check:
    """One sanitised line for a failed probe: rejected keys FAIL, busy providers warn."""
    from eval_harness.judges.client.retry import sanitize  # see the imports
    message = sanitize(_provider_message(exc), secrets)[:160]
    status = getattr(exc, "status_code", None)
    name = provider.name
    if isinstance(status, int):
        variable = provider.key_variable
        seen = f"HTTP {status} from {where}: {message}"
        if status in (401, 403):
            return Check(FAIL, name, f"{variable} was rejected ({seen}): check the key")
        if status == 404:
            return Check(WARN, name, f"{seen}: the server offers no models list; "
                         "chat requests were not tried")
        if status == 429 or status >= 500:
            return Check(WARN, name, f"{seen}: reachable but busy or failing; try later")
        return Check(FAIL, name, seen)
    kind = getattr(provider.classify(exc), "kind", None)
    if kind == "timeout":
        return Check(FAIL, name, f"no answer from {where} within {timeout:g} s")
    if kind == "connection":
        return Check(FAIL, name, f"cannot connect to {where}: {message}")
    return Check(FAIL, name, f"{where}: {type(exc).__name__}: {message}")


def check_provider_reachable(settings: Settings, name: str,
                             timeout: float = PROBE_TIMEOUT_SECONDS) -> Check:
    provider = provider_named(name)
    key = provider.api_key(settings)
    base_url = _base_url(settings, provider)
    where = redact_url(base_url)
    secrets = (key,)
    started = time.monotonic()
    try:
        asyncio.run(provider.probe(api_key=key or "", base_url=base_url, timeout=timeout))
    except Exception as exc:  # every SDK or transport error becomes one line
        return _probe_failure(provider, exc, where, timeout, secrets)
    return Check(OK, name, f"reachable at {where}, key accepted "
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
