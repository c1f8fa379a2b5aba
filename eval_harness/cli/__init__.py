"""The ``eval-harness`` command.

Exit codes: 0 success, 1 the work ran and found a failure, 2 it could not run (bad input,
bad configuration, store unreachable), 130 / 143 the user stopped it (SIGINT / SIGTERM; see
:mod:`eval_harness.stopping`: one line says what was kept). A user error
(:class:`~eval_harness.errors.UserError`) is its one sentence on stderr; any other exception is
a bug and is said as one: an "internal error" line naming the exception and the file that
holds its traceback (exit 2 too). Never a traceback on the terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import psycopg

from eval_harness import stopping
from eval_harness.cli.answers import add_answers_commands
from eval_harness.cli.calibrate import add_calibrate_command
from eval_harness.cli.common import (
    CliError,
    config_notice,
    internal_error,
    quiet_psycopg_warnings,
    store_lost_message,
)
from eval_harness.cli.compare import add_compare_command
from eval_harness.cli.doctor import add_doctor_command
from eval_harness.cli.gate import add_gate_commands
from eval_harness.cli.ground_truth import add_ground_truth_commands
from eval_harness.cli.index import add_index_command
from eval_harness.cli.judge import add_judge_command
from eval_harness.cli.review import add_review_commands
from eval_harness.comparison.records import record_retrieval
from eval_harness.datasets.embeddings import EmbedderUnavailable, embedder_factory
from eval_harness.datasets.ground_truth import stored_query_embedding
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.datasets.prepare import (
    dataset_embedder_factory,
    describe_demo_store,
    missing_dataset_message,
    prepare_dataset,
)
from eval_harness.errors import EXIT_ERROR, EXIT_OK, UserError
from eval_harness.escaping.terminal import say, say_error
from eval_harness.escaping.visible import visible
from eval_harness.judges.client.notice_scope import said_once_per_command
from eval_harness.judges.client.stops import StoreLost
from eval_harness.progress import progress_bar
from eval_harness.retrieval.hybrid import (
    MAX_CANDIDATE_DEPTH,
    UnknownDataset,
    dataset_info,
    hybrid_search,
)
from eval_harness.retrieval.report import configured_retrieval_report, format_report
from eval_harness.settings import Settings, load_settings
from eval_harness.store import StoreUnavailable, locate_store, migrate, open_store
from eval_harness.store.catalog import privilege_refusal
from eval_harness.store.connection import redact_conninfo, server_failure


def cmd_migrate(args, settings: Settings) -> int:
    location = locate_store(settings)
    say(f"store: {location.description}")
    with location.connection() as conn:
        applied = migrate(conn)
    say(f"applied: {', '.join(applied)}" if applied else "schema is up to date")
    return EXIT_OK


def cmd_ingest(args, settings: Settings) -> int:
    configured = settings.datasets.get(args.name)
    if configured is not None and configured.is_live:
        raise CliError(f"dataset '{args.name}' is configured as live in config.yaml (read in "
                       f"place from {configured.live.corpus.relation}), so it is never "
                       f"ingested: run `eval-harness attach --dataset {args.name}`, or ingest "
                       "the folder under another --name.")
    location = open_store(settings)
    say(f"store: {location.description}")
    try:
        with location.connection() as conn, progress_bar("embedding", unit="text") as progress:
            report = ingest_beir(conn, Path(args.path), name=args.name, language=args.language,
                                 split=args.split, embedder_factory=embedder_factory(settings),
                                 embeddings=args.embeddings, progress=progress)
    except stopping.Interrupted as exc:  # the ingest's one transaction was rolled back
        exc.kept = (f"nothing of dataset '{args.name}' was stored (an ingest stores the "
                    "whole folder at once, or nothing)")
        raise
    say(f"dataset '{report.dataset}': documents {report.documents}; "
        f"queries {report.queries}; embeddings {report.embeddings}")
    if report.skipped_queries:
        say(f"{report.skipped_queries} queries of the split had no relevant document "
            "and were left out")
    if report.empty_documents_note:
        say(report.empty_documents_note)
    return EXIT_OK


def cmd_attach(args, settings: Settings) -> int:
    cfg = settings.dataset(args.dataset)
    if not cfg.is_live:
        raise CliError(f"dataset '{cfg.name}' is not live (datasets.{cfg.name} has a 'path'): "
                       f"ingest it with `eval-harness ingest {cfg.path} --name {cfg.name}`; "
                       f"attach reads a 'live' mapping onto your own tables.")
    location = open_store(settings)
    say(f"store: {location.description}")
    with location.connection() as conn, progress_bar("embedding", unit="query") as progress:
        prepared = prepare_dataset(conn, settings, cfg.name, progress=progress)
    if prepared.demo is not None:
        say(describe_demo_store(prepared.demo))
    report = prepared.attach
    say(str(report))
    for notice in report.notices:
        say(notice)
    return EXIT_OK


def _query_embedding(conn, settings: Settings, dataset: str, text: str, semantic_weight: float):
    """The stored embedding when ``text`` is a ground-truth query, else one from an embedder
    (a configured live dataset's own, ``local:``/``openai:``)."""
    row = stored_query_embedding(conn, dataset, text)
    if row is not None:
        return row[0]
    if semantic_weight == 0:
        return None
    model = dataset_info(conn, dataset).embedding_model
    cfg = settings.datasets.get(dataset)
    factory = (dataset_embedder_factory(settings, cfg) if cfg is not None and cfg.embedder
               else embedder_factory(settings, model))
    try:
        embedder = factory()
    except EmbedderUnavailable as exc:
        raise CliError(
            f"{exc} (or search with --semantic-weight 0 for keyword-only results)") from exc
    return embedder.embed([text])[0]


def _search_depth(args, settings: Settings) -> int:
    """The candidate depth ``search`` uses; a bad ``--k`` or ``--candidate-depth`` stops it."""
    if args.k < 1:
        raise CliError(f"--k must be a positive integer, got {args.k}.")
    if args.candidate_depth is None:
        return settings.weights_for(args.dataset).candidate_depth
    if not 1 <= args.candidate_depth <= MAX_CANDIDATE_DEPTH:
        raise CliError(f"--candidate-depth must be between 1 and {MAX_CANDIDATE_DEPTH}, "
                       f"got {args.candidate_depth}.")
    return args.candidate_depth


def _depth_notice(k: int, depth: int, *, semantic: bool) -> str | None:
    """One line when ``k`` asks for more than the candidates can give, else None."""
    if k <= depth:
        return None
    ranked = (f"the {depth} nearest documents and the {depth} best keyword matches are ranked, "
              f"so at most {2 * depth}" if semantic else
              f"the {depth} best keyword matches are ranked, so at most {depth}")
    return (f"eval-harness: notice: --k {k} is more than the candidate depth {depth}: only "
            f"{ranked} results can come back; raise the depth with --candidate-depth (up to "
            f"{MAX_CANDIDATE_DEPTH}) or hybrid_search.candidate_depth.")


def cmd_search(args, settings: Settings) -> int:
    depth = _search_depth(args, settings)
    weights = settings.weights_for(args.dataset)  # the dataset's calibrated ones, else global
    weight = weights.semantic if args.semantic_weight is None else args.semantic_weight
    keyword = args.keyword_weight
    if keyword is None:
        keyword = weights.keyword if args.semantic_weight is None else 1.0 - weight
    location = open_store(settings, read_only=True)
    with location.connection() as conn:
        embedding = _query_embedding(conn, settings, args.dataset, args.text, weight)
        hits = hybrid_search(conn, args.dataset, query_text=args.text, query_embedding=embedding,
                             k=args.k, semantic_weight=weight, keyword_weight=keyword,
                             candidate_depth=depth)
    notice = _depth_notice(args.k, depth, semantic=embedding is not None)
    if notice:
        say(notice, file=sys.stderr)
    if args.json:
        say(json.dumps({"dataset": args.dataset, "query": args.text, "semantic_weight": weight,
                          "keyword_weight": keyword,
                          "hits": [{"rank": i, "id": h.id, "external_id": h.external_id,
                                    "score": h.score, "semantic": h.semantic,
                                    "keyword": h.keyword, "content": h.content}
                                   for i, h in enumerate(hits, start=1)]}, ensure_ascii=False))
        return EXIT_OK
    say(f"{'rank':>4}  {'score':>6}  {'sem':>6}  {'kw':>6}  {'doc':<12} text")
    for i, h in enumerate(hits, start=1):
        snippet = " ".join(h.content.split())[:70]
        say(f"{i:>4}  {h.score:6.3f}  {h.semantic:6.3f}  {h.keyword:6.3f}  "
            f"{visible(h.external_id):<12} {visible(snippet)}")
    if not hits:
        say("no results")
    return EXIT_OK


def cmd_report(args, settings: Settings) -> int:
    # the run report imports pandas, duckdb and scipy.stats: seconds only this command needs
    from eval_harness.reporting.run_report import build_run_report

    dataset = args.dataset or settings.default_dataset
    stored = None
    location = open_store(settings, read_only=args.record is None)
    with location.connection() as conn:
        report = configured_retrieval_report(conn, settings, dataset)
        if args.record is not None:  # per query, for `compare` (comparison.records)
            stored = record_retrieval(conn, args.record, report, root=settings.root)
        conn.commit()  # the candidate cache's new entries (and the record): what it writes
        # the run report `run` writes, from what the store holds, with these figures first
        written = build_run_report(conn, settings, run_id=None, dataset=dataset,
                                   retrieval=report)
    if args.json:
        say(json.dumps(dict(report.to_dict(), report_html=str(written.html_path),
                            report_markdown=str(written.markdown_path))))
    else:
        say(format_report(report))
        say(f"report: {_shown_path(written.html_path)} and .md, then latest: "
            f"{_shown_path(written.latest_html_path)}")
    if stored is not None:
        say(visible(stored.describe()), file=sys.stderr)
    return EXIT_OK


def _shown_path(path: Path) -> str:
    """``path`` relative to the current directory when it is under it, else absolute."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def build_parser(*, extend: Callable[[argparse._SubParsersAction], None] | None = None,
                 partition_runner=None) -> argparse.ArgumentParser:
    """The library's commands; ``extend(subparsers)`` adds more (the Dagster layer adds
    ``run``) and ``partition_runner`` gates ``gate --partition`` days (see
    :func:`eval_harness.cli.gate.add_gate_commands`)."""
    parser = argparse.ArgumentParser(prog="eval-harness", description=(
        "Offline evaluation and calibration harness for RAG systems on Postgres + pgvector."))
    parser.add_argument("--config", help="config.yaml to use (default: ./config.yaml, or "
                        "EVAL_HARNESS_CONFIG)")
    sub = parser.add_subparsers(dest="command", required=True)
    if extend is not None:
        extend(sub)

    migrate = sub.add_parser("migrate", help="apply pending schema migrations")
    migrate.set_defaults(func=cmd_migrate)

    ingest = sub.add_parser("ingest", help="load a BEIR folder into the store")
    ingest.add_argument("path")
    ingest.add_argument("--name", required=True, help="dataset name in the store")
    ingest.add_argument("--language", default="english",
                        help="text-search language: english (default), german, simple, ...")
    ingest.add_argument("--split", default="test", help="qrels split (default: test)")
    ingest.add_argument("--embeddings", help="precomputed embeddings.npz kept outside the folder")
    ingest.set_defaults(func=cmd_ingest)

    attach = sub.add_parser("attach", help="check a live dataset's mapping onto your own "
                            "tables and attach it (mirror its ground truth, embed its queries)")
    attach.add_argument("--dataset", required=True, help="a live dataset of config.yaml")
    attach.set_defaults(func=cmd_attach)

    search = sub.add_parser("search", help="hybrid search one query")
    search.add_argument("text")
    search.add_argument("--dataset", required=True)
    search.add_argument("--k", type=int, default=5, help="results to show (default: 5)")
    search.add_argument("--semantic-weight", type=float)
    search.add_argument("--keyword-weight", type=float,
                        help="default: 1 - semantic weight")
    search.add_argument("--candidate-depth", type=int,
                        help="top-N of each retriever that are ranked (default: "
                        "hybrid_search.candidate_depth)")
    search.add_argument("--json", action="store_true")
    search.set_defaults(func=cmd_search)

    report = sub.add_parser("report", help="retrieval metrics at the configured weights")
    report.add_argument("--dataset")
    report.add_argument("--json", action="store_true")
    report.add_argument("--record", metavar="NAME",
                        help="also store each query's metrics as record NAME for `compare` "
                             "(again: the newest wins, earlier ones kept)")
    report.set_defaults(func=cmd_report)
    add_compare_command(sub)
    add_review_commands(sub)
    add_calibrate_command(sub)
    add_judge_command(sub)
    add_ground_truth_commands(sub)
    add_answers_commands(sub)
    add_gate_commands(sub, partition_runner=partition_runner)
    add_doctor_command(sub)
    add_index_command(sub)
    return parser


def main(argv: list[str] | None = None, *, parser: argparse.ArgumentParser | None = None) -> int:
    """Run one command; exit code 0 / 1 (ran, found a failure) / 2 (could not run) / 130 or
    143 (stopped by SIGINT or SIGTERM)."""
    args = (parser or build_parser()).parse_args(argv)
    quiet_psycopg_warnings()
    with stopping.handle_stop_signals():
        code = _run_command(args)
    if argv is None and code in stopping.STOPPED_EXIT_CODES:
        stopping.end_process(code)  # a stopped command's own process ends here, at once
    return code


def _run_command(args: argparse.Namespace) -> int:
    settings = None
    try:
        # doctor loads the config itself: a bad one is one of its FAIL lines
        own = getattr(args, "loads_own_settings", False)
        settings = None if own else load_settings(args.config)
        notice = None if settings is None else config_notice(settings)
        if notice:
            say(notice, file=sys.stderr, flush=True)
        with said_once_per_command():  # one command, each fallback notice once
            return args.func(args, settings)
    except stopping.Interrupted as exc:
        say(f"eval-harness: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:  # raised by Python's own handler: SIGINT
        say(f"eval-harness: {stopping.interrupted_line(exc)}", file=sys.stderr)
        return 130
    except StoreLost as exc:  # the store went away under paid work, which stopped at once
        say_error(store_lost_message(settings, exc))
        return EXIT_ERROR
    except UserError as exc:  # one the user can fix (eval_harness.errors): its one sentence
        say_error(_missing_dataset(exc, settings) or str(exc))
        return EXIT_ERROR
    except psycopg.Error as exc:  # the store refused or lost the work: one sentence, no trace
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        crashed = server_failure(settings, exc) if settings is not None else None
        message = crashed or _privilege_refusal(exc, settings) or \
            "the store reported: " + lines[0]
        say_error(redact_conninfo(message))
        return EXIT_ERROR
    except Exception as exc:  # a bug, said as one; not SystemExit: argparse's exit codes stay
        say_error(internal_error(exc))
        return EXIT_ERROR


def _privilege_refusal(exc: psycopg.Error, settings: Settings | None) -> str | None:
    """For "permission denied": the role, the object and the GRANT it lacks, read on a new
    connection of the same role (:func:`eval_harness.store.catalog.privilege_refusal`);
    None for any other error, or when that cannot be read."""
    if settings is None or not isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return None
    try:
        with locate_store(settings).connection() as conn:
            return privilege_refusal(conn, str(exc), settings.schema)
    except (psycopg.Error, StoreUnavailable):
        return None


def _missing_dataset(exc: Exception, settings: Settings | None) -> str | None:
    """What to run for a configured dataset the store lacks (attach or ingest), else None."""
    name = getattr(exc, "dataset", None)
    if not isinstance(exc, UnknownDataset) or settings is None or name is None:
        return None
    return missing_dataset_message(settings, name)


if __name__ == "__main__":
    sys.exit(main())
