"""Typed settings: ``config.yaml`` + environment -> :class:`Settings`, passed down explicitly.

This is the only module that reads the environment; everything else receives a ``Settings``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any, Mapping, Sequence

from eval_harness.settings.errors import ConfigError, reject_unknown_keys
from eval_harness.settings.file import (DEFAULT_CONFIG_NAME, locate_config,
                                      read_config)
from eval_harness.settings.datasets import DatasetConfig, DatasetConfigError, parse_datasets
from eval_harness.settings.judges import JudgeSettings, parse_judge_settings

TEXT_SEARCH_LANGUAGES_HINT = "english, german, simple (or any Postgres text-search configuration)"


# Every key config.yaml may hold, section by section: any other key is an error (a typo must
# not silently keep a default). Sections parsed from a dataclass list its fields instead.
TOP_LEVEL_KEYS = ("store", "default_dataset", "datasets", "embedder", "hybrid_search",
                  "agreement", "calibration", "history", "quality_gates", "judges", "dagster")
STORE_KEYS = ("embedded_pgdata", "schema", "demo_rag_schema", "demo_rag_source")
DEMO_RAG_SOURCE = "datasets/scifact"  # store.demo_rag_source's default
DEFAULT_SCHEMA = "eval_harness"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
EMBEDDER_KEYS = ("provider", "model")
HYBRID_SEARCH_KEYS = ("semantic", "keyword", "candidate_depth")
HISTORY_KEYS = ("duckdb_path",)
DAGSTER_KEYS = ("home", "nightly")
NIGHTLY_KEYS = ("cron", "timezone")


@dataclass(frozen=True)
class HybridWeights:
    semantic: float = 0.7
    keyword: float = 0.3
    candidate_depth: int = 50


DISAGREEMENT_RULES = ("exclude", "judge1", "mean")


@dataclass(frozen=True)
class AgreementSettings:
    """The ``agreement:`` section: the judge-agreement gate and the review queue."""

    kappa_floor: float = 0.70             # the gate: lower bound of pooled kappa must reach it
    disagreement_threshold: float = 0.4   # |score1 - score2| above it goes to human review
    relevance_threshold: float = 0.5      # a score strictly above it is "relevant"
    bootstrap_resamples: int = 2000       # resamples of the query bootstrap interval
    confidence: float = 0.95              # level of that interval
    # When the labels come from local stand-ins for configured API judges (their keys are
    # unset), a failed gate warns ("warn") instead of blocking ("block"): agreement of the
    # stand-ins says nothing about the judges that were configured.
    stand_in_judges: str = "warn"
    # The label of a pair one judge calls relevant and the other not, until a person decides
    # it in the review queue: "exclude" (no label), "judge1" (judge 1's), "mean" (mean of
    # both scores > relevance_threshold). See eval_harness.calibration.labels.
    disagreement_rule: str = "exclude"


@dataclass(frozen=True)
class CalibrationSettings:
    """The ``calibration:`` section: the weight grid, statistics and the P@5 verdict bands."""

    grid_start: float = 0.5          # semantic weights start..stop by step; keyword = 1 - semantic
    grid_stop: float = 0.9
    grid_step: float = 0.1           # 0.01 .. 1
    default_weight: float = 0.7      # the uplift is measured against this semantic weight
    rrf_k: int = 60                  # reciprocal rank fusion constant (reference method)
    cv_folds: int = 5                # k of the cross-validated P@5
    seed: int = 0                    # folds, bootstrap and randomization test
    bootstrap_resamples: int = 10_000
    full_success: float = 0.75       # verdict: P@5 >= full_success
    partial_success: float = 0.70    # verdict: partial_success <= P@5 < full_success


@dataclass(frozen=True)
class GateSettings:
    """One gate of ``quality_gates.gates``: when an answer passes, when the check passes."""

    enabled: bool = True
    threshold: float = 0.5        # an answer passes when its score reaches it
    min_pass_rate: float = 0.90   # the check passes when the partition's pass rate reaches it
    blocking: bool = True         # True: ERROR severity, `gate` exits 1; False: a WARN only


# answer_reward's threshold is on the judge's reward scale, -1..+1; the others on 0..1.
DEFAULT_GATES: Mapping[str, GateSettings] = {
    "format_compliance": GateSettings(True, 0.95, 0.90, True),
    "citation_coverage": GateSettings(True, 0.70, 0.90, True),
    "grounding": GateSettings(False, 0.80, 0.90, True),
    "answer_reward": GateSettings(False, 0.30, 0.90, False),
}


@dataclass(frozen=True)
class QualityGateSettings:
    """The ``quality_gates:`` section: the answers relation, partitions and the four gates."""

    answers_relation: str = "answers"           # table or view with the answers contract
    partition_start: date = date(2024, 1, 1)    # first day (UTC) of the daily partitions
    answers_file: Path | None = None            # JSONL the main job imports (None: nothing)
    grounding_source_chars: int = 500           # each source is cut to this length for the judge
    reflexion_threshold: float = 0.3            # reward below it triggers a reflexion
    gates: Mapping[str, GateSettings] = field(default_factory=lambda: dict(DEFAULT_GATES))

    def gate(self, name: str) -> GateSettings:
        try:
            return self.gates[name]
        except KeyError:
            raise ConfigError(f"Unknown quality gate '{name}' "
                              f"(known: {', '.join(DEFAULT_GATES)}).") from None


@dataclass(frozen=True)
class Settings:
    config_path: Path | None
    root: Path
    config_origin: str = "option"  # config_file.ORIGINS: how config_path was found (or not)
    database_url: str | None = None
    embedded_pgdata: Path = Path(".eval-harness/pgdata")
    schema: str = DEFAULT_SCHEMA          # store.schema: every table the harness owns
    # store.demo_rag_schema: embedded store only, the bundled SciFact is laid out in this
    # schema like a RAG system's own store (None: no demo store)
    demo_rag_schema: str | None = None
    # store.demo_rag_source: the BEIR folder (with embeddings.npz) laid out there
    demo_rag_source: Path = Path(DEMO_RAG_SOURCE)
    default_dataset: str = "scifact"
    datasets: Mapping[str, DatasetConfig] = field(default_factory=dict)
    embedder_provider: str = "auto"
    embedder_model: str = "all-MiniLM-L6-v2"
    hybrid: HybridWeights = HybridWeights()
    agreement: AgreementSettings = AgreementSettings()
    calibration: CalibrationSettings = CalibrationSettings()
    quality_gates: QualityGateSettings = QualityGateSettings()
    history_duckdb_path: Path = Path(".eval-harness/history.duckdb")
    dagster_home: Path = Path(".eval-harness/dagster")
    nightly_cron: str = "0 2 * * *"      # dagster.nightly.cron: when nightly_job runs
    nightly_timezone: str = "UTC"        # dagster.nightly.timezone
    # DAGSTER_POSTGRES_URL: Dagster's own storage in Postgres (shared run history)
    dagster_postgres_url: str | None = field(default=None, repr=False)
    openai_api_key: str | None = field(default=None, repr=False)
    openai_base_url: str | None = None
    judges: JudgeSettings = JudgeSettings()
    anthropic_api_key: str | None = field(default=None, repr=False)
    anthropic_base_url: str | None = None

    def dataset(self, name: str) -> DatasetConfig:
        try:
            return self.datasets[name]
        except KeyError:
            known = ", ".join(sorted(self.datasets)) or "none"
            source = (str(self.config_path) if self.config_path
                      else f"{self.root / DEFAULT_CONFIG_NAME} (not found, defaults apply)")
            raise ConfigError(f"{source}: dataset '{name}' is not configured under datasets "
                              f"(configured: {known}).") from None

    def weights_for(self, dataset: str) -> HybridWeights:
        """The hybrid weights of ``dataset``: its calibrated ones, else the global ones."""
        own = self.datasets[dataset].weights if dataset in self.datasets else None
        if own is None:
            return self.hybrid
        return HybridWeights(own.semantic, own.keyword, self.hybrid.candidate_depth)

    def with_overrides(self, **changes: Any) -> "Settings":
        return replace(self, **changes)


def _section(raw: Mapping[str, Any], key: str, known: Sequence[str] | None = None, *,
             where: str = "") -> Mapping[str, Any]:
    """``raw[key]`` as a mapping ({} when absent); with ``known``, unknown keys are refused."""
    dotted = f"{where}.{key}" if where else key
    value = raw.get(key) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"'{dotted}' must be a mapping.")
    if known is not None:
        reject_unknown_keys(value, dotted, known)
    return value


def _number(section: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"'{where}.{key}' must be a number, got {value!r}.")
    return float(value)


def _hybrid(raw: Mapping[str, Any]) -> HybridWeights:
    section = _section(raw, "hybrid_search", HYBRID_SEARCH_KEYS)
    semantic = _number(section, "semantic", 0.7, "hybrid_search")
    keyword = _number(section, "keyword", round(1.0 - semantic, 10), "hybrid_search")
    depth = section.get("candidate_depth", 50)
    if not 0.0 <= semantic <= 1.0 or not 0.0 <= keyword <= 1.0:
        raise ConfigError("hybrid_search weights must lie in [0, 1].")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ConfigError("'hybrid_search.candidate_depth' must be a positive integer.")
    return HybridWeights(semantic, keyword, depth)


def _agreement(raw: Mapping[str, Any]) -> AgreementSettings:
    section = _section(raw, "agreement", tuple(AgreementSettings.__dataclass_fields__))
    defaults = AgreementSettings()
    floor = _number(section, "kappa_floor", defaults.kappa_floor, "agreement")
    disagreement = _number(section, "disagreement_threshold", defaults.disagreement_threshold,
                           "agreement")
    relevance = _number(section, "relevance_threshold", defaults.relevance_threshold,
                        "agreement")
    confidence = _number(section, "confidence", defaults.confidence, "agreement")
    resamples = section.get("bootstrap_resamples", defaults.bootstrap_resamples)
    if not -1.0 <= floor <= 1.0:
        raise ConfigError("'agreement.kappa_floor' must lie in [-1, 1].")
    if not 0.0 <= disagreement < 1.0:
        raise ConfigError("'agreement.disagreement_threshold' must lie in [0, 1).")
    if not 0.0 <= relevance < 1.0:
        raise ConfigError("'agreement.relevance_threshold' must lie in [0, 1).")
    if not 0.0 < confidence < 1.0:
        raise ConfigError("'agreement.confidence' must lie strictly between 0 and 1.")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ConfigError(
            "'agreement.bootstrap_resamples' must be a positive integer.")
    stand_in = section.get("stand_in_judges", defaults.stand_in_judges)
    if stand_in not in ("warn", "block"):
        raise ConfigError("'agreement.stand_in_judges' must be warn or block.")
    rule = section.get("disagreement_rule", defaults.disagreement_rule)
    if rule not in DISAGREEMENT_RULES:
        raise ConfigError("'agreement.disagreement_rule' must be exclude, judge1 or mean, "
                          f"got {rule!r}.")
    return AgreementSettings(floor, disagreement, relevance, resamples, confidence, stand_in,
                             rule)


def _calibration(raw: Mapping[str, Any]) -> CalibrationSettings:
    from eval_harness.metrics.calibration import weight_grid  # numpy only; no cycle

    section = _section(raw, "calibration", ("grid", "default_weight", "rrf_k", "cv_folds",
                                            "seed", "bootstrap_resamples", "verdict"))
    grid = _section(section, "grid", ("start", "stop", "step"), where="calibration")
    bands = _section(section, "verdict", ("full_success", "partial_success"),
                     where="calibration")
    d = CalibrationSettings()
    start = _number(grid, "start", d.grid_start, "calibration.grid")
    stop = _number(grid, "stop", d.grid_stop, "calibration.grid")
    step = _number(grid, "step", d.grid_step, "calibration.grid")
    if not 0.01 - 1e-12 <= step <= 1.0:
        raise ConfigError("'calibration.grid.step' must lie between 0.01 and 1.")
    try:
        weight_grid(start=start, stop=stop, step=step)
    except ValueError as exc:
        raise ConfigError(f"calibration.grid: {exc}") from None
    default = _number(section, "default_weight", d.default_weight, "calibration")
    full = _number(bands, "full_success", d.full_success, "calibration.verdict")
    partial = _number(bands, "partial_success", d.partial_success, "calibration.verdict")
    if not 0.0 <= default <= 1.0:
        raise ConfigError("'calibration.default_weight' must lie in [0, 1].")
    if not 0.0 <= partial <= full <= 1.0:
        raise ConfigError("calibration.verdict needs 0 <= partial_success <= "
                          "full_success <= 1.")
    integers = {}
    for key, low in (("rrf_k", 0), ("cv_folds", 2), ("seed", 0), ("bootstrap_resamples", 1)):
        value = section.get(key, getattr(d, key))
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"'calibration.{key}' must be an integer >= {low}.")
        integers[key] = value
    return CalibrationSettings(start, stop, step, default, full_success=full,
                               partial_success=partial, **integers)


_RELATION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$")


def _flag(section: Mapping[str, Any], key: str, default: bool, where: str) -> bool:
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"'{where}.{key}' must be true or false, got {value!r}.")
    return value


def _gate(name: str, section: Any, default: GateSettings) -> GateSettings:
    where = f"quality_gates.gates.{name}"
    if section is None:
        return default
    if not isinstance(section, Mapping):
        raise ConfigError(f"'{where}' must be a mapping.")
    reject_unknown_keys(section, where, tuple(GateSettings.__dataclass_fields__))
    threshold = _number(section, "threshold", default.threshold, where)
    low = -1.0 if name == "answer_reward" else 0.0  # the reward scale is -1..+1
    if not low <= threshold <= 1.0:
        raise ConfigError(f"'{where}.threshold' must lie in [{low:g}, 1].")
    min_pass_rate = _number(section, "min_pass_rate", default.min_pass_rate, where)
    if not 0.0 <= min_pass_rate <= 1.0:
        raise ConfigError(f"'{where}.min_pass_rate' must lie in [0, 1].")
    return GateSettings(enabled=_flag(section, "enabled", default.enabled, where),
                        threshold=threshold, min_pass_rate=min_pass_rate,
                        blocking=_flag(section, "blocking", default.blocking, where))


def _quality_gates(raw: Mapping[str, Any], root: Path) -> QualityGateSettings:
    section = _section(raw, "quality_gates", tuple(QualityGateSettings.__dataclass_fields__))
    d = QualityGateSettings()
    relation = section.get("answers_relation", d.answers_relation)
    if not isinstance(relation, str) or not _RELATION_NAME.match(relation):
        raise ConfigError("'quality_gates.answers_relation' must be a table or view "
                          f"name such as answers or myschema.answers, got {relation!r}.")
    start = section.get("partition_start", d.partition_start)
    if isinstance(start, str):
        try:
            start = date.fromisoformat(start)
        except ValueError:
            pass
    if not isinstance(start, date):
        raise ConfigError("'quality_gates.partition_start' must be a date "
                          f"YYYY-MM-DD, got {start!r}.")
    answers_file = section.get("answers_file")
    chars = section.get("grounding_source_chars", d.grounding_source_chars)
    if isinstance(chars, bool) or not isinstance(chars, int) or chars < 1:
        raise ConfigError("'quality_gates.grounding_source_chars' must be a "
                          "positive integer.")
    reflexion = _number(section, "reflexion_threshold", d.reflexion_threshold, "quality_gates")
    if not -1.0 <= reflexion <= 1.0:
        raise ConfigError("'quality_gates.reflexion_threshold' must lie in [-1, 1].")
    gates = _section(section, "gates", tuple(DEFAULT_GATES), where="quality_gates")
    return QualityGateSettings(
        answers_relation=relation,
        partition_start=start.date() if hasattr(start, "date") else start,
        answers_file=(root / str(answers_file)).resolve() if answers_file else None,
        grounding_source_chars=chars, reflexion_threshold=reflexion,
        gates={name: _gate(name, gates.get(name), default)
               for name, default in DEFAULT_GATES.items()})


def _datasets(raw: Mapping[str, Any], root: Path) -> dict[str, DatasetConfig]:
    try:
        return parse_datasets(_section(raw, "datasets"), root, reject_unknown_keys)
    except DatasetConfigError as exc:
        raise ConfigError(str(exc)) from None


def _schema_name(value: Any, key: str) -> str:
    if not isinstance(value, str) or not _SCHEMA_NAME.match(value):
        raise ConfigError(f"'{key}' must be a lower-case schema name (letters, digits, _), "
                          f"got {value!r}.")
    return value


def load_settings(config_path: Path | str | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    """Read ``config.yaml`` (explicit path, ``EVAL_HARNESS_CONFIG``, or ./config.yaml) and env.

    A missing config file is not an error when none was asked for: defaults apply. Every
    :class:`ConfigError` starts with the path of the file that was read, as it was given.
    Which file was read, and why, is ``config_path`` and ``config_origin``.
    """
    env = os.environ if environ is None else environ
    path, origin = locate_config(config_path, env)
    if origin == "none":
        raw, source = {}, f"{path} (not found, defaults apply)"
    else:
        raw, source = read_config(path), str(path)
    try:
        return replace(_settings_from(raw, path, env), config_origin=origin)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _settings_from(raw: Mapping[str, Any], path: Path, env: Mapping[str, str]) -> Settings:
    """The typed settings of a parsed file; errors carry no file name (the caller adds it)."""
    reject_unknown_keys(raw, "", TOP_LEVEL_KEYS)
    root = path.resolve().parent
    store = _section(raw, "store", STORE_KEYS)
    embedder = _section(raw, "embedder", EMBEDDER_KEYS)
    dagster = _section(raw, "dagster", DAGSTER_KEYS)
    history = _section(raw, "history", HISTORY_KEYS)
    nightly = _section(dagster, "nightly", NIGHTLY_KEYS, where="dagster")
    pgdata = env.get("EVAL_HARNESS_PGDATA") or store.get("embedded_pgdata", ".eval-harness/pgdata")
    dagster_home = env.get("DAGSTER_HOME") or dagster.get("home", ".eval-harness/dagster")
    cron = str(nightly.get("cron", "0 2 * * *"))
    if len(cron.split()) != 5:
        raise ConfigError(f"'dagster.nightly.cron' must have five fields, got {cron!r}.")
    return Settings(
        config_path=path.resolve() if path.is_file() else None,
        root=root,
        database_url=env.get("DATABASE_URL") or None,
        embedded_pgdata=(root / str(pgdata)).resolve(),
        schema=_schema_name(store.get("schema", DEFAULT_SCHEMA), "store.schema"),
        demo_rag_schema=(_schema_name(store["demo_rag_schema"], "store.demo_rag_schema")
                         if store.get("demo_rag_schema") else None),
        demo_rag_source=(root / str(store.get("demo_rag_source", DEMO_RAG_SOURCE))).resolve(),
        default_dataset=str(raw.get("default_dataset", "scifact")),
        datasets=_datasets(raw, root),
        embedder_provider=str(embedder.get("provider", "auto")),
        embedder_model=str(embedder.get("model", "all-MiniLM-L6-v2")),
        hybrid=_hybrid(raw),
        agreement=_agreement(raw),
        calibration=_calibration(raw),
        quality_gates=_quality_gates(raw, root),
        history_duckdb_path=(root / str(history.get("duckdb_path",
                                                    ".eval-harness/history.duckdb"))).resolve(),
        dagster_home=(root / str(dagster_home)).resolve(),
        nightly_cron=cron,
        nightly_timezone=str(nightly.get("timezone", "UTC")),
        dagster_postgres_url=env.get("DAGSTER_POSTGRES_URL") or None,
        openai_api_key=env.get("OPENAI_API_KEY") or None,
        openai_base_url=env.get("OPENAI_BASE_URL") or None,
        judges=parse_judge_settings(_section(raw, "judges"), env, source=None),
        anthropic_api_key=env.get("ANTHROPIC_API_KEY") or None,
        anthropic_base_url=env.get("ANTHROPIC_BASE_URL") or None,
    )
