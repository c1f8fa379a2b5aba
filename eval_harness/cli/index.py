"""``eval-harness index --dataset NAME [--dry-run]``: build the indexes a live dataset's search
needs on the RAG system's own relation, because the user asked.

It is the one documented command that writes outside the harness schema, so it does exactly
what ``eval-harness doctor`` lists and nothing more: each missing index (an HNSW index with
the cosine operator class on the searched embedding expression, a GIN index on the searched
tsvector expression, a unique btree index on the id) is printed, then built with
``CREATE INDEX CONCURRENTLY`` on an autocommit connection, so the RAG system keeps reading and
writing the table meanwhile. ``--dry-run`` prints the statements only. A concurrent build
that failed leaves an INVALID index behind; one with the same definition is dropped
(``DROP INDEX CONCURRENTLY``, printed too) and built again, unless another session holds it
(a build still running). An ingested dataset's indexes are the harness's own (ingest makes
them): the command refuses.
"""

from __future__ import annotations

import time

import psycopg

from eval_harness.cli.common import CliError
from eval_harness.errors import EXIT_OK
from eval_harness.escaping.terminal import say
from eval_harness.settings import Settings
from eval_harness.store.connection import locate_store
from eval_harness.datasets.corpus import Corpus
from eval_harness.datasets.register import dataset_row
from eval_harness.datasets.live_catalog import live_datasets
from eval_harness.datasets.live_indexes import (RELATION_KINDS, IndexAssessment, assess_indexes,
                                        drop_statement, index_busy)
from eval_harness.store.migrate import MigrationError, pending_migrations


def _live_corpus(conn: psycopg.Connection, settings: Settings, name: str) -> Corpus:
    """The corpus of live dataset ``name`` (attached, else configured); ingested or unknown
    datasets are refused with one sentence."""
    try:
        attached_known = not pending_migrations(conn, settings.schema)
    except MigrationError:
        attached_known = False
    row = dataset_row(conn, name) if attached_known else None
    cfg = settings.datasets.get(name)
    if (row is not None and row[4] != "live") or (row is None and cfg and not cfg.is_live):
        raise CliError(f"Dataset '{name}' is ingested: its indexes are the harness's own and "
                       "`eval-harness ingest` manages them; `index` is for live datasets.")
    found = [d for d in live_datasets(conn, {name: cfg} if cfg else {},
                                      attached_known=attached_known) if d.name == name]
    if not found:
        raise CliError(f"Dataset '{name}' is neither attached nor configured as live in "
                       f"config.yaml (datasets.{name}.live).")
    if found[0].corpus is None:
        raise CliError(found[0].error or f"Dataset '{name}' cannot be read.")
    return found[0].corpus


def _statements(conn: psycopg.Connection, assessment: IndexAssessment) -> list[str]:
    """What to run, in order: a failed build's INVALID leftover is dropped before its
    index is built again (nobody may hold it: that would be a build still running)."""
    statements = []
    for state in assessment.missing:
        for index in state.invalid:
            pid = index_busy(conn, index)
            if pid is not None:
                raise CliError(f"Index {index.qualified} is being built right now by another "
                               f"session (pid {pid}); wait for it to finish, then run "
                               "`eval-harness doctor` again.")
            statements.append(drop_statement(conn, index))
        statements.append(state.statement)
    return statements


def _run(conn: psycopg.Connection, statement: str, assessment: IndexAssessment) -> None:
    say(f"{statement};", flush=True)
    started = time.monotonic()
    try:
        conn.execute(statement)
    except psycopg.Error as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if exc.diag.message_detail:  # e.g. which key is duplicated
            reason += f" ({exc.diag.message_detail.rstrip('.')})"
        left = [i for s in assess_indexes(conn, assessment.corpus).sides for i in s.invalid]
        hint = (f"; it left {left[0].qualified} INVALID: {drop_statement(conn, left[0])}; or "
                "run this command again (it drops and rebuilds it)" if left else "")
        raise CliError(f"{statement} failed: {reason}{hint}.") from None
    say(f"  done in {time.monotonic() - started:.1f} s", flush=True)


def cmd_index(args, settings: Settings) -> int:
    location = locate_store(settings)
    with location.connection(autocommit=True) as conn:  # CONCURRENTLY: no transaction block
        corpus = _live_corpus(conn, settings, args.dataset)
        assessment = assess_indexes(conn, corpus)
        relation = corpus.relation_name
        kind = RELATION_KINDS.get(assessment.relkind)
        if kind is not None:
            raise CliError(f"{relation} is {kind}: create the indexes on the table(s) beneath "
                           "it; `eval-harness doctor` shows whether the search uses them.")
        if not assessment.missing:
            say(f"dataset '{args.dataset}': the embedding, text and id indexes on {relation} "
                "are in place; nothing to create")
            if corpus.tsvector is None:  # no index removes this cost: say where it is named
                say("note: with tsvector: null every keyword match is parsed again for each "
                    "query, indexes or not; `eval-harness doctor` measures what that costs "
                    "and prints the stored tsvector column that removes it (index never "
                    "alters your table)")
            return EXIT_OK
        statements = _statements(conn, assessment)
        rows = f"~{assessment.rows:,.0f} rows" if assessment.rows >= 0 else "not analysed"
        if args.dry_run:
            say(f"dataset '{args.dataset}': {relation} ({rows}) lacks "
                f"{len(assessment.missing)} index(es); would run (--dry-run: nothing done):")
            for statement in statements:
                say(f"{statement};")
            return EXIT_OK
        if not assessment.owned:
            for statement in statements:
                say(f"{statement};")
            role = conn.execute("SELECT current_user").fetchone()[0]
            raise CliError(f"Role '{role}' does not own {relation} and only its owner may index "
                           "it: run the statements above as the owner (psql), nothing was done.")
        say(f"dataset '{args.dataset}': building {len(assessment.missing)} index(es) on "
            f"{relation} ({rows}) CONCURRENTLY (the table stays readable and writable):",
            flush=True)
        conn.add_notice_handler(lambda notice: say(f"  server: {notice.message_primary}",
                                                   flush=True))
        for statement in statements:
            _run(conn, statement, assessment)
        still = assess_indexes(conn, corpus).missing
        if still:
            raise CliError(f"After the build {relation} still has no {still[0].need.wanted}: "
                           "see `eval-harness doctor`.")
    say(f"dataset '{args.dataset}': the search can now use every index it needs on "
        f"{relation}; `eval-harness doctor` shows the query plans")
    return EXIT_OK


def add_index_command(subparsers) -> None:
    index = subparsers.add_parser(
        "index", help="create the indexes a live dataset's search needs on your relation "
        "(CONCURRENTLY; the one command that writes outside the harness schema)")
    index.add_argument("--dataset", required=True, help="a live dataset (datasets.NAME.live)")
    index.add_argument("--dry-run", action="store_true",
                       help="print the CREATE INDEX statements, run nothing")
    index.set_defaults(func=cmd_index)
