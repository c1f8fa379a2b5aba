"""``eval-harness answers import FILE [--format F]`` and ``eval-harness gate``.

``gate`` exit codes, as in :mod:`eval_harness.cli`: 0 every blocking check passes (warnings
may fail), 1 a blocking check fails, 2 the gates could not run (bad config, unreachable
store, a partition outside the configured range, a crashed step, a store that went away
under the run), 130 / 143 SIGINT / SIGTERM stopped it (the answers gated are kept; see
:mod:`eval_harness.stopping`).

With ``--partition DAY`` (default: today, UTC) it gates that daily partition: the installed
``eval-harness`` runs the Dagster ``quality_gate_job`` in-process, so the run and its checks land
in the Dagster run history (:mod:`eval_harness_pipelines.gate`); the library alone
(``python -m eval_harness.cli``) evaluates the same window without Dagster.
With ``--since TIME`` it runs the same gates through the library over every answer created
since then, across days (Dagster partitions are single days), and reports the same way; the
per-answer results are shared, so neither path re-evaluates what the other stored. In a
terminal, ``--since`` shows a progress bar on stderr (answers evaluated, batch by batch).

``--junit-xml`` and ``--summary`` are written on every exit: when the gates could not run
(exit 2) they say why, so a CI job shows the reason rather than a missing report. ``gate``
loads its own settings for that reason: a bad config is one of the reasons reported.
"""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime, time
from pathlib import Path
from time import perf_counter

import psycopg

from eval_harness import stopping
from eval_harness.cli.common import EXIT_FAILED, EXIT_OK, CliError, store_lost_message
from eval_harness.cli.gate_outputs import add_publish_arguments, add_pull_command, publish_results
from eval_harness.errors import UserError
from eval_harness.escaping.terminal import say
from eval_harness.escaping.visible import visible
from eval_harness.gates.answer_formats import FORMATS as ANSWER_FORMATS
from eval_harness.judges.client.stops import StoreLost
from eval_harness.settings import Settings, load_settings
from eval_harness.store import open_store
from eval_harness.store.connection import server_failure


def cmd_answers_import(args, settings: Settings) -> int:
    from eval_harness.gates.answer_formats import detect_format, import_answers_file
    from eval_harness.gates.answers_mapping import import_refusal

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


def parse_since(text: str) -> datetime:
    """``YYYY-MM-DD`` (midnight UTC) or an ISO-8601 timestamp with a timezone."""
    try:
        return datetime.combine(date.fromisoformat(text), time(0), tzinfo=UTC)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(f"--since {text!r} is neither a date YYYY-MM-DD nor an ISO-8601 "
                         "timestamp (e.g. 2025-03-03T12:00:00Z).") from None
    if moment.tzinfo is None:
        raise CliError(f"--since {text!r} has no timezone; add one (e.g. {text}Z).")
    return moment


def _partition_day(text: str | None, settings: Settings) -> date:
    today = datetime.now(UTC).date()
    if text is None:
        return today
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise CliError(f"--partition {text!r} is not a date YYYY-MM-DD.") from None
    start = settings.quality_gates.partition_start
    if day < start:
        raise CliError(f"--partition {day} is before quality_gates.partition_start ({start}): "
                         f"gate it with --since {day}, or move partition_start back.")
    if day > today:
        raise CliError(f"--partition {day} is in the future (today is {today}, UTC).")
    return day


def run_gate_window(settings: Settings, day: date, gates):
    """Gate partition ``day`` through the library (the same gates and stored results as the
    Dagster job; ``eval-harness`` as installed runs the Dagster job instead, see
    :mod:`eval_harness_pipelines.gate`, so the run lands in the UI's history)."""
    from eval_harness.gates.answers import TimeWindow
    from eval_harness.gates.answers_mapping import answers_relation_of
    from eval_harness.gates.runner import run_quality_gates

    location = open_store(settings)
    return run_quality_gates(location, TimeWindow.day(day), gates,
                             relation=answers_relation_of(location, settings))


def cmd_gate(args, settings: Settings | None = None) -> int:
    from eval_harness.gates.report import format_gate_table

    started, clock = datetime.now(UTC), perf_counter()
    try:
        settings = settings or load_settings(args.config)
        report = gate_report(args, settings)
    except Exception as exc:  # exit 2 (or a crash): CI still gets both files, saying why
        _write_ci_error(args, _reason(exc), started, perf_counter() - clock)
        raise
    except stopping.Interrupted as exc:  # exit 130 / 143: the files say so too
        _write_ci_error(args, str(exc), started, perf_counter() - clock)
        raise
    # One report object feeds every output.
    say(report.to_json() if args.json else format_gate_table(report))
    _write_ci_outputs(report, args, started, perf_counter() - clock)
    publish_results(args, settings, report)  # --to-phoenix / --otlp: after the CI files
    return EXIT_OK if report.passed else EXIT_FAILED


def gate_report(args, settings: Settings):
    """Run the gates ``args`` ask for (``--since`` or ``--partition``); their report."""
    from eval_harness.gates.answers import TimeWindow
    from eval_harness.gates.answers_mapping import answers_relation_of
    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.runner import run_quality_gates
    from eval_harness.progress import progress_bar

    gates = configured_gates(settings)  # a configuration error stops here, exit 2
    if not gates:
        raise CliError(f"{settings.config_path or 'the default configuration'}: every quality "
                       "gate is disabled (quality_gates.gates); enable one.")
    since = parse_since(args.since) if args.since else None
    day = None if since else _partition_day(args.partition, settings)
    location = open_store(settings)  # an unreachable store stops here, exit 2
    try:
        if since is not None:
            relation = answers_relation_of(location, settings)  # a mapping: checked first
            with progress_bar("gating", unit="answer") as progress:
                return run_quality_gates(location, TimeWindow.since(since), gates,
                                         relation=relation, progress=progress)
        runner = getattr(args, "partition_runner", None) or run_gate_window
        return runner(settings, day, gates)
    except StoreLost as exc:  # the judges stopped buying at once: what was kept, the log
        raise CliError(store_lost_message(settings, exc)) from None
    except psycopg.Error as exc:  # a server that went away is said with its log's path
        lost = server_failure(settings, exc)
        raise CliError(lost or f"the quality gates failed in the store: "
                               f"{str(exc).strip().splitlines()[0]}") from None


def _reason(exc: Exception) -> str:
    """The one-line reason the gates could not run, as the command prints it: a user error's
    sentence, else the exception's type and first line."""
    if isinstance(exc, psycopg.Error):
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        return f"the store reported: {lines[0]}"
    line = (str(exc).strip().splitlines() or [""])[0]
    if isinstance(exc, UserError) and line:
        return line
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def _write_ci_outputs(report, args, started: datetime, seconds: float) -> None:
    from eval_harness.gates.ci_output import junit_xml, markdown_summary

    _write(args.junit_xml, junit_xml(report, seconds=seconds, started=started))
    _write(args.summary, markdown_summary(report))


def _write_ci_error(args, reason: str, started: datetime, seconds: float) -> None:
    from eval_harness.gates.ci_output import junit_error_xml, markdown_error_summary

    window = args.partition or (f"since {args.since}" if args.since else None)
    _write(args.junit_xml, junit_error_xml(reason, window=window, seconds=seconds,
                                           started=started))
    _write(args.summary, markdown_error_summary(reason, window=window))


def _write(path: str | None, text: str) -> None:
    from eval_harness.files import write_report

    if path:
        target = Path(path).resolve()
        write_report(target.parent, target.name, text)


def add_gate_commands(subparsers: argparse._SubParsersAction, *,
                      partition_runner=None) -> None:
    """``answers import`` and ``gate``; ``partition_runner(settings, day, gates)`` gates a
    ``--partition`` day (default: the library's :func:`run_gate_window`)."""
    answers = subparsers.add_parser("answers", help="the answers the quality gates read")
    answers_sub = answers.add_subparsers(dest="answers_command", required=True)
    imported = answers_sub.add_parser(
        "import", help="load answers from a file: the harness's JSONL, OpenInference spans "
                       "(Phoenix export, OTLP/JSON), RAGAS or DeepEval rows (idempotent by "
                       "id; a bad record imports nothing)")
    imported.add_argument("file", help="the answers file (see README, 'Answers from traces "
                                       "and eval datasets')")
    imported.add_argument("--format", choices=ANSWER_FORMATS, default=None,
                          help="the file's format (default: detected from its first record)")
    imported.set_defaults(func=cmd_answers_import)
    add_pull_command(answers_sub)

    gate = subparsers.add_parser(
        "gate", help="run the quality gates; exit 0 pass, 1 a blocking gate fails, 2 error")
    window = gate.add_mutually_exclusive_group()
    window.add_argument("--partition", metavar="YYYY-MM-DD",
                        help="the daily partition (UTC) to gate via Dagster (default: today)")
    window.add_argument("--since", metavar="TIME",
                        help="gate every answer created since TIME (YYYY-MM-DD or ISO-8601 "
                             "with timezone), across days, without Dagster")
    gate.add_argument("--json", action="store_true",
                      help="print one JSON object with every check and the failing answer ids")
    gate.add_argument("--junit-xml", metavar="FILE",
                      help="also write JUnit XML: one test case per check and day, failures "
                           "with figures; when the gates cannot run, one <error> with why")
    gate.add_argument("--summary", metavar="FILE",
                      help="also write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY); when "
                           "the gates cannot run, why")
    # gate loads the config itself, so that a bad one still writes --junit-xml / --summary
    add_publish_arguments(gate)
    gate.set_defaults(func=cmd_gate, loads_own_settings=True, partition_runner=partition_runner)
