"""Every SQL statement on ``judge_record`` (migrations 0015, 0016): one row per judge per judge
run, its spec and its measured reliability that run (:mod:`.record`).

Each function runs in the caller's transaction; the caller commits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import psycopg

RECORD_COLUMNS = ("run_id", "dataset", "judge", "judge_spec", "model", "server",
                  "prompt_version", "retest_flip_rate", "retest_alpha", "kappa_other",
                  "kappa_other_low", "kappa_other_high", "human_pairs", "human_agreement",
                  "anchor_flip_rate", "anchor_flip_low", "anchor_flip_high")
# written by the agreement step onto the newest rows (update_people), not by the judge run
PEOPLE_COLUMNS = ("people_kappa", "people_kappa_low", "people_kappa_high", "people_pairs",
                  "people_queries", "kappa_other", "kappa_other_low", "kappa_other_high")
_UPDATED = [c for c in RECORD_COLUMNS if c not in ("run_id", "judge")]
_SELECTED = RECORD_COLUMNS + tuple(c for c in PEOPLE_COLUMNS if c not in RECORD_COLUMNS)


def store_record(conn: psycopg.Connection, rows: Sequence[dict]) -> None:
    """Upsert the run's rows (keys: :data:`RECORD_COLUMNS`): a rerun of the same run id
    replaces its judge's row, never adds one."""
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO judge_record ({', '.join(RECORD_COLUMNS)}) VALUES "
            f"({', '.join(['%s'] * len(RECORD_COLUMNS))}) ON CONFLICT (run_id, judge) DO UPDATE "
            f"SET recorded_at = now(), {', '.join(f'{c} = EXCLUDED.{c}' for c in _UPDATED)}",
            [[row[c] for c in RECORD_COLUMNS] for row in rows])


def update_people(conn: psycopg.Connection, dataset: str, judge: int,
                  values: Mapping[str, object]) -> str | None:
    """Set ``values`` (keys among :data:`PEOPLE_COLUMNS`) on the newest row of ``judge`` of
    ``dataset``; the run id of the row updated, None when the judge has no row yet."""
    columns = [c for c in PEOPLE_COLUMNS if c in values]
    row = conn.execute(
        f"UPDATE judge_record SET {', '.join(f'{c} = %s' for c in columns)} WHERE id = ("
        "SELECT id FROM judge_record WHERE dataset = %s AND judge = %s "
        "ORDER BY recorded_at DESC, id DESC LIMIT 1) RETURNING run_id",
        [*(values[c] for c in columns), dataset, judge]).fetchone()
    return None if row is None else row[0]


def judge_record(conn: psycopg.Connection, dataset: str, *, per_spec: int = 7) -> list[tuple]:
    """The newest ``per_spec`` rows of each judge spec (spec, server, prompt version) of
    ``dataset``, as ``recorded_at``, :data:`RECORD_COLUMNS` then the people columns, by spec
    then oldest first."""
    return conn.execute(
        f"SELECT recorded_at, {', '.join(_SELECTED)} FROM ("
        f"SELECT *, row_number() OVER (PARTITION BY judge, judge_spec, server, prompt_version "
        "ORDER BY recorded_at DESC, id DESC) AS newest FROM judge_record WHERE dataset = %s"
        ") AS r WHERE newest <= %s ORDER BY judge, judge_spec, server NULLS FIRST, "
        "prompt_version NULLS FIRST, recorded_at, id", (dataset, per_spec)).fetchall()
