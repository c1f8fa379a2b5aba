"""Typed settings: ``config.yaml`` + environment -> :class:`Settings`, passed down explicitly.

This is the only module that reads the environment; everything else receives a ``Settings``.
The file is validated in one pass by :class:`ConfigFile`, a pydantic model whose sections are
declared by their own modules (:mod:`.agreement`, :mod:`.calibration`, :mod:`.gates`,
:mod:`.datasets`, :mod:`.judges`; this one declares ``store:``, ``embedder:``, ``history:`` and
``dagster:``); a refusal is one sentence (:func:`.errors.config_error`). :class:`Settings` puts
the validated sections, the paths resolved against the config file's folder and the
environment's part together.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainValidator
from pydantic.dataclasses import dataclass as section

from eval_harness.settings.agreement import DISAGREEMENT_RULES, AgreementSettings
from eval_harness.settings.calibration import CalibrationSettings, DecisionSettings, HybridWeights
from eval_harness.settings.ci import CiSettings
from eval_harness.settings.datasets import DatasetConfig, DatasetEntry, dataset_config
from eval_harness.settings.errors import ConfigError, problem
from eval_harness.settings.file import DEFAULT_CONFIG_NAME, locate_config, read_config
from eval_harness.settings.gates import GateSettings, QualityGateSettings
from eval_harness.settings.ground_truth import GroundTruthSettings
from eval_harness.settings.judges import JudgeSettings, provider_variables, with_environment
from eval_harness.settings.values import SECTION, OrEmpty, validated

__all__ = ["AgreementSettings", "CalibrationSettings", "ConfigError", "DEFAULT_SCHEMA",
           "DecisionSettings",
           "DISAGREEMENT_RULES", "GateSettings", "HybridWeights", "QualityGateSettings",
           "Settings", "load_settings"]

DEMO_RAG_SOURCE = "datasets/scifact"  # store.demo_rag_source's default
DEFAULT_SCHEMA = "eval_harness"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _schema_name(value: Any) -> str:
    if not isinstance(value, str) or not _SCHEMA_NAME.match(value):
        raise problem("must be a lower-case schema name (letters, digits, _), "
                      f"got {value!r}.")
    return value


def _none_if_empty(value: Any) -> Any:
    return value or None


def _cron_line(value: Any) -> str:
    cron = str(value)
    if len(cron.split()) != 5:
        raise problem(f"must have five fields, got {cron!r}.")
    return cron


SchemaName = Annotated[str, PlainValidator(_schema_name)]


@section(frozen=True, config=SECTION)
class StoreSection:
    """``store:``: where the harness keeps its tables (paths relative to the config file)."""

    # the embedded server's data folder (EVAL_HARNESS_PGDATA overrides it)
    embedded_pgdata: str = ".eval-harness/pgdata"
    schema: SchemaName = DEFAULT_SCHEMA      # every table the harness owns
    # embedded store only: the bundled SciFact laid out in this schema like a RAG system's
    # own store (None: no demo store)
    demo_rag_schema: Annotated[SchemaName | None, BeforeValidator(_none_if_empty)] = None
    # the BEIR folder (with embeddings.npz) laid out there
    demo_rag_source: str = DEMO_RAG_SOURCE
    # answers laid out there as the RAG system's answers table (None: none)
    demo_rag_answers: Annotated[str | None, BeforeValidator(_none_if_empty)] = None


@section(frozen=True, config=SECTION)
class EmbedderSection:
    # what embeds an ingested dataset's queries: local, openai, or auto (local for
    # all-MiniLM-L6-v2, else openai)
    provider: str = "auto"
    # the embedding model's name
    model: str = "all-MiniLM-L6-v2"


@section(frozen=True, config=SECTION)
class HistorySection:
    # the DuckDB file of the run history (calibrations, agreement, gate results)
    duckdb_path: str = ".eval-harness/history.duckdb"


@section(frozen=True, config=SECTION)
class NightlySection:
    cron: Annotated[str, PlainValidator(_cron_line)] = "0 2 * * *"   # when nightly_job runs
    # the time zone of the cron line
    timezone: str = "UTC"


@section(frozen=True, config=SECTION)
class DagsterSection:
    # DAGSTER_HOME: runs, logs and schedules (the variable overrides it)
    home: str = ".eval-harness/dagster"
    # when nightly_job runs
    nightly: Annotated[NightlySection, OrEmpty] = NightlySection()


@section(frozen=True, config=SECTION)
class ConfigFile:
    """What ``config.yaml`` may hold: each top-level section, in the order the file has them."""

    store: Annotated[StoreSection, OrEmpty] = StoreSection()
    # the dataset a command reads when --dataset is not given
    default_dataset: str = "scifact"
    datasets: Annotated[Mapping[str, DatasetEntry], OrEmpty] = field(default_factory=dict)
    embedder: Annotated[EmbedderSection, OrEmpty] = EmbedderSection()
    hybrid_search: Annotated[HybridWeights, OrEmpty] = HybridWeights()
    agreement: Annotated[AgreementSettings, OrEmpty] = AgreementSettings()
    calibration: Annotated[CalibrationSettings, OrEmpty] = CalibrationSettings()
    history: Annotated[HistorySection, OrEmpty] = HistorySection()
    quality_gates: Annotated[QualityGateSettings, OrEmpty] = QualityGateSettings()
    ci: Annotated[CiSettings, OrEmpty] = CiSettings()
    judges: Annotated[JudgeSettings, OrEmpty] = JudgeSettings()
    # queries for a dataset without ground truth (eval-harness ground-truth)
    ground_truth: Annotated[GroundTruthSettings, OrEmpty] = GroundTruthSettings()
    dagster: Annotated[DagsterSection, OrEmpty] = DagsterSection()


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
    ground_truth: GroundTruthSettings = GroundTruthSettings()
    ci: CiSettings = CiSettings()                # ci: the merge gate against a baseline
    anthropic_api_key: str | None = field(default=None, repr=False)
    anthropic_base_url: str | None = None
    # The environment's *_API_KEY / *_BASE_URL variables: a provider reads its key and server
    # by the variable it declares (eval_harness.judges.client.providers.base).
    provider_variables: Mapping[str, str] = field(default_factory=dict, repr=False,
                                                  compare=False)

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
    root = path.resolve().parent
    raw = {**raw, "judges": with_environment(raw.get("judges"), env)}
    file = validated(ConfigFile, raw, context={"root": root})
    store, dagster = file.store, file.dagster
    pgdata = env.get("EVAL_HARNESS_PGDATA") or store.embedded_pgdata
    home = env.get("DAGSTER_HOME") or dagster.home
    given = raw.get("datasets") or {}
    return Settings(
        config_path=path.resolve() if path.is_file() else None,
        root=root,
        database_url=env.get("DATABASE_URL") or None,
        embedded_pgdata=(root / pgdata).resolve(),
        schema=store.schema,
        demo_rag_schema=store.demo_rag_schema,
        demo_rag_source=(root / store.demo_rag_source).resolve(),
        demo_rag_answers=((root / store.demo_rag_answers).resolve()
                          if store.demo_rag_answers else None),
        default_dataset=file.default_dataset,
        datasets={str(name): dataset_config(str(name), entry, given[name])
                  for name, entry in file.datasets.items()},
        embedder_provider=file.embedder.provider,
        embedder_model=file.embedder.model,
        hybrid=file.hybrid_search,
        agreement=file.agreement,
        calibration=file.calibration,
        quality_gates=file.quality_gates,
        history_duckdb_path=(root / file.history.duckdb_path).resolve(),
        dagster_home=(root / home).resolve(),
        nightly_cron=dagster.nightly.cron,
        nightly_timezone=dagster.nightly.timezone,
        dagster_postgres_url=env.get("DAGSTER_POSTGRES_URL") or None,
        openai_api_key=env.get("OPENAI_API_KEY") or None,
        openai_base_url=env.get("OPENAI_BASE_URL") or None,
        judges=file.judges,
        ground_truth=file.ground_truth,
        ci=file.ci,
        anthropic_api_key=env.get("ANTHROPIC_API_KEY") or None,
        anthropic_base_url=env.get("ANTHROPIC_BASE_URL") or None,
        provider_variables=provider_variables(env),
    )
