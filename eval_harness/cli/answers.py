"""``eval-harness answers import FILE [--format F]`` and ``eval-harness answers pull --phoenix
URL --project NAME [--since TIME]``: the answers the quality gates read.

``answers import`` reads the harness's JSONL, OpenInference spans (a Phoenix export,
OTLP/JSON), RAGAS or DeepEval rows (:mod:`eval_harness.gates.answer_formats`) and merges the
answers by id; a bad record imports nothing.

``answers pull`` reads a Phoenix project's traces (:mod:`eval_harness.gates.phoenix`) and
imports one answer per trace like ``answers import`` of a span file: every trace is checked
first (a trace that makes no answer is named with why, and nothing is imported), then one
transaction merges the answers by trace id, so pulling again changes nothing. Phoenix
unreachable, an unknown project: one sentence, exit 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import psycopg

from eval_harness.cli.common import CliError, parse_since
from eval_harness.errors import EXIT_OK
from eval_harness.escaping.terminal import say
from eval_harness.escaping.visible import visible
from eval_harness.gates.answer_formats import FORMATS as ANSWER_FORMATS
from eval_harness.gates.answer_formats import detect_format, import_answers_file
from eval_harness.gates.answers import AnswersRelationError, import_answers
from eval_harness.gates.answers_mapping import import_refusal
from eval_harness.gates.phoenix import DEFAULT_URL as PHOENIX_URL
from eval_harness.gates.phoenix import PhoenixError, pull_traced_answers
from eval_harness.settings import Settings
from eval_harness.store import open_store

_TRACES_NAMED = 3


def cmd_answers_import(args, settings: Settings) -> int:
    refusal = import_refusal(settings)
    if refusal is not None:
        raise CliError(refusal)
    relation = settings.quality_gates.answers_relation
    fmt = args.format
    if fmt is None:  # said before reading on, so a bad record is read against it
        guess = detect_format(Path(args.file))
        say(f"format: {guess.format} (detected: {visible(guess.reason)})", flush=True)
        fmt = guess.format
    location = open_store(settings)
    notes: list[str] = []  # what the reader skipped, said once the import is in
    try:
        with location.connection() as conn:
            report, _ = import_answers_file(conn, Path(args.file), fmt=fmt, relation=relation,
                                            notes=notes)
    except psycopg.Error as exc:
        raise CliError(f"importing {args.file} failed in the store: "
                         f"{str(exc).strip().splitlines()[0]}") from None
    for note in notes:
        say(visible(note))
    say(f"answers from {visible(report.path)} into '{relation}': {report}")
    return EXIT_OK


def cmd_answers_pull(args, settings: Settings) -> int:
    since = parse_since(args.since) if args.since else None
    source = f"Phoenix {args.phoenix}, project '{args.project}'"
    try:
        answers, problems = pull_traced_answers(args.phoenix, args.project, since=since)
    except PhoenixError as exc:
        raise CliError(str(exc)) from None
    if problems:
        named = "; ".join(str(p) for p in problems[:_TRACES_NAMED])
        more = len(problems) - _TRACES_NAMED
        raise CliError(f"{source}: {len(problems)} trace(s) make no answer, nothing imported: "
                       f"{named}" + (f"; and {more} more" if more > 0 else "") + ".")
    if not answers:
        window = f" since {since.isoformat()}" if since else ""
        say(f"{source}: no traces{window}; nothing to import.")
        return EXIT_OK
    relation = settings.quality_gates.answers_relation
    try:
        with open_store(settings).connection() as conn:
            report = import_answers(conn, Path(source), relation=relation, records=answers)
    except AnswersRelationError as exc:
        raise CliError(str(exc)) from None
    except psycopg.Error as exc:
        raise CliError(f"importing from {source} failed in the store: "
                       f"{str(exc).strip().splitlines()[0]}") from None
    say(f"answers from {source} into '{relation}': {report}")
    return EXIT_OK


def add_answers_commands(subparsers: argparse._SubParsersAction) -> None:
    """``answers import`` and ``answers pull``."""
    answers = subparsers.add_parser("answers", help="the answers the quality gates read")
    answers_sub = answers.add_subparsers(dest="answers_command", required=True)
    imported = answers_sub.add_parser(
        "import", help="load answers from a file: the harness's JSONL, OpenInference spans "
                       "(Phoenix export, OTLP/JSON), RAGAS or DeepEval rows (idempotent by "
                       "id; a bad record imports nothing)")
    imported.add_argument("file", help="the answers file (see docs/guides/traces.md, "
                                       "'Answers from traces and eval datasets')")
    imported.add_argument("--format", choices=ANSWER_FORMATS, default=None,
                          help="the file's format (default: detected from its first record)")
    imported.set_defaults(func=cmd_answers_import)

    pull = answers_sub.add_parser(
        "pull", help="load answers from a running Phoenix project's traces (idempotent by "
                     "trace id; a bad trace imports nothing)")
    pull.add_argument("--phoenix", required=True, metavar="URL",
                      help=f"Phoenix's base URL (e.g. {PHOENIX_URL})")
    pull.add_argument("--project", required=True, metavar="NAME",
                      help="the Phoenix project whose traces hold the answers")
    pull.add_argument("--since", metavar="TIME",
                      help="only traces whose root span started since TIME (YYYY-MM-DD or "
                           "ISO-8601 with timezone)")
    pull.set_defaults(func=cmd_answers_pull)
