"""A rerun searches nothing it already searched, counted from outside:
on a store laid out like the seeds with ``tsvector: null``, mapped as the README maps one,
``attach`` then ``calibrate``, ``report`` and ``judge`` through the CLI, then the same commands
again on the unchanged store; the server's own log (``log_statement = all`` for the test's
database) says which statements the rerun sent. The judges' pairs are the top k ``search`` and
``report`` rank at the same weights.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from cli_runs import run_cli
from eval_harness.store.connection import embedded_server_log
from live_store import seeds_config_yaml, seeds_project

# a log entry starts with the server's log_line_prefix (a timestamp); a statement spans lines
ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", re.MULTILINE)
STATEMENT = re.compile(r"LOG:\s+(?:statement|execute [^:]*): (.*)", re.DOTALL)


class ServerLog:
    """The statements the server logged for one database since :meth:`mark`."""

    def __init__(self, url: str) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            folder = conn.execute("SHOW data_directory").fetchone()[0]
            self.dbname = conn.info.dbname
            conn.execute(sql.SQL("ALTER DATABASE {} SET log_statement = 'all'").format(
                sql.Identifier(self.dbname)))
        self.path = embedded_server_log(Path(folder))
        if not self.path.is_file():
            pytest.skip(f"the test server's log is not readable here ({self.path})")
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.path.stat().st_size

    def statements(self) -> list[str]:
        with self.path.open("rb") as log:
            log.seek(self.offset)
            text = log.read().decode("utf-8", "replace")
        starts = [m.start() for m in ENTRY.finditer(text)] + [len(text)]
        found = []
        for start, end in itertools.pairwise(starts):
            match = STATEMENT.search(text[start:end])
            if match:
                found.append(" ".join(match.group(1).split()))
        return found


def ranking(statements: list[str]) -> list[str]:
    """The statements that search: rank text (ts_rank, the OR query), order by vector
    distance, or read the keyword index's postings."""
    return [s for s in statements
            if re.search(r"ts_rank|eh_or_tsquery|<=>|keyword_postings", s)]


@pytest.fixture
def own_store(fresh, tmp_path, monkeypatch):
    """A seeds-layout store in ``public`` (40 documents, 8 queries, no tsvector column) and
    a project folder with the README's config.yaml; DATABASE_URL points at it."""
    seeds_project(fresh, tmp_path, monkeypatch,
                  seeds_config_yaml(schema="public", embedder="local:all-MiniLM-L6-v2",
                                    local_judges=False), seed=11)
    return fresh


def cache_rows(location) -> int:
    with location.connection() as conn:
        return conn.execute("SELECT count(*) FROM candidate_cache WHERE dataset = 'prod'"
                            ).fetchone()[0]


RERUN = (["calibrate", "--json"], ["report", "--json"], ["judge", "--json"])


def test_a_rerun_through_the_cli_sends_no_ranking_statement(own_store, capsys):
    log = ServerLog(own_store.url)
    assert run_cli(capsys, "attach", "--dataset", "prod")[0] == 0
    assert cache_rows(own_store) == 0
    first = {}
    for argv in RERUN:
        code, out, err = run_cli(capsys, *argv)
        assert code in (0, 1), (argv, err)
        first[argv[0]] = json.loads(out)
    assert cache_rows(own_store) == 8  # what a user sees after one run: every query kept

    log.mark()
    again = {}
    for argv in RERUN:
        code, out, err = run_cli(capsys, *argv)
        assert code in (0, 1), (argv, err)
        again[argv[0]] = json.loads(out)
    sent = log.statements()
    assert len(sent) > 20, sent  # the log did record the rerun's statements
    assert ranking(sent) == []
    assert again["report"]["metrics"] == first["report"]["metrics"]
    assert again["judge"]["pairs"] == first["judge"]["pairs"]

    # a changed document: the next run searches again, and says the same as a fresh fetch
    with own_store.connection() as conn:
        conn.execute("UPDATE public.l2_insights SET content = content || ' aspirin' "
                     "WHERE id = (SELECT min(id) FROM public.l2_insights)")
        conn.commit()
    log.mark()
    code, out, err = run_cli(capsys, "report", "--json")
    assert code == 0, err
    assert ranking(log.statements()), "the changed corpus was not searched again"


def test_the_judged_pairs_are_the_top_k_search_and_report_rank(own_store, capsys):
    # a shallow candidate depth, so each query's candidates are its own semantic and keyword
    # tops (at 50 every one of the 40 documents would be a candidate of every query)
    config = Path("config.yaml")
    config.write_text(config.read_text(encoding="utf-8") + "hybrid_search: {semantic: 0.6, "
                      "keyword: 0.4, candidate_depth: 4}\njudges: {hybrid_top_k: 3}\n",
                      encoding="utf-8")
    log = ServerLog(own_store.url)
    assert run_cli(capsys, "attach", "--dataset", "prod")[0] == 0
    log.mark()
    code, out, err = run_cli(capsys, "judge", "--json")
    assert code in (0, 1), err
    # the plan ranked from the keyword index: no document's text was parsed to rank it
    assert not [s for s in log.statements() if "ts_rank" in s]
    assert cache_rows(own_store) == 8  # and a judge run alone keeps what it fetched
    with own_store.connection() as conn:
        judged = conn.execute("SELECT query, expected_docs, judged_docs FROM ground_truth "
                              "WHERE dataset = 'prod' ORDER BY id").fetchall()
    assert len(judged) == 8
    for query, expected, pairs in judged:
        code, out, err = run_cli(capsys, "search", query, "--dataset", "prod", "--k", "3",
                                 "--json")
        assert code == 0, err
        hits = [hit["id"] for hit in json.loads(out)["hits"]]
        assert len(hits) == 3
        assert pairs == list(dict.fromkeys([*expected, *hits])), query

    # report ranks the same candidates with the same fusion: its top 3 are the judged ones
    from eval_harness.retrieval.hybrid import candidate_scores
    from eval_harness.retrieval.report import fused_runs

    with own_store.connection() as conn:
        tops = fused_runs(candidate_scores(conn, "prod", candidate_depth=4), 0.6, 0.4, depth=3)
        ranked = {qid: top for qid, top in tops.items()}
        stored = dict(conn.execute("SELECT id, judged_docs FROM ground_truth WHERE "
                                   "dataset = 'prod'").fetchall())
        expected = dict(conn.execute("SELECT id, expected_docs FROM ground_truth WHERE "
                                     "dataset = 'prod'").fetchall())
    assert {q: list(dict.fromkeys([*expected[q], *ranked[q]])) for q in ranked} == stored
