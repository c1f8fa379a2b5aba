"""Migrations: applied once, idempotent, once under concurrency, and an edited one refused."""

from __future__ import annotations

import threading

import pytest

from eval_harness.store import MigrationError, migrate
from eval_harness.store.migrate import available_migrations


def test_migrations_apply_once_and_are_idempotent(empty_database):
    with empty_database.connection() as conn:
        first = migrate(conn)
        second = migrate(conn)
        recorded = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
    assert first == [m.name for m in available_migrations()]
    assert second == []
    assert recorded == len(first)


def test_concurrent_migrations_apply_each_file_once(empty_database):
    results, errors = [], []

    def worker():
        try:
            with empty_database.connection() as conn:
                results.append(migrate(conn))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    applied = [name for names in results for name in names]
    assert sorted(applied) == [m.name for m in available_migrations()]


def test_edited_migration_is_refused(empty_database):
    with empty_database.connection() as conn:
        migrate(conn)
        conn.execute("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1")
        conn.commit()
        with pytest.raises(MigrationError, match="changed after it was applied"):
            migrate(conn)
