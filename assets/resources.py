"""Resources shared by every domain: settings and the live store, injected by name."""


from typing import Optional

import dagster as dg
from dagster_duckdb_pandas import DuckDBPandasIOManager

from eval_harness.settings import Settings, load_settings
from eval_harness.store import StoreLocation, open_store


class EvalSettings(dg.ConfigurableResource):
    """config.yaml (+ environment) as typed settings. ``config_path`` None: ./config.yaml."""

    config_path: Optional[str] = None
    # Overrides DATABASE_URL (e.g. dg.EnvVar("RAG_DATABASE_URL") or a test database).
    database_url: Optional[str] = None

    def load(self) -> Settings:
        settings = load_settings(self.config_path)
        if self.database_url:
            settings = settings.with_overrides(database_url=self.database_url)
        return settings


class LiveStore(dg.ConfigurableResource):
    """The live Postgres store: DATABASE_URL when set, else the embedded server; migrated."""

    settings: EvalSettings

    def location(self) -> StoreLocation:
        return open_store(self.settings.load())


def default_resources(config_path: Optional[str] = None,
                      database_url: Optional[str] = None) -> dict:
    settings = EvalSettings(config_path=config_path, database_url=database_url)
    return {"settings": settings, "store": LiveStore(settings=settings)}


DUCKDB_IO_MANAGER_KEY = "duckdb_io_manager"
DEFAULT_DUCKDB_PATH = ".eval-harness/history.duckdb"  # history.duckdb_path's default


def duckdb_io_manager(database: Optional[str] = None) -> DuckDBPandasIOManager:
    """Dagster's DuckDB I/O manager for analysis artefacts (pandas frames become tables).

    The default file is ``history.duckdb_path``'s default, relative to the working directory
    (the project root under run.sh and ``dagster dev``). DuckDB allows one writing process at
    a time; the I/O manager retries while another holds the file.
    """
    return DuckDBPandasIOManager(database=database or DEFAULT_DUCKDB_PATH)
