"""The live store: Postgres + pgvector (embedded when DATABASE_URL is unset)."""

from eval_harness.store.connection import StoreLocation, StoreUnavailable, locate_store, redact_url
from eval_harness.store.migrate import MigrationError, check_schema_current, migrate


def open_store(settings, *, read_only: bool = False) -> StoreLocation:
    """Locate (starting the embedded server if needed) and migrate the store.

    ``read_only`` commands never migrate a ``DATABASE_URL`` store: they only check that its
    harness schema is current (one sentence otherwise), so a role that may only SELECT can
    run them. The embedded store is the harness's own and is migrated either way."""
    location = locate_store(settings)
    with location.connection() as conn:
        if read_only and settings.database_url:
            check_schema_current(conn, location.schema)
        else:
            migrate(conn, location.schema)
    return location


__all__ = ["StoreLocation", "StoreUnavailable", "MigrationError", "locate_store", "migrate",
           "open_store", "redact_url"]
