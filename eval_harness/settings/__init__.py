"""Typed settings: ``config.yaml`` + environment -> :class:`Settings`, passed down explicitly.

This is the only module that reads the environment; everything else receives a ``Settings``.
The sections are parsed by their own modules (:mod:`.agreement`, :mod:`.calibration`,
:mod:`.gates`, :mod:`.datasets`, :mod:`.judges`); this one holds the top level, ``store:``,
``embedder:``, ``history:`` and ``dagster:``, and puts them together.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eval_harness.settings.agreement import DISAGREEMENT_RULES, AgreementSettings, parse_agreement
from eval_harness.settings.calibration import (
    CalibrationSettings,
    DecisionSettings,
    HybridWeights,
    parse_calibration,
    parse_hybrid,
)
from eval_harness.settings.datasets import DatasetConfig, DatasetConfigError, parse_datasets
from eval_harness.settings.errors import ConfigError, reject_unknown_keys
from eval_harness.settings.file import DEFAULT_CONFIG_NAME, locate_config, read_config
from eval_harness.settings.gates import GateSettings, QualityGateSettings, parse_quality_gates
from eval_harness.settings.judges import JudgeSettings, parse_judge_settings
from eval_harness.settings.values import mapping_of

# Each section's type lives in its own module (agreement, calibration, gates, datasets,
# judges); the ones importers name from here are re-exported.
__all__ = ["AgreementSettings", "CalibrationSettings", "ConfigError", "DEFAULT_SCHEMA",
           "DecisionSettings",
           "DISAGREEMENT_RULES", "GateSettings", "HybridWeights", "QualityGateSettings",
           "Settings", "load_settings"]


# Every key config.yaml may hold, section by section: any other key is an error (a typo must
# not silently keep a default). Sections parsed from a dataclass list its fields instead.
TOP_LEVEL_KEYS = ("store", "default_dataset", "datasets", "embedder", "hybrid_search",
                  "agreement", "calibration", "history", "quality_gates", "judges", "dagster")
STORE_KEYS = ("embedded_pgdata", "schema", "demo_rag_schema", "demo_rag_source",
              "demo_rag_answers")
DEMO_RAG_SOURCE = "datasets/scifact"  # store.demo_rag_source's default
DEFAULT_SCHEMA = "eval_harness"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
EMBEDDER_KEYS = ("provider", "model")
HISTORY_KEYS = ("duckdb_path",)
DAGSTER_KEYS = ("home", "nightly")
NIGHTLY_KEYS = ("cron", "timezone")


@dataclass(frozen=True)
class Settings:
    config_path: Path | None
    root: Path
    config_origin: str = "option"  # settings.file.ConfigOrigin: how config_path was found (or not)
    database_url: str | None = None
    embedded_pgdata: Path = Path(".eval-harness/pgdata")
    schema: str = DEFAULT_SCHEMA          # store.schema: every table the harness owns
    # store.demo_rag_schema: embedded store only, the bundled SciFact is laid out in this
    # schema like a RAG system's own store (None: no demo store)
    demo_rag_schema: str | None = None
    # store.demo_rag_source: the BEIR folder (with embeddings.npz) laid out there
    demo_rag_source: Path = Path(DEMO_RAG_SOURCE)
    # store.demo_rag_answers: answers laid out there as the RAG system's answers table
    # (sources citing its corpus ids), which quality_gates.answers can map (None: none)
    demo_rag_answers: Path | None = None
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

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **changes)


def _datasets(raw: Mapping[str, Any], root: Path) -> dict[str, DatasetConfig]:
    try:
        return parse_datasets(mapping_of(raw, "datasets"), root, reject_unknown_keys)
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
    raw: Mapping[str, Any]
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
    store = mapping_of(raw, "store", STORE_KEYS)
    embedder = mapping_of(raw, "embedder", EMBEDDER_KEYS)
    dagster = mapping_of(raw, "dagster", DAGSTER_KEYS)
    history = mapping_of(raw, "history", HISTORY_KEYS)
    nightly = mapping_of(dagster, "nightly", NIGHTLY_KEYS, where="dagster")
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
        demo_rag_answers=((root / str(store["demo_rag_answers"])).resolve()
                          if store.get("demo_rag_answers") else None),
        default_dataset=str(raw.get("default_dataset", "scifact")),
        datasets=_datasets(raw, root),
        embedder_provider=str(embedder.get("provider", "auto")),
        embedder_model=str(embedder.get("model", "all-MiniLM-L6-v2")),
        hybrid=parse_hybrid(raw),
        agreement=parse_agreement(raw),
        calibration=parse_calibration(raw),
        quality_gates=parse_quality_gates(raw, root),
        history_duckdb_path=(root / str(history.get("duckdb_path",
                                                    ".eval-harness/history.duckdb"))).resolve(),
        dagster_home=(root / str(dagster_home)).resolve(),
        nightly_cron=cron,
        nightly_timezone=str(nightly.get("timezone", "UTC")),
        dagster_postgres_url=env.get("DAGSTER_POSTGRES_URL") or None,
        openai_api_key=env.get("OPENAI_API_KEY") or None,
        openai_base_url=env.get("OPENAI_BASE_URL") or None,
        judges=parse_judge_settings(mapping_of(raw, "judges"), env, source=None),
        anthropic_api_key=env.get("ANTHROPIC_API_KEY") or None,
        anthropic_base_url=env.get("ANTHROPIC_BASE_URL") or None,
    )
