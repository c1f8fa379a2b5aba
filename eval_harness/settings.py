"""Typed settings: ``config.yaml`` + environment -> :class:`Settings`, passed down explicitly.

This is the only module that reads the environment; everything else receives a ``Settings``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import yaml

DEFAULT_CONFIG_NAME = "config.yaml"
TEXT_SEARCH_LANGUAGES_HINT = "english, german, simple (or any Postgres text-search configuration)"


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key and what to do."""


@dataclass(frozen=True)
class DatasetConfig:
    name: str
    path: Path
    language: str = "english"
    split: str = "test"


@dataclass(frozen=True)
class HybridWeights:
    semantic: float = 0.7
    keyword: float = 0.3
    candidate_depth: int = 50


@dataclass(frozen=True)
class Settings:
    config_path: Path | None
    root: Path
    database_url: str | None = None
    embedded_pgdata: Path = Path(".eval-harness/pgdata")
    default_dataset: str = "scifact"
    datasets: Mapping[str, DatasetConfig] = field(default_factory=dict)
    embedder_provider: str = "auto"
    embedder_model: str = "all-MiniLM-L6-v2"
    hybrid: HybridWeights = HybridWeights()
    dagster_home: Path = Path(".eval-harness/dagster")
    openai_api_key: str | None = field(default=None, repr=False)
    openai_base_url: str | None = None

    def dataset(self, name: str) -> DatasetConfig:
        try:
            return self.datasets[name]
        except KeyError:
            known = ", ".join(sorted(self.datasets)) or "none"
            raise ConfigError(f"Dataset '{name}' is not configured in config.yaml "
                              f"(configured: {known}).") from None

    def with_overrides(self, **changes: Any) -> "Settings":
        return replace(self, **changes)


def _section(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key) or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"config.yaml: '{key}' must be a mapping.")
    return value


def _number(section: Mapping[str, Any], key: str, default: float, where: str) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"config.yaml: '{where}.{key}' must be a number, got {value!r}.")
    return float(value)


def _hybrid(raw: Mapping[str, Any]) -> HybridWeights:
    section = _section(raw, "hybrid_search")
    semantic = _number(section, "semantic", 0.7, "hybrid_search")
    keyword = _number(section, "keyword", round(1.0 - semantic, 10), "hybrid_search")
    depth = section.get("candidate_depth", 50)
    if not 0.0 <= semantic <= 1.0 or not 0.0 <= keyword <= 1.0:
        raise ConfigError("config.yaml: hybrid_search weights must lie in [0, 1].")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ConfigError("config.yaml: 'hybrid_search.candidate_depth' must be a positive integer.")
    return HybridWeights(semantic, keyword, depth)


def _datasets(raw: Mapping[str, Any], root: Path) -> dict[str, DatasetConfig]:
    result = {}
    for name, entry in _section(raw, "datasets").items():
        if not isinstance(entry, Mapping) or "path" not in entry:
            raise ConfigError(f"config.yaml: datasets.{name} needs a 'path'.")
        result[str(name)] = DatasetConfig(
            name=str(name), path=(root / str(entry["path"])).resolve(),
            language=str(entry.get("language", "english")), split=str(entry.get("split", "test")))
    return result


def load_settings(config_path: Path | str | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    """Read ``config.yaml`` (explicit path, ``EVAL_HARNESS_CONFIG``, or ./config.yaml) and env.

    A missing config file is not an error when none was asked for: defaults apply.
    """
    env = os.environ if environ is None else environ
    explicit = config_path or env.get("EVAL_HARNESS_CONFIG")
    path = Path(explicit) if explicit else Path.cwd() / DEFAULT_CONFIG_NAME
    raw: Mapping[str, Any] = {}
    if path.is_file():
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML ({exc}).") from None
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{path}: the top level must be a mapping of keys.")
    elif explicit:
        raise ConfigError(f"{path}: config file not found.")
    root = path.resolve().parent
    store = _section(raw, "store")
    embedder = _section(raw, "embedder")
    dagster = _section(raw, "dagster")
    pgdata = env.get("EVAL_HARNESS_PGDATA") or store.get("embedded_pgdata", ".eval-harness/pgdata")
    dagster_home = env.get("DAGSTER_HOME") or dagster.get("home", ".eval-harness/dagster")
    return Settings(
        config_path=path.resolve() if path.is_file() else None,
        root=root,
        database_url=env.get("DATABASE_URL") or None,
        embedded_pgdata=(root / str(pgdata)).resolve(),
        default_dataset=str(raw.get("default_dataset", "scifact")),
        datasets=_datasets(raw, root),
        embedder_provider=str(embedder.get("provider", "auto")),
        embedder_model=str(embedder.get("model", "all-MiniLM-L6-v2")),
        hybrid=_hybrid(raw),
        dagster_home=(root / str(dagster_home)).resolve(),
        openai_api_key=env.get("OPENAI_API_KEY") or None,
        openai_base_url=env.get("OPENAI_BASE_URL") or None,
    )
