"""The ``judges:`` section of config.yaml as a typed :class:`JudgeSettings`.

:func:`parse_judge_settings` is called by :func:`eval_harness.settings.load_settings` with the
section and the environment mapping it was given (this module never reads ``os.environ``).
Environment overrides: ``EVAL_HARNESS_JUDGE1``, ``EVAL_HARNESS_JUDGE2`` (judge specs) and
``EVAL_HARNESS_JUDGE_BUDGET_USD`` (a number, or ``none`` for no limit).

A judge is named ``provider:model``: ``openai:<model>`` (OpenAI or any server speaking its
Chat Completions API, via ``OPENAI_BASE_URL``), ``anthropic:<model>`` (the chat providers,
:data:`CHAT_PROVIDERS`; one module each in :mod:`eval_harness.judges.client.providers`) or
``local:lexical`` / ``local:embedding`` (offline, free). Any model name is accepted; a paid model
needs an entry in ``prices`` when it is used (checked when the judges are built, see
:mod:`eval_harness.judges.client.session`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from eval_harness.settings.errors import ConfigError, reject_unknown_keys

# The chat providers a judge spec may name before the colon: each is served by the module of
# the same name in eval_harness.judges.client.providers (its registry; settings stays below
# judges and knows the names only). A provider registered at run time is added here.
CHAT_PROVIDERS: list[str] = ["openai", "anthropic"]
LOCAL = "local"  # the offline judges
LOCAL_JUDGES = ("lexical", "embedding")
DEFAULT_TEMPERATURES = {"relevance": 0.0, "evaluation": 0.0, "grounding": 0.0, "reflexion": 0.7}
DEFAULT_MAX_TOKENS = {"relevance": 100, "evaluation": 500, "grounding": 500, "reflexion": 1000}
# The environment variables a provider reads its key and server from (see provider_variables).
PROVIDER_VARIABLE_SUFFIXES = ("_API_KEY", "_BASE_URL")


def add_chat_provider(name: str) -> None:
    """Accept ``name:<model>`` judge specs (a provider registered at run time)."""
    if name not in CHAT_PROVIDERS:
        CHAT_PROVIDERS.append(name)


def remove_chat_provider(name: str) -> None:
    """Refuse ``name:<model>`` specs again (a provider registered at run time, forgotten)."""
    if name in CHAT_PROVIDERS:
        CHAT_PROVIDERS.remove(name)


def known_providers() -> tuple[str, ...]:
    """Every name a judge spec may use before the colon."""
    return (*CHAT_PROVIDERS, LOCAL)


@dataclass(frozen=True)
class Price:
    """USD per million tokens; ``batch_discount`` is the share taken off in batch mode."""

    input: float
    output: float
    cached_input: float | None = None  # None: billed like other input
    batch_discount: float = 0.5


@dataclass(frozen=True)
class RateLimit:
    requests_per_minute: float
    tokens_per_minute: float | None = None  # None: only requests are limited


@dataclass(frozen=True)
class RetrySettings:
    max_retries: int = 4             # attempts = 1 + max_retries
    base_delay_seconds: float = 1.0  # waits 1, 2, 4, 8 s ...
    jitter: float = 0.2              # +-20 %
    max_wait_seconds: float = 120.0  # a Retry-After above this fails the call instead


@dataclass(frozen=True)
class BatchSettings:
    poll_interval_seconds: float = 30.0
    max_wait_seconds: float = 86_400.0  # providers finish batches within 24 h


@dataclass(frozen=True)
class StagedSettings:
    """``judges.staged``: judge 2 scores a seeded random sample of queries, growing it by
    ``step_queries`` from ``first_queries``, until the lower bound of the kappa interval on
    the sample reaches ``agreement.kappa_floor``, with alpha spent over the early looks these
    sizes plan (see :mod:`eval_harness.judges.dual.staged`)."""

    enabled: bool = False
    seed: int = 0                # the order in which queries join the sample
    first_queries: int = 20      # the first sample (at least 2: the interval needs 2 queries)
    step_queries: int = 20       # queries added per step while the bound is below the floor


@dataclass(frozen=True)
class RetestSettings:
    """``judges.retest``: each judge re-scores every pair of a seeded sample of ``queries``
    queries ``repeats`` times past the reply cache, to measure how often it disagrees with
    itself (see :mod:`eval_harness.judges.dual.retest`). Off unless ``enabled`` (or
    ``eval-harness judge --retest``)."""

    enabled: bool = False
    queries: int = 20            # queries sampled (every judged pair of each is re-scored)
    repeats: int = 3             # extra scorings of each pair, past the cache
    seed: int = 0                # which queries are sampled
    # its own budget line per run, apart from judges.budget_usd; None = no limit (the
    # sample's size bounds it: judge --dry-run prices it)
    budget_usd: float | None = None


@dataclass(frozen=True)
class LocalJudgeSettings:
    embedding_floor: float = 0.3     # local:embedding: cosine at or below -> 0.0
    embedding_ceiling: float = 0.9   # cosine at or above -> 1.0 (linear between)
    lexical_support: float = 0.66    # local:lexical grounding: a claim's best-span support
    trigram_support: float = 0.5     # cosine of character-trigram vectors for local:embedding


def _frozen(mapping: Mapping) -> Mapping:
    return MappingProxyType(dict(mapping))


DEFAULT_RATE_LIMITS = {"openai": RateLimit(500, 30_000), "anthropic": RateLimit(50, 50_000)}
DEFAULT_PRICES = {
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "claude-haiku-4-5": Price(1.00, 5.00, 0.10),
    "claude-sonnet-4-5": Price(3.00, 15.00, 0.30),
}


@dataclass(frozen=True)
class AnchorSettings:
    """``judges.anchors``: a seeded sample of ``pairs`` judged pairs of the dataset, frozen
    with each judge's score and label the first time, and re-judged past the cache by every
    later run to measure drift (see :mod:`eval_harness.judges.dual.anchors`). Off when the
    section is absent."""

    enabled: bool = False
    pairs: int = 100             # anchors of the dataset (all judged pairs when fewer)
    seed: int = 0                # which pairs are chosen
    # its own budget line per run, apart from judges.budget_usd; None = no limit (the set's
    # size bounds it: judge --dry-run prices it)
    budget_usd: float | None = None


@dataclass(frozen=True)
class DriftSettings:
    """``judges.drift``: when the ``judge_drift`` check fails. It fails when the lower
    confidence bound of a judge's label flip rate on the anchors exceeds ``max_flip_rate``,
    or its agreement with the human verdicts on anchors falls below
    ``min_human_agreement`` (only when some anchor has a human verdict); ``blocking: false``
    makes a failure a warning."""

    max_flip_rate: float = 0.05
    min_human_agreement: float = 0.7
    blocking: bool = True
    confidence: float = 0.95     # of the flip rate's Wilson interval and the shift's t interval


@dataclass(frozen=True)
class JudgeSettings:
    judge1: str = "openai:gpt-4o"
    judge2: str = "anthropic:claude-haiku-4-5"
    fallback_to_local: bool = True   # a missing API key swaps in a local judge (said once)
    concurrency: int = 8             # requests in flight per provider
    timeout_seconds: float = 60.0    # per HTTP request (the SDKs' own timeout)
    budget_usd: float | None = 10.0  # per run; None = no limit
    hybrid_top_k: int = 5            # judged pairs: expected_docs + top k of hybrid search
    # a labelled dataset's pairs also take the grid pool (every calibration grid weight's
    # top 5), so calibration finds no unlabelled document there (Judged@5 = 1)
    grid_pool: bool = False
    temperatures: Mapping[str, float] = field(default_factory=lambda: _frozen(DEFAULT_TEMPERATURES))
    max_tokens: Mapping[str, int] = field(default_factory=lambda: _frozen(DEFAULT_MAX_TOKENS))
    rate_limits: Mapping[str, RateLimit] = field(
        default_factory=lambda: _frozen(DEFAULT_RATE_LIMITS))
    prices: Mapping[str, Price] = field(default_factory=lambda: _frozen(DEFAULT_PRICES))
    # Whether the temperature is sent. The Anthropic SDK 2.x speaks API version 2026-10-21,
    # which rejects sampling parameters (400), so it is off there by default.
    send_temperature: Mapping[str, bool] = field(
        default_factory=lambda: _frozen({"openai": True, "anthropic": False}))
    retry: RetrySettings = RetrySettings()
    batch: BatchSettings = BatchSettings()
    local: LocalJudgeSettings = LocalJudgeSettings()
    staged: StagedSettings = StagedSettings()
    retest: RetestSettings = RetestSettings()
    anchors: AnchorSettings = AnchorSettings()
    drift: DriftSettings = DriftSettings()
    shards: int = 1                  # static partitions of the Dagster judging asset
    # The environment's *_API_KEY / *_BASE_URL variables: a provider without typed settings
    # of its own reads its key and server here (eval_harness.judges.client.providers.base).
    provider_variables: Mapping[str, str] = field(default_factory=lambda: _frozen({}),
                                                  repr=False, compare=False)


def _error(message: str) -> Exception:
    # No file name here: parse_judge_settings (or load_settings) puts the file read in front.
    return ConfigError(message)


def _mapping(section: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = section.get(key) or {}
    if not isinstance(value, Mapping):
        raise _error(f"'{where}.{key}' must be a mapping.")
    return value


def _reject_unknown(section: Mapping[str, Any], where: str, known: tuple[str, ...]) -> None:
    reject_unknown_keys(section, where, known)  # a typo would otherwise keep a default


def _number(value: Any, where: str, *, low: float = 0.0, high: float = math.inf,
            low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise _error(f"'{where}' must be a number, got {value!r}.")
    if value < low or value > high or (low_open and value == low):
        bounds = f"{'>' if low_open else '>='} {low:g}" + ("" if high == math.inf
                                                           else f" and <= {high:g}")
        raise _error(f"'{where}' must be {bounds}, got {value!r}.")
    return float(value)


def _integer(value: Any, where: str, *, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _error(f"'{where}' must be an integer >= {low}, got {value!r}.")
    return value


def validate_judge_spec(spec: Any, where: str) -> str:
    """``provider:model`` with a known provider and a non-empty model (any name for paid)."""
    if not isinstance(spec, str) or ":" not in spec:
        raise _error(f"'{where}' must look like provider:model (openai:gpt-4o, "
                     f"anthropic:claude-haiku-4-5, local:lexical), got {spec!r}.")
    provider, model = (part.strip() for part in spec.split(":", 1))
    if provider not in known_providers():
        raise _error(f"'{where}' names an unknown provider '{provider}' "
                     f"(known: {', '.join(known_providers())}).")
    if not model:
        raise _error(f"'{where}' names no model after '{provider}:'.")
    if provider == LOCAL and model not in LOCAL_JUDGES:
        raise _error(f"'{where}': unknown local judge '{model}' "
                     f"(known: {', '.join(LOCAL_JUDGES)}).")
    return f"{provider}:{model}"


def _budget(value: Any, where: str) -> float | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null", "")):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise _error(f"'{where}' must be a number of USD or none, got {value!r}.") from None
    return _number(value, where)


def _per_operation(section: Mapping[str, Any], key: str, defaults: Mapping[str, Any],
                   convert) -> Mapping[str, Any]:
    given = _mapping(section, key, "judges")
    _reject_unknown(given, f"judges.{key}", tuple(defaults))
    return _frozen({op: convert(given.get(op, default), f"judges.{key}.{op}")
                    for op, default in defaults.items()})


def _rate_limits(section: Mapping[str, Any]) -> Mapping[str, RateLimit]:
    given = _mapping(section, "rate_limits", "judges")
    _reject_unknown(given, "judges.rate_limits", tuple(CHAT_PROVIDERS))
    limits = dict(DEFAULT_RATE_LIMITS)
    for provider, entry in given.items():
        where = f"judges.rate_limits.{provider}"
        if not isinstance(entry, Mapping):
            raise _error(f"'{where}' must be a mapping.")
        _reject_unknown(entry, where, ("requests_per_minute", "tokens_per_minute"))
        default = DEFAULT_RATE_LIMITS.get(provider)
        if default is None and "requests_per_minute" not in entry:
            raise _error(f"'{where}' needs 'requests_per_minute'.")
        default = default or RateLimit(0.0)
        tpm = entry.get("tokens_per_minute", default.tokens_per_minute)
        limits[provider] = RateLimit(
            _number(entry.get("requests_per_minute", default.requests_per_minute),
                    f"{where}.requests_per_minute", low=0.0, low_open=True),
            None if tpm is None else _number(tpm, f"{where}.tokens_per_minute",
                                             low=0.0, low_open=True))
    return _frozen(limits)


def _prices(section: Mapping[str, Any]) -> Mapping[str, Price]:
    given = _mapping(section, "prices", "judges")
    if not given:
        return _frozen(DEFAULT_PRICES)
    prices = {}
    for model, entry in given.items():
        where = f"judges.prices.{model}"
        if not isinstance(entry, Mapping):
            raise _error(f"'{where}' must be a mapping with input and output.")
        _reject_unknown(entry, where, ("input", "output", "cached_input", "batch_discount"))
        for key in ("input", "output"):
            if key not in entry:
                raise _error(f"'{where}' needs '{key}' (USD per million tokens).")
        cached = entry.get("cached_input")
        prices[str(model)] = Price(
            _number(entry["input"], f"{where}.input"), _number(entry["output"], f"{where}.output"),
            None if cached is None else _number(cached, f"{where}.cached_input"),
            _number(entry.get("batch_discount", 0.5), f"{where}.batch_discount", high=1.0))
    return _frozen(prices)


def _send_temperature(section: Mapping[str, Any]) -> Mapping[str, bool]:
    given = _mapping(section, "send_temperature", "judges")
    _reject_unknown(given, "judges.send_temperature", tuple(CHAT_PROVIDERS))
    result = dict(JudgeSettings().send_temperature)
    for provider, value in given.items():
        if not isinstance(value, bool):
            raise _error(f"'judges.send_temperature.{provider}' must be true or false.")
        result[provider] = value
    return _frozen(result)


def _retry(section: Mapping[str, Any]) -> RetrySettings:
    given = _mapping(section, "retry", "judges")
    d = RetrySettings()
    _reject_unknown(given, "judges.retry", tuple(RetrySettings.__dataclass_fields__))
    return RetrySettings(
        _integer(given.get("max_retries", d.max_retries), "judges.retry.max_retries", low=0),
        _number(given.get("base_delay_seconds", d.base_delay_seconds),
                "judges.retry.base_delay_seconds"),
        _number(given.get("jitter", d.jitter), "judges.retry.jitter", high=0.99),
        _number(given.get("max_wait_seconds", d.max_wait_seconds), "judges.retry.max_wait_seconds",
                low=0.0, low_open=True))


def _batch(section: Mapping[str, Any]) -> BatchSettings:
    given = _mapping(section, "batch", "judges")
    d = BatchSettings()
    _reject_unknown(given, "judges.batch", tuple(BatchSettings.__dataclass_fields__))
    return BatchSettings(
        _number(given.get("poll_interval_seconds", d.poll_interval_seconds),
                "judges.batch.poll_interval_seconds", low=0.0, low_open=True),
        _number(given.get("max_wait_seconds", d.max_wait_seconds),
                "judges.batch.max_wait_seconds", low=0.0, low_open=True))


def _local(section: Mapping[str, Any]) -> LocalJudgeSettings:
    given = _mapping(section, "local", "judges")
    d = LocalJudgeSettings()
    _reject_unknown(given, "judges.local", tuple(LocalJudgeSettings.__dataclass_fields__))
    values = {key: _number(given.get(key, getattr(d, key)), f"judges.local.{key}", low=-1.0,
                           high=1.0) for key in LocalJudgeSettings.__dataclass_fields__}
    if values["embedding_floor"] >= values["embedding_ceiling"]:
        raise _error("'judges.local.embedding_floor' must be below 'embedding_ceiling'.")
    return LocalJudgeSettings(**values)


def _staged(section: Mapping[str, Any]) -> StagedSettings:
    given = section.get("staged")
    if given is None or isinstance(given, bool):  # `staged: true` keeps the other defaults
        return StagedSettings(enabled=bool(given))
    given = _mapping(section, "staged", "judges")
    d = StagedSettings()
    _reject_unknown(given, "judges.staged", tuple(StagedSettings.__dataclass_fields__))
    enabled = given.get("enabled", d.enabled)
    if not isinstance(enabled, bool):
        raise _error("'judges.staged.enabled' must be true or false.")
    return StagedSettings(
        enabled, _integer(given.get("seed", d.seed), "judges.staged.seed", low=0),
        _integer(given.get("first_queries", d.first_queries), "judges.staged.first_queries",
                 low=2),
        _integer(given.get("step_queries", d.step_queries), "judges.staged.step_queries",
                 low=1))


def _retest(section: Mapping[str, Any]) -> RetestSettings:
    given = section.get("retest")
    if given is None or isinstance(given, bool):  # `retest: true` keeps the other defaults
        return RetestSettings(enabled=bool(given))
    given = _mapping(section, "retest", "judges")
    d = RetestSettings()
    _reject_unknown(given, "judges.retest", tuple(RetestSettings.__dataclass_fields__))
    # a section given without `enabled` is meant to be used
    enabled = given.get("enabled", True)
    if not isinstance(enabled, bool):
        raise _error("'judges.retest.enabled' must be true or false.")
    return RetestSettings(
        enabled, _integer(given.get("queries", d.queries), "judges.retest.queries", low=2),
        _integer(given.get("repeats", d.repeats), "judges.retest.repeats", low=1),
        _integer(given.get("seed", d.seed), "judges.retest.seed", low=0),
        _budget(given.get("budget_usd", d.budget_usd), "judges.retest.budget_usd"))


def _anchors(section: Mapping[str, Any]) -> AnchorSettings:
    """``judges.anchors`` of the ``judges:`` section."""

    given = section.get("anchors")
    if given is None or isinstance(given, bool):  # `anchors: true` keeps the other defaults
        return AnchorSettings(enabled=bool(given))
    given = _mapping(section, "anchors", "judges")
    d = AnchorSettings()
    _reject_unknown(given, "judges.anchors", tuple(AnchorSettings.__dataclass_fields__))
    enabled = given.get("enabled", True)  # a section given is meant to be used
    if not isinstance(enabled, bool):
        raise _error("'judges.anchors.enabled' must be true or false.")
    return AnchorSettings(
        enabled, _integer(given.get("pairs", d.pairs), "judges.anchors.pairs", low=2),
        _integer(given.get("seed", d.seed), "judges.anchors.seed", low=0),
        _budget(given.get("budget_usd", d.budget_usd), "judges.anchors.budget_usd"))


def _drift(section: Mapping[str, Any]) -> DriftSettings:
    """``judges.drift`` of the ``judges:`` section."""

    given = _mapping(section, "drift", "judges")
    d = DriftSettings()
    _reject_unknown(given, "judges.drift", tuple(DriftSettings.__dataclass_fields__))
    blocking = given.get("blocking", d.blocking)
    if not isinstance(blocking, bool):
        raise _error(f"'judges.drift.blocking' must be true or false, got {blocking!r}.")
    return DriftSettings(
        _number(given.get("max_flip_rate", d.max_flip_rate), "judges.drift.max_flip_rate",
                high=1.0),
        _number(given.get("min_human_agreement", d.min_human_agreement),
                "judges.drift.min_human_agreement", high=1.0),
        blocking,
        _number(given.get("confidence", d.confidence), "judges.drift.confidence", low=0.5,
                high=0.999))


JUDGES_KEYS = ("judge1", "judge2", "fallback_to_local", "concurrency", "timeout_seconds",
               "budget_usd", "hybrid_top_k", "grid_pool", "temperatures", "max_tokens",
               "rate_limits",
               "prices", "send_temperature", "retry", "batch", "local", "staged", "retest",
               "anchors", "drift", "shards")


def parse_judge_settings(section: Mapping[str, Any], environ: Mapping[str, str] | None = None,
                         *, source: str | None = "config.yaml") -> JudgeSettings:
    """The ``judges:`` section (may be empty) with environment overrides applied.

    ``source`` is the file the section was read from; every error message starts with it
    (None: no prefix, for a caller that adds the file itself, as ``load_settings`` does).
    """
    try:
        return _judge_settings(section, environ or {})
    except ConfigError as exc:
        if source is None:
            raise
        raise ConfigError(f"{source}: {exc}") from None


def _judge_settings(section: Mapping[str, Any], env: Mapping[str, str]) -> JudgeSettings:
    d = JudgeSettings()
    _reject_unknown(section, "judges", JUDGES_KEYS)
    judge1 = env.get("EVAL_HARNESS_JUDGE1") or section.get("judge1", d.judge1)
    judge2 = env.get("EVAL_HARNESS_JUDGE2") or section.get("judge2", d.judge2)
    fallback = section.get("fallback_to_local", d.fallback_to_local)
    if not isinstance(fallback, bool):
        raise _error("'judges.fallback_to_local' must be true or false.")
    grid_pool = section.get("grid_pool", d.grid_pool)
    if not isinstance(grid_pool, bool):
        raise _error(f"'judges.grid_pool' must be true or false, got {grid_pool!r}.")
    budget_env = env.get("EVAL_HARNESS_JUDGE_BUDGET_USD")
    budget = (_budget(budget_env, "EVAL_HARNESS_JUDGE_BUDGET_USD") if budget_env is not None
              else _budget(section.get("budget_usd", d.budget_usd), "judges.budget_usd"))
    return JudgeSettings(
        judge1=validate_judge_spec(judge1, "judges.judge1"),
        judge2=validate_judge_spec(judge2, "judges.judge2"),
        fallback_to_local=fallback,
        concurrency=_integer(section.get("concurrency", d.concurrency), "judges.concurrency",
                             low=1),
        timeout_seconds=_number(section.get("timeout_seconds", d.timeout_seconds),
                                "judges.timeout_seconds", low=0.0, low_open=True),
        budget_usd=budget,
        hybrid_top_k=_integer(section.get("hybrid_top_k", d.hybrid_top_k), "judges.hybrid_top_k",
                              low=0),
        grid_pool=grid_pool,
        temperatures=_per_operation(section, "temperatures", DEFAULT_TEMPERATURES,
                                    lambda v, w: _number(v, w, high=2.0)),
        max_tokens=_per_operation(section, "max_tokens", DEFAULT_MAX_TOKENS,
                                  lambda v, w: _integer(v, w, low=1)),
        rate_limits=_rate_limits(section),
        prices=_prices(section),
        send_temperature=_send_temperature(section),
        retry=_retry(section),
        batch=_batch(section),
        local=_local(section),
        staged=_staged(section),
        retest=_retest(section),
        anchors=_anchors(section),
        drift=_drift(section),
        shards=_integer(section.get("shards", d.shards), "judges.shards", low=1),
        provider_variables=_frozen({name: value for name, value in env.items()
                                    if name.endswith(PROVIDER_VARIABLE_SUFFIXES) and value}),
    )
