"""The live store: Postgres + pgvector (embedded when DATABASE_URL is unset)."""

from eval_harness.store.connection import (StoreLocation, StoreUnavailable, locate_store,
                                           redact_url)
from eval_harness.store.migrate import MigrationError, migrate


def open_store(settings) -> StoreLocation:
    """Locate (starting the embedded server if needed) and migrate the store."""
    location = locate_store(settings)
    with location.connection() as conn:
        migrate(conn)
    return location


__all__ = ["StoreLocation", "StoreUnavailable", "MigrationError", "locate_store", "migrate",
           "open_store", "redact_url"]
