"""Prove pgvector works on this server, not only that the extension is installed.

A build with instructions this CPU lacks installs and loads fine; it dies on the first
distance computation or index build. The probe does both in a temporary table inside a
transaction it rolls back, so it writes nothing: a distance with a known value, and a tiny
HNSW index whose nearest neighbours must match an exact scan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import psycopg

PROBE_ROWS = 300
PROBE_DIMENSIONS = 16


class VectorProbeFailed(RuntimeError):
    """pgvector answered wrongly (the message says what it computed)."""


@dataclass(frozen=True)
class VectorProbe:
    distance: float
    neighbours: list[int]


def _point(i: int) -> list[float]:
    """A deterministic, well spread test vector (no random numbers: the result is checked)."""
    return [math.sin(i * 0.7 + d * 1.3) + 0.01 * d for d in range(PROBE_DIMENSIONS)]


def probe_pgvector(conn: psycopg.Connection) -> VectorProbe:
    """Compute a distance and build + query an HNSW index in a rolled-back transaction.

    ``conn`` must be in autocommit mode (the probe opens and rolls back its own transaction,
    read-write even on a session whose default is read-only). Raises psycopg errors as they
    come (a crashed backend is an OperationalError) and :class:`VectorProbeFailed` for a
    wrong answer.
    """
    conn.execute("BEGIN READ WRITE")
    try:
        distance = conn.execute("SELECT '[1,2,3]'::vector <-> '[4,6,3]'::vector").fetchone()[0]
        if abs(distance - 5.0) > 1e-6:
            raise VectorProbeFailed(f"the L2 distance of [1,2,3] and [4,6,3] came out as "
                                    f"{distance}, not 5")
        conn.execute(f"CREATE TEMP TABLE eh_vector_probe (id int, v vector({PROBE_DIMENSIONS}))"
                     " ON COMMIT DROP")
        with conn.cursor().copy("COPY eh_vector_probe (id, v) FROM STDIN") as copy:
            for i in range(PROBE_ROWS):
                copy.write_row((i, "[" + ",".join(f"{x:.6f}" for x in _point(i)) + "]"))
        query = "[" + ",".join(f"{x:.6f}" for x in _point(PROBE_ROWS + 7)) + "]"
        exact = [row[0] for row in conn.execute(
            "SELECT id FROM eh_vector_probe ORDER BY v <=> %s::vector, id LIMIT 3", (query,))]
        conn.execute("CREATE INDEX ON eh_vector_probe USING hnsw (v vector_cosine_ops)")
        conn.execute("SET LOCAL enable_seqscan = off")
        approximate = [row[0] for row in conn.execute(
            "SELECT id FROM eh_vector_probe ORDER BY v <=> %s::vector LIMIT 3", (query,))]
        if approximate[:1] != exact[:1]:
            raise VectorProbeFailed(f"the HNSW index found {approximate} where an exact scan "
                                    f"finds {exact}")
        return VectorProbe(distance, approximate)
    finally:
        if not conn.closed:
            conn.execute("ROLLBACK")
