"""``eval-harness answers pull --phoenix URL --project NAME [--since TIME]`` and the gate's
result outputs ``gate --to-phoenix [URL]`` and ``gate --otlp FILE|URL``.

``answers pull`` reads a Phoenix project's traces (:mod:`eval_harness.gates.phoenix`) and
imports one answer per trace like ``answers import`` of a span file: every trace is checked
first (a trace that makes no answer is named with why, and nothing is imported), then one
transaction merges the answers by trace id, so pulling again changes nothing. Phoenix
unreachable, an unknown project: one sentence, exit 2.

After the gate report (and its CI files), ``--to-phoenix`` posts every current result of the
window's answers as span annotations and ``--otlp`` writes them as ``gen_ai.evaluation.result``
events (:mod:`eval_harness.gates.outcomes`). Either failing is one sentence and exit 2: the
gate results themselves are stored, and running the same command again sends them again.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import psycopg

from eval_harness.cli.common import EXIT_OK, CliError
from eval_harness.escaping.terminal import say
from eval_harness.settings import Settings
from eval_harness.store import open_store

PHOENIX_DEFAULT_URL = "http://localhost:6006"
_TRACES_NAMED = 3


def cmd_answers_pull(args, settings: Settings) -> int:
    from eval_harness.cli.gate import parse_since
    from eval_harness.gates.answers import AnswersRelationError, import_answers
    from eval_harness.gates.phoenix import PhoenixError, pull_traced_answers

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


def publish_results(args, settings: Settings, report) -> None:
    """Send the window's gate results where ``--to-phoenix`` / ``--otlp`` ask."""
    to_phoenix, otlp = getattr(args, "to_phoenix", None), getattr(args, "otlp", None)
    if not (to_phoenix or otlp):
        return
    from eval_harness.gates.outcomes import window_outcomes
    from eval_harness.gates.registry import configured_gates

    outcomes = window_outcomes(open_store(settings), report.window, configured_gates(settings),
                               relation=settings.quality_gates.answers_relation)
    if to_phoenix:
        _to_phoenix(to_phoenix, outcomes)
    if otlp:
        from eval_harness.gates.otel_events import OtlpError, emit_evaluation_events

        try:
            sent = emit_evaluation_events(otlp, outcomes)
        except OtlpError as exc:
            raise CliError(str(exc)) from None
        say(f"{sent} gen_ai.evaluation.result events written to {otlp}.")


def _to_phoenix(url: str, outcomes) -> None:
    from eval_harness.gates.phoenix import PhoenixError, post_annotations

    try:
        posted, unlinked = post_annotations(url, outcomes)
    except PhoenixError as exc:
        raise CliError(str(exc)) from None
    say(f"{posted} gate results posted to Phoenix at {url} as span annotations.")
    if unlinked:
        say(f"{unlinked} answers have no span id (not imported from a trace), so their "
            "results were not posted to Phoenix.")


def add_pull_command(answers_sub: argparse._SubParsersAction) -> None:
    pull = answers_sub.add_parser(
        "pull", help="load answers from a running Phoenix project's traces (idempotent by "
                     "trace id; a bad trace imports nothing)")
    pull.add_argument("--phoenix", required=True, metavar="URL",
                      help=f"Phoenix's base URL (e.g. {PHOENIX_DEFAULT_URL})")
    pull.add_argument("--project", required=True, metavar="NAME",
                      help="the Phoenix project whose traces hold the answers")
    pull.add_argument("--since", metavar="TIME",
                      help="only traces whose root span started since TIME (YYYY-MM-DD or "
                           "ISO-8601 with timezone)")
    pull.set_defaults(func=cmd_answers_pull)


def add_publish_arguments(gate: argparse.ArgumentParser) -> None:
    gate.add_argument("--to-phoenix", nargs="?", const=PHOENIX_DEFAULT_URL, metavar="URL",
                      help="post each result as a span annotation on the answer's span in "
                           f"Phoenix (default URL {PHOENIX_DEFAULT_URL})")
    gate.add_argument("--otlp", metavar="FILE|URL",
                      help="write each result as an OpenTelemetry gen_ai.evaluation.result "
                           "event: OTLP/JSON lines to FILE, or OTLP/HTTP to a collector URL")
