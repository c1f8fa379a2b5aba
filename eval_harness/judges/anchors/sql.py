"""Every SQL statement on ``judge_anchors`` and ``judge_anchor_runs`` (migrations 0014, 0017):
the frozen anchor set of a dataset (:mod:`.anchor_set`), each run's comparison with it
(:mod:`.drift`), and the comparison a judge already got today (:mod:`.nightly`).

Each function runs in the caller's transaction; the caller commits."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

_COLUMNS = ("judge", "judge_spec", "model", "prompt_version", "query_key", "doc_id",
            "query_text", "doc_text", "frozen_score", "frozen_label", "human_label")
RUN_COLUMNS = ("run_id", "dataset", "judge", "judge_spec", "prompt_version", "frozen_spec",
               "frozen_prompt_version", "pairs", "flips", "flip_rate", "flip_low",
               "flip_high", "score_shift", "shift_low", "shift_high", "human_pairs",
               "human_agreement", "requests", "cost_usd", "reused_from", "cut_short",
               "human_labels")


def freeze_anchors(conn: psycopg.Connection, dataset: str, rows: Sequence[tuple]) -> None:
    """Insert the anchors of ``dataset``: ``rows`` of ``(judge, judge_spec, prompt_version,
    query_key, doc_id, query_text, doc_text, score, label, human_label)``; an anchor
    already frozen stays as it was."""
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO judge_anchors (dataset, {', '.join(_COLUMNS)}) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (dataset, judge, query_key, doc_id) DO NOTHING",
            [(dataset, judge, spec, spec.split(":", 1)[-1], version, *rest)
             for judge, spec, version, *rest in rows])


def frozen_anchors(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """The anchors of ``dataset`` as ``(judge, judge_spec, model, prompt_version, query_key,
    doc_id, query_text, doc_text, frozen_score, frozen_label, human_label)``, by judge,
    query and document; [] before the first run with anchors on."""
    return conn.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM judge_anchors WHERE dataset = %s "
        "ORDER BY judge, query_key, doc_id", (dataset,)).fetchall()


def store_anchor_run(conn: psycopg.Connection, values: dict) -> None:
    """One judge's comparison with the anchors in one run (keys: :data:`RUN_COLUMNS`)."""
    conn.execute(f"INSERT INTO judge_anchor_runs ({', '.join(RUN_COLUMNS)}) VALUES "
                 f"({', '.join(['%s'] * len(RUN_COLUMNS))})",
                 [values[c] for c in RUN_COLUMNS])


def anchor_runs(conn: psycopg.Connection, dataset: str, *,
                run_id: str | None = None) -> list[tuple]:
    """The comparisons of ``run_id`` (None: the newest run that made one) with the anchors of
    ``dataset``, one row per judge with :data:`RUN_COLUMNS` then ``created_at``."""
    if run_id is None:
        row = conn.execute("SELECT run_id FROM judge_anchor_runs WHERE dataset = %s "
                           "ORDER BY created_at DESC, id DESC LIMIT 1", (dataset,)).fetchone()
        if row is None:
            return []
        run_id = row[0]
    return conn.execute(
        f"SELECT {', '.join(RUN_COLUMNS)}, created_at FROM judge_anchor_runs "
        "WHERE dataset = %s AND run_id = %s ORDER BY judge", (dataset, run_id)).fetchall()


def anchor_trend(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """Every comparison measured for ``dataset`` (not those a run reused), oldest first:
    ``(created_at, judge, judge_spec, flip_rate, flip_low, flip_high, score_shift,
    human_agreement)``."""
    return conn.execute(
        "SELECT created_at, judge, judge_spec, flip_rate, flip_low, flip_high, score_shift, "
        "human_agreement FROM judge_anchor_runs WHERE dataset = %s AND reused_from IS NULL "
        "ORDER BY created_at, judge",
        (dataset,)).fetchall()


def measured_today(conn: psycopg.Connection, dataset: str, judge: int, judge_spec: str,
                   prompt_version: str | None, human_labels: str) -> tuple | None:
    """The newest comparison of ``judge`` (this spec and prompt version) with the anchors
    of ``dataset`` measured (not reused, not cut short by its budget line) today, UTC, since
    the set was last frozen, with the same human verdicts (``human_labels``, their
    fingerprint): :data:`RUN_COLUMNS`; None when there is none."""
    return conn.execute(
        f"SELECT {', '.join(RUN_COLUMNS)} FROM judge_anchor_runs r "
        "WHERE dataset = %s AND judge = %s AND judge_spec = %s "
        "AND prompt_version IS NOT DISTINCT FROM %s AND reused_from IS NULL "
        "AND NOT cut_short AND human_labels = %s "
        "AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' "
        "AND created_at >= (SELECT max(frozen_at) FROM judge_anchors a "
        "                   WHERE a.dataset = r.dataset) "
        "ORDER BY created_at DESC, id DESC LIMIT 1",
        (dataset, judge, judge_spec, prompt_version, human_labels)).fetchone()


def set_human_labels(conn: psycopg.Connection, dataset: str,
                     labels: Sequence[tuple[str, int, bool]]) -> int:
    """Set the human verdict ``(query_key, doc_id, relevant?)`` on the anchors of ``dataset``
    that are that pair (every judge's row of it); how many rows changed. An anchor without a
    verdict in ``labels`` keeps the one it has."""
    if not labels:
        return 0
    return conn.execute(
        "UPDATE judge_anchors a SET human_label = v.label "
        "FROM unnest(%s::text[], %s::int[], %s::bool[]) AS v(query_key, doc_id, label) "
        "WHERE a.dataset = %s AND a.query_key = v.query_key AND a.doc_id = v.doc_id "
        "AND a.human_label IS DISTINCT FROM v.label",
        ([k for k, _, _ in labels], [d for _, d, _ in labels], [b for _, _, b in labels],
         dataset)).rowcount


def frozen_set(conn: psycopg.Connection, dataset: str) -> list[tuple]:
    """What the anchor set of ``dataset`` holds, per judge: ``(judge, judge_spec,
    prompt_version, pairs, frozen_at)``; [] when none is frozen."""
    return conn.execute(
        "SELECT judge, judge_spec, prompt_version, count(*), min(frozen_at) FROM judge_anchors "
        "WHERE dataset = %s GROUP BY judge, judge_spec, prompt_version ORDER BY judge",
        (dataset,)).fetchall()


def drop_anchors(conn: psycopg.Connection, dataset: str) -> int:
    """Delete the frozen anchor set of ``dataset`` (its comparisons stay, as history); how many
    rows went."""
    return conn.execute("DELETE FROM judge_anchors WHERE dataset = %s", (dataset,)).rowcount


def refreeze_scores(conn: psycopg.Connection, dataset: str, judge: int,
                    scores: Sequence[tuple[str, int, float, bool]]) -> int:
    """Freeze ``(query_key, doc_id, score, label)`` as ``judge``'s values on those anchors of
    ``dataset`` (a re-frozen set's fresh scores); how many rows changed."""
    if not scores:
        return 0
    return conn.execute(
        "UPDATE judge_anchors a SET frozen_score = v.score, frozen_label = v.label, "
        "frozen_at = now() FROM unnest(%s::text[], %s::int[], %s::float8[], %s::bool[]) "
        "AS v(query_key, doc_id, score, label) WHERE a.dataset = %s AND a.judge = %s "
        "AND a.query_key = v.query_key AND a.doc_id = v.doc_id",
        ([s[0] for s in scores], [s[1] for s in scores], [s[2] for s in scores],
         [s[3] for s in scores], dataset, judge)).rowcount
