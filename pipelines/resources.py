"""Resources shared by every domain: settings and the live store, injected by name."""


from pathlib import Path

import dagster as dg
import pandas as pd
from dagster_duckdb_pandas import DuckDBPandasIOManager, DuckDBPandasTypeHandler

from eval_harness.settings import Settings, load_settings
from eval_harness.store import StoreLocation, open_store


class EvalSettings(dg.ConfigurableResource):
    """config.yaml (+ environment) as typed settings. ``config_path`` None: ./config.yaml."""

    config_path: str | None = None
    # Overrides DATABASE_URL (e.g. dg.EnvVar("RAG_DATABASE_URL") or a test database).
    database_url: str | None = None

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


def default_resources(config_path: str | None = None,
                      database_url: str | None = None) -> dict:
    settings = EvalSettings(config_path=config_path, database_url=database_url)
    return {"settings": settings, "store": LiveStore(settings=settings)}


DUCKDB_IO_MANAGER_KEY = "duckdb_io_manager"
DEFAULT_DUCKDB_PATH = ".eval-harness/history.duckdb"  # history.duckdb_path's default


class GrowingPandasTypeHandler(DuckDBPandasTypeHandler):
    """Dagster's pandas handler for a table whose frames gain columns between releases.

    Dagster appends a frame to an existing table with ``INSERT ... SELECT *``, by position: a
    history written by an older release (``calibration_grid`` without the decision or
    Judged@5 columns, say) would refuse the wider frame. Here the table first gains the
    frame's new columns (NULL on the old rows), and the frame is laid out in the table's
    column order (a column the frame lacks is NULL), so the append lines up by name.
    """

    def handle_output(self, context, table_slice, obj: pd.DataFrame, connection):
        table = f"{table_slice.schema}.{table_slice.table}"
        have = [name for (name,) in connection.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = ? "
            "AND table_name = ? ORDER BY ordinal_position",
            [table_slice.schema, table_slice.table]).fetchall()]
        if have and not obj.empty:
            frame = obj  # noqa: F841 (DuckDB reads the local frame by name)
            kinds = dict(connection.execute("SELECT column_name, column_type "
                                            "FROM (DESCRIBE SELECT * FROM frame)").fetchall())
            for name in obj.columns:
                if name not in have:
                    connection.execute(f'ALTER TABLE {table} ADD COLUMN "{name}" {kinds[name]}')
                    have.append(name)
            obj = obj.reindex(columns=have)
        super().handle_output(context, table_slice, obj, connection)


class HistoryDuckDBIOManager(DuckDBPandasIOManager):
    """Dagster's DuckDB I/O manager (pandas frames become tables) that creates the folder of
    its file first (with DATABASE_URL set nothing else creates ``.eval-harness/``) and lets a
    table written by an older release take the newer, wider frames
    (:class:`GrowingPandasTypeHandler`)."""

    def create_io_manager(self, context):
        Path(self.database).parent.mkdir(parents=True, exist_ok=True)
        return super().create_io_manager(context)

    @staticmethod
    def type_handlers():
        return [GrowingPandasTypeHandler()]


def duckdb_io_manager(database: str | None = None) -> HistoryDuckDBIOManager:
    """The DuckDB I/O manager for analysis artefacts, on ``database`` (the definitions pass
    ``history.duckdb_path``; the default is its default, relative to the working directory).
    DuckDB allows one writing process at a time; the I/O manager retries while another
    holds the file.
    """
    return HistoryDuckDBIOManager(database=database or DEFAULT_DUCKDB_PATH)
