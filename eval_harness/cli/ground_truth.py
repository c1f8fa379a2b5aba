"""``eval-harness ground-truth generate|from-answers``: ground truth for a dataset without
any (:mod:`eval_harness.query_sources`).

Exit codes as in :mod:`eval_harness.cli`: 0 when the queries are stored (or were already), 2
when they cannot be (unknown dataset, no answers, a bad option).
"""

from __future__ import annotations

import argparse
import json
import sys

from eval_harness import stopping
from eval_harness.errors import EXIT_OK
from eval_harness.escaping.terminal import say
from eval_harness.escaping.visible import visible
from eval_harness.settings import Settings
from eval_harness.store import open_store


def cmd_generate(args, settings: Settings) -> int:
    from eval_harness.query_sources.generate import estimate_generation, generate_queries

    dataset = args.dataset or settings.default_dataset
    if args.dry_run:
        with open_store(settings, read_only=True).connection() as conn:
            estimate = estimate_generation(conn, settings, dataset, n=args.queries,
                                           seed=args.seed)
        say(json.dumps(estimate.to_dict()) if args.json else estimate.line())
        return EXIT_OK
    with open_store(settings).connection() as conn:
        try:
            report = generate_queries(conn, settings, dataset, n=args.queries, seed=args.seed)
        except stopping.Interrupted as exc:
            exc.kept = (f"the generated queries of '{dataset}' stored before the stop are kept "
                        "(each batch is stored as it ends); rerun the command for the rest")
            raise
    for notice in report.notices:
        say(f"eval-harness: notice: {visible(notice)}", file=sys.stderr)
    if args.json:
        say(json.dumps(report.to_dict(), ensure_ascii=False))
        return EXIT_OK
    shown = (f"; the source document is in the top 5 for {report.source_in_top_5:.0%} of its "
             "answerable generated queries" if report.source_in_top_5 is not None else "")
    say(f"generated queries of '{dataset}' (writer {report.writer}, critic {report.critic}): "
        f"{report.new} new, {report.already} stored before, {len(report.dropped)} dropped by "
        f"the critic or as repeats{shown}")
    for query in report.queries:
        say(f"  {query.kind:<12} {visible(query.source_document):<12} {visible(query.text)}")
    if report.new + report.already < args.queries and not report.documents_left:
        say(f"only {report.new + report.already} of the {args.queries} queries asked for: "
            "every document of the corpus was tried")
    if report.new:
        say(f"next: `eval-harness judge --dataset {dataset}` labels their pools, then "
            f"`eval-harness calibrate --dataset {dataset} --labels judges`")
    return EXIT_OK


def cmd_from_answers(args, settings: Settings) -> int:
    from eval_harness.query_sources.users_queries import queries_from_answers

    dataset = args.dataset or settings.default_dataset
    with open_store(settings).connection() as conn:
        try:
            report = queries_from_answers(conn, settings, dataset, n=args.queries,
                                          seed=args.seed)
        except stopping.Interrupted as exc:
            exc.kept = (f"the sample of users' queries of '{dataset}' is stored in one "
                        "transaction: all of it if it was committed before the stop, else "
                        "none; a rerun stores only what is missing")
            raise
    for notice in report.notices:
        say(f"eval-harness: notice: {visible(notice)}", file=sys.stderr)
    if args.json:
        say(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        say(visible(report.line()))
    return EXIT_OK


def add_ground_truth_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register ``ground-truth generate`` and ``ground-truth from-answers``."""
    parser = subparsers.add_parser(
        "ground-truth", help="ground truth for a dataset without any: queries written from its "
        "documents, or sampled from the queries its users asked")
    actions = parser.add_subparsers(dest="ground_truth_command", required=True)
    generate = actions.add_parser(
        "generate", help="write queries from the corpus's documents (an LLM through the "
        "judges' pipeline, the offline writer without its key), checked by a critic")
    generate.add_argument("--dataset", help="dataset in the store (default: default_dataset)")
    generate.add_argument("--queries", type=int, required=True, metavar="N",
                          help="generated queries the dataset should have (a rerun adds none)")
    generate.add_argument("--seed", type=int, default=0, help="seed of the documents' order "
                          "(default 0)")
    generate.add_argument("--dry-run", action="store_true", help="price the calls, send and "
                          "store nothing")
    generate.add_argument("--json", action="store_true")
    generate.set_defaults(func=cmd_generate)
    answers = actions.add_parser(
        "from-answers", help="sample distinct queries users asked from the answers the "
        "harness reads (stratified by day; personal data skipped)")
    answers.add_argument("--dataset", help="dataset in the store (default: default_dataset)")
    answers.add_argument("--queries", type=int, required=True, metavar="N",
                         help="distinct queries to sample")
    answers.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    answers.add_argument("--json", action="store_true")
    answers.set_defaults(func=cmd_from_answers)
