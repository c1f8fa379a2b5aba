"""Every SQL statement of the records ``compare`` reads: the owner of ``result_records`` (a
named result set: what, when, at which configuration and versions) and
``result_record_values`` (its values, one per row name and unit; migration 0025).

Each function takes a connection and plain values and runs in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

RECORD_COLUMNS = ("id, name, kind, dataset, recorded_at, code_version, configuration, "
                  "corpus_version, ground_truth_version, units")


def insert_record(conn: psycopg.Connection, *, name: str, kind: str, dataset: str,
                  code_version: str, configuration: dict[str, Any], corpus_version: str | None,
                  ground_truth_version: str | None,
                  values: Iterable[tuple[str, str, float]]) -> int:
    """Store a record and its ``(row name, unit, value)`` values; its id. The newest record of
    a (name, kind, dataset) is the one :func:`newest_record` finds; earlier ones stay."""
    rows = list(values)
    units = len({unit for _, unit, _ in rows})
    (record_id,) = conn.execute(
        "INSERT INTO result_records (name, kind, dataset, code_version, configuration, "
        "corpus_version, ground_truth_version, units) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
        "RETURNING id", (name, kind, dataset, code_version, Jsonb(configuration),
                         corpus_version, ground_truth_version, units)).fetchone()
    with conn.cursor().copy("COPY result_record_values (record_id, row_name, unit, value) "
                            "FROM STDIN") as copy:
        for row_name, unit, value in rows:
            copy.write_row((record_id, row_name, unit, float(value)))
    return int(record_id)


def newest_record(conn: psycopg.Connection, name: str, kind: str,
                  dataset: str) -> tuple | None:
    """The newest record named ``name`` of ``kind`` for ``dataset`` (``RECORD_COLUMNS``),
    None when there is none."""
    return conn.execute(f"SELECT {RECORD_COLUMNS} FROM result_records WHERE name = %s "
                        "AND kind = %s AND dataset = %s ORDER BY id DESC LIMIT 1",
                        (name, kind, dataset)).fetchone()


def record_values(conn: psycopg.Connection, record_id: int) -> dict[str, dict[str, float]]:
    """{row name: {unit: value}} of one record."""
    values: dict[str, dict[str, float]] = {}
    for row_name, unit, value in conn.execute(
            "SELECT row_name, unit, value FROM result_record_values WHERE record_id = %s",
            (record_id,)):
        values.setdefault(row_name, {})[unit] = value
    return values


def recorded_names(conn: psycopg.Connection) -> list[tuple[str, str, str, int]]:
    """``(name, kind, dataset, times recorded)`` of every record name, by name."""
    return conn.execute("SELECT name, kind, dataset, count(*) FROM result_records "
                        "GROUP BY name, kind, dataset ORDER BY name, kind, dataset").fetchall()
