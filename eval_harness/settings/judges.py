"""The ``judges:`` section of config.yaml as a typed :class:`JudgeSettings`.

:func:`parse_judge_settings` is called by :func:`eval_harness.settings.load_settings` with the
section and the environment mapping it was given (this module never reads ``os.environ``).
Environment overrides: ``EVAL_HARNESS_JUDGE1``, ``EVAL_HARNESS_JUDGE2`` (judge specs) and
``EVAL_HARNESS_JUDGE_BUDGET_USD`` (a number, or ``none`` for no limit).

A judge is named ``provider:model``: ``openai:<model>`` (OpenAI or any server speaking its
Chat Completions API, via ``OPENAI_BASE_URL``), ``anthropic:<model>`` (the chat providers of
:func:`chat_providers`; one module each in :mod:`eval_harness.judges.client.providers`, or a
plugin's module declared as an entry point) or ``local:lexical`` / ``local:embedding``
(offline, free). Any model name is accepted; a paid model needs an entry in ``prices`` when it
is used (checked when the judges are built, see :mod:`eval_harness.judges.client.session`).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    Field,
    PlainValidator,
    Strict,
    field_validator,
    model_validator,
)
from pydantic.dataclasses import dataclass
from pydantic_core import ArgsKwargs, PydanticCustomError

from eval_harness.settings.errors import ConfigError, problem, unknown
from eval_harness.settings.values import (
    SECTION,
    Count,
    Flag,
    Natural,
    NonNegative,
    OrEmpty,
    Positive,
    Share,
    budget_of,
    validated,
)

# The chat providers this project ships, one module each in eval_harness.judges.client.providers.
BUILT_IN_CHAT_PROVIDERS = ("openai", "anthropic")
# A provider from another package: an entry point of this group, NAME = "package.module" (a
# module defining PROVIDER, see eval_harness.judges.client.providers.base).
PROVIDER_ENTRY_POINTS = "eval_harness.chat_providers"
LOCAL = "local"  # the offline judges
LOCAL_JUDGES = ("lexical", "embedding")
DEFAULT_TEMPERATURES = {"relevance": 0.0, "evaluation": 0.0, "grounding": 0.0, "reflexion": 0.7,
                        "generation": 0.7, "critique": 0.0}
DEFAULT_MAX_TOKENS = {"relevance": 100, "evaluation": 500, "grounding": 500, "reflexion": 1000,
                      "generation": 200, "critique": 100}
# The environment variables a provider reads its key and server from (Settings.provider_variables).
PROVIDER_VARIABLE_SUFFIXES = ("_API_KEY", "_BASE_URL")


def plugin_providers() -> dict[str, str]:
    """The chat providers installed packages declare: name -> module."""
    return dict(_declared_on(tuple(sys.path)))


@functools.lru_cache(maxsize=8)
def _declared_on(path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The providers the packages on ``path`` (``sys.path``) declare; read once per path, as
    reading every installed package's entry points takes a while."""
    return tuple((point.name, point.value) for point in entry_points(group=PROVIDER_ENTRY_POINTS)
                 if point.name not in BUILT_IN_CHAT_PROVIDERS and point.name != LOCAL)


def chat_providers() -> tuple[str, ...]:
    """Every chat provider a judge spec may name: the built-in ones, then the plugins'."""
    return (*BUILT_IN_CHAT_PROVIDERS, *sorted(plugin_providers()))


def known_providers() -> tuple[str, ...]:
    """Every name a judge spec may use before the colon."""
    return (*chat_providers(), LOCAL)


@dataclass(frozen=True, config=SECTION)
class Price:
    """``judges.prices.<model>``: USD per million tokens."""

    input: NonNegative                       # per million input tokens
    output: NonNegative                      # per million output tokens
    cached_input: NonNegative | None = None  # None: billed like other input
    batch_discount: Share = 0.5              # the batch API's discount (0.5: half price)

    @model_validator(mode="before")
    @classmethod
    def _input_and_output(cls, data: Any) -> Any:
        if isinstance(data, ArgsKwargs):
            return data
        if not isinstance(data, Mapping):
            raise problem("must be a mapping with input and output.")
        for key in ("input", "output"):
            if key not in data:
                raise problem(f"needs '{key}' (USD per million tokens).")
        return data


@dataclass(frozen=True, config=SECTION)
class RateLimit:
    requests_per_minute: Positive              # requests a minute
    tokens_per_minute: Positive | None = None  # None: only requests are limited


@dataclass(frozen=True, config=SECTION)
class RetrySettings:
    max_retries: Natural = 4                  # attempts = 1 + max_retries
    base_delay_seconds: NonNegative = 1.0     # waits 1, 2, 4, 8 s ...
    jitter: Annotated[float, Strict(), Field(ge=0.0, le=0.99)] = 0.2   # +-20 %
    max_wait_seconds: Positive = 120.0        # a Retry-After above this fails the call instead


@dataclass(frozen=True, config=SECTION)
class BatchSettings:
    poll_interval_seconds: Positive = 30.0   # how often a batch is asked about
    max_wait_seconds: Positive = 86_400.0  # providers finish batches within 24 h


@dataclass(frozen=True, config=SECTION)
class StagedSettings:
    """``judges.staged``: judge 2 scores a seeded random sample of queries, growing it by
    ``step_queries`` from ``first_queries``, until the lower bound of the kappa interval on
    the sample reaches ``agreement.kappa_floor``, with alpha spent over the early looks these
    sizes plan (see :mod:`eval_harness.judges.staging.staged`)."""

    enabled: Flag = False        # `staged: true` switches it on
    seed: Natural = 0            # the order in which queries join the sample
    # the first sample (at least 2: the interval needs 2 queries)
    first_queries: Annotated[int, Strict(), Field(ge=2)] = 20
    step_queries: Count = 20     # queries added per step while the bound is below the floor


@dataclass(frozen=True, config=SECTION)
class RetestSettings:
    """``judges.retest``: each judge re-scores every pair of a seeded sample of ``queries``
    queries ``repeats`` times past the reply cache, to measure how often it disagrees with
    itself (see :mod:`eval_harness.judges.retest`). Off unless ``enabled`` (or
    ``eval-harness judge --retest``)."""

    enabled: Flag = False        # a retest: section given switches it on
    # queries sampled (every judged pair of each is re-scored)
    queries: Annotated[int, Strict(), Field(ge=2)] = 20
    repeats: Count = 3           # extra scorings of each pair, past the cache
    seed: Natural = 0            # which queries are sampled
    # its own budget line per dataset and UTC day, apart from judges.budget_usd; None = no
    # limit (the sample's size bounds it: judge --dry-run prices it)
    budget_usd: Annotated[float | None, PlainValidator(budget_of)] = None


@dataclass(frozen=True, config=SECTION)
class AnchorSettings:
    """``judges.anchors``: a seeded sample of ``pairs`` judged pairs of the dataset, frozen
    with each judge's score and label the first time, and re-judged past the cache by every
    later run to measure drift (see :mod:`eval_harness.judges.anchors`). Off when the
    section is absent."""

    enabled: Flag = False        # an anchors: section given switches it on
    # anchors of the dataset (all judged pairs when fewer)
    pairs: Annotated[int, Strict(), Field(ge=2)] = 100
    seed: Natural = 0            # which pairs are chosen
    # its own budget line per dataset and UTC day, apart from judges.budget_usd; None = no
    # limit (the set's size bounds it: judge --dry-run prices it)
    budget_usd: Annotated[float | None, PlainValidator(budget_of)] = None


@dataclass(frozen=True, config=SECTION)
class DriftSettings:
    """``judges.drift``: when the ``judge_drift`` check fails. It fails when the lower
    confidence bound of a judge's label flip rate on the anchors exceeds ``max_flip_rate``,
    or its agreement with the human verdicts on anchors falls below
    ``min_human_agreement`` (only when some anchor has a human verdict); ``blocking: false``
    makes a failure a warning."""

    max_flip_rate: Share = 0.05        # fails above it (the flip rate's lower bound)
    min_human_agreement: Share = 0.7   # fails below it (agreement with people)
    blocking: Flag = True              # false: a failure only warns
    # of the flip rate's Wilson interval and the shift's t interval
    confidence: Annotated[float, Strict(), Field(ge=0.5, le=0.999)] = 0.95


Cosine = Annotated[float, Strict(), Field(ge=-1.0, le=1.0)]


@dataclass(frozen=True, config=SECTION)
class LocalJudgeSettings:
    embedding_floor: Cosine = 0.3     # local:embedding: cosine at or below -> 0.0
    embedding_ceiling: Cosine = 0.9   # cosine at or above -> 1.0 (linear between)
    lexical_support: Cosine = 0.66    # local:lexical grounding: a claim's best-span support
    trigram_support: Cosine = 0.5     # cosine of character-trigram vectors for local:embedding

    @model_validator(mode="after")
    def _floor_below_ceiling(self) -> LocalJudgeSettings:
        if self.embedding_floor >= self.embedding_ceiling:
            raise problem("must be below 'embedding_ceiling'.", key="embedding_floor")
        return self


DEFAULT_RATE_LIMITS = {"openai": RateLimit(500, 30_000), "anthropic": RateLimit(50, 50_000)}
DEFAULT_PRICES = {
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "claude-haiku-4-5": Price(1.00, 5.00, 0.10),
    "claude-sonnet-4-5": Price(3.00, 15.00, 0.30),
}
DEFAULT_SEND_TEMPERATURE = {"openai": True, "anthropic": False}


def _spec_problem(spec: Any) -> str | None:
    """What is wrong with a judge spec (None: ``provider:model`` with a known provider)."""
    if not isinstance(spec, str) or ":" not in spec:
        return ("must look like provider:model (openai:gpt-4o, anthropic:claude-haiku-4-5, "
                f"local:lexical), got {spec!r}.")
    provider, model = (part.strip() for part in spec.split(":", 1))
    if provider not in known_providers():
        return f"names an unknown provider '{provider}' (known: {', '.join(known_providers())})."
    if not model:
        return f"names no model after '{provider}:'."
    if provider == LOCAL and model not in LOCAL_JUDGES:
        return f"names an unknown local judge '{model}' (known: {', '.join(LOCAL_JUDGES)})."
    return None


def validate_judge_spec(spec: Any, where: str) -> str:
    """``provider:model`` with a known provider and a non-empty model (any name for paid)."""
    found = _spec_problem(spec)
    if found is not None:
        raise ConfigError(f"'{where}' {found}")
    provider, model = (part.strip() for part in str(spec).split(":", 1))
    return f"{provider}:{model}"


def _judge_spec(spec: Any) -> str:
    found = _spec_problem(spec)
    if found is not None:
        raise problem(found)
    provider, model = (part.strip() for part in str(spec).split(":", 1))
    return f"{provider}:{model}"


def _over(defaults: Mapping[str, Any],
          known: Callable[[], tuple[str, ...]] | None = None) -> Callable[[Any], Any]:
    """A per-name mapping of the file over ``defaults`` (its names restricted to ``known()``,
    the defaults' own names when None)."""
    def merge(given: Any) -> Any:
        if given is None:
            given = {}
        if not isinstance(given, Mapping):
            raise problem("must be a mapping.")
        names = tuple(defaults) if known is None else known()
        extra = [str(name) for name in given if name not in names]
        if extra:
            raise unknown(extra, names)
        return {**defaults, **given}
    return merge


def _rate_limits(given: Any) -> Any:
    """``judges.rate_limits``: per chat provider, each entry over that provider's defaults."""
    merged = _over(DEFAULT_RATE_LIMITS, chat_providers)(given)
    limits: dict[str, Any] = {}
    for name, entry in merged.items():
        default = DEFAULT_RATE_LIMITS.get(name)
        if isinstance(entry, Mapping):
            if default is None and "requests_per_minute" not in entry:
                raise problem("needs 'requests_per_minute'.", key=name)
            entry = {**(dataclasses.asdict(default) if default else {}), **entry}
        limits[name] = entry
    return limits


def _enabled_when_given(default: bool) -> Callable[[Any], Any]:
    """``staged: true`` / ``retest: true`` keeps the other defaults; a section given without
    ``enabled`` is ``default``."""
    def read(given: Any) -> Any:
        if given is None or isinstance(given, bool):
            return {"enabled": bool(given)}
        if isinstance(given, Mapping) and "enabled" not in given:
            return {**given, "enabled": default}
        return given
    return read


@dataclass(frozen=True, config=SECTION)
class JudgeSettings:
    # provider:model of the first judge (EVAL_HARNESS_JUDGE1 overrides it)
    judge1: Annotated[str, PlainValidator(_judge_spec)] = "openai:gpt-4o"
    # ... and of the second, another provider (EVAL_HARNESS_JUDGE2)
    judge2: Annotated[str, PlainValidator(_judge_spec)] = "anthropic:claude-haiku-4-5"
    fallback_to_local: Flag = True   # a missing API key swaps in a local judge (said once)
    concurrency: Count = 8           # requests in flight per provider
    timeout_seconds: Positive = 60.0  # per HTTP request (the SDKs' own timeout)
    # per dataset and UTC day, every process judging it together; None = no limit
    budget_usd: Annotated[float | None, PlainValidator(budget_of)] = 10.0
    hybrid_top_k: Natural = 5        # judged pairs: expected_docs + top k of hybrid search
    # a labelled dataset's pairs also take the grid pool (every calibration grid weight's
    # top 5), so calibration finds no unlabelled document there (Judged@5 = 1)
    grid_pool: Flag = False
    # per operation (relevance, evaluation, grounding, reflexion, generation, critique): the
    # sampling temperature
    temperatures: Annotated[
        Mapping[str, Annotated[float, Strict(), Field(ge=0.0, le=2.0)]],
        BeforeValidator(_over(DEFAULT_TEMPERATURES))] = dataclasses.field(
        default_factory=lambda: dict(DEFAULT_TEMPERATURES))
    # per operation: the reply's token limit
    max_tokens: Annotated[Mapping[str, Count], BeforeValidator(_over(DEFAULT_MAX_TOKENS))] = \
        dataclasses.field(default_factory=lambda: dict(DEFAULT_MAX_TOKENS))
    # per chat provider: the requests (and tokens) a minute the account allows
    rate_limits: Annotated[Mapping[str, RateLimit], BeforeValidator(_rate_limits)] = \
        dataclasses.field(default_factory=lambda: dict(DEFAULT_RATE_LIMITS))
    # the models' prices; a prices: section replaces the defaults as a whole
    prices: Mapping[str, Price] = dataclasses.field(default_factory=lambda: dict(DEFAULT_PRICES))
    # Whether the temperature is sent. The Anthropic SDK 2.x speaks API version 2026-10-21,
    # which rejects sampling parameters (400), so it is off there by default.
    send_temperature: Annotated[Mapping[str, Flag], BeforeValidator(_over(
        DEFAULT_SEND_TEMPERATURE, chat_providers))] = dataclasses.field(
        default_factory=lambda: dict(DEFAULT_SEND_TEMPERATURE))
    retry: Annotated[RetrySettings, OrEmpty] = RetrySettings()   # retries of a failed call
    batch: Annotated[BatchSettings, OrEmpty] = BatchSettings()   # the providers' batch APIs
    local: Annotated[LocalJudgeSettings, OrEmpty] = LocalJudgeSettings()   # the offline judges
    staged: Annotated[StagedSettings, BeforeValidator(_enabled_when_given(False))] = \
        StagedSettings()
    retest: Annotated[RetestSettings, BeforeValidator(_enabled_when_given(True))] = \
        RetestSettings()
    anchors: Annotated[AnchorSettings, BeforeValidator(_enabled_when_given(True))] = \
        AnchorSettings()
    drift: Annotated[DriftSettings, OrEmpty] = DriftSettings()
    shards: Count = 1                # static partitions of the Dagster judging asset
    # at most this many judge shard steps of one provider pool at once, over every Dagster run
    # (the pool's limit in the dagster.yaml the harness writes); None = no limit
    shards_at_once: Count | None = None

    @field_validator("prices", mode="before")
    @classmethod
    def _prices_or_defaults(cls, given: Any) -> Any:
        return dict(DEFAULT_PRICES) if given is None or given == {} else given


def with_environment(section: Any, env: Mapping[str, str]) -> Any:
    """The ``judges:`` section with the environment's overrides (module docstring) in it."""
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        return section  # refused by JudgeSettings
    section = dict(section)
    for variable, key in (("EVAL_HARNESS_JUDGE1", "judge1"), ("EVAL_HARNESS_JUDGE2", "judge2")):
        if env.get(variable):
            section[key] = env[variable]
    budget = env.get("EVAL_HARNESS_JUDGE_BUDGET_USD")
    if budget is not None:
        try:
            section["budget_usd"] = budget_of(budget)
        except PydanticCustomError as exc:
            raise ConfigError(f"'EVAL_HARNESS_JUDGE_BUDGET_USD' "
                              f"{(exc.context or {})['rest']}") from None
    return section


def parse_judge_settings(section: Mapping[str, Any], environ: Mapping[str, str] | None = None,
                         *, source: str | None = "config.yaml") -> JudgeSettings:
    """The ``judges:`` section (may be empty) with environment overrides applied.

    ``source`` is the file the section was read from; every error message starts with it
    (None: no prefix, for a caller that adds the file itself).
    """
    try:
        return validated(JudgeSettings, with_environment(section, environ or {}), ("judges",))
    except ConfigError as exc:
        if source is None:
            raise
        raise ConfigError(f"{source}: {exc}") from None


def provider_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The environment's ``*_API_KEY`` / ``*_BASE_URL`` variables that are set: a provider
    reads its key and server there by the variable it declares."""
    return {name: value for name, value in env.items()
            if name.endswith(PROVIDER_VARIABLE_SUFFIXES) and value}
