"""``eval-harness gate``: the quality gates over a window of answers, and where their results go.

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

After the gate report (and its CI files), ``--to-phoenix`` posts every current result of the
window's answers as span annotations and ``--otlp`` writes them as ``gen_ai.evaluation.result``
events (:mod:`eval_harness.gates.outcomes`). Either failing is one sentence and exit 2: the
gate results themselves are stored, and running the same command again sends them again.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from time import perf_counter

import psycopg

from eval_harness import stopping
from eval_harness.cli.common import CliError, parse_since, store_lost_message
from eval_harness.errors import EXIT_FAILED, EXIT_OK, UserError
from eval_harness.escaping.terminal import say
from eval_harness.escaping.visible import visible
from eval_harness.files import write_report
from eval_harness.gates.answers_mapping import answers_relation_of
from eval_harness.gates.otel_events import OtlpError, emit_evaluation_events
from eval_harness.gates.outcomes import window_outcomes
from eval_harness.gates.phoenix import DEFAULT_URL as PHOENIX_URL
from eval_harness.gates.phoenix import PhoenixError, post_annotations
from eval_harness.gates.window import TimeWindow
from eval_harness.judges.client.stops import StoreLost
from eval_harness.progress import progress_bar
from eval_harness.settings import Settings, load_settings
from eval_harness.store import open_store
from eval_harness.store.connection import server_failure

# Only this command needs the gate runner, its report and the CI files (they import
# scipy.stats, for Wilson intervals: seconds at start-up) and the gates' registry (it brings
# the judge layer behind the LLM gates): they are imported where the command runs.


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
    from eval_harness.gates.runner import run_quality_gates  # heavy: see the imports

    location = open_store(settings)
    return run_quality_gates(location, TimeWindow.day(day), gates,
                             relation=answers_relation_of(location, settings))


def cmd_gate(args, settings: Settings | None = None) -> int:
    from eval_harness.gates.report import format_gate_table  # heavy: see the imports

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
    if args.record is not None:
        _record(args.record, settings, report)
    _publish_results(args, settings, report)  # --to-phoenix / --otlp: after the CI files
    return EXIT_OK if report.passed else EXIT_FAILED


def gate_report(args, settings: Settings):
    """Run the gates ``args`` ask for (``--since`` or ``--partition``); their report."""
    from eval_harness.gates.registry import configured_gates  # heavy: see the imports
    from eval_harness.gates.runner import run_quality_gates

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
    from eval_harness.gates.ci_output import junit_xml, markdown_summary  # heavy: see the imports

    _write(args.junit_xml, junit_xml(report, seconds=seconds, started=started))
    _write(args.summary, markdown_summary(report))


def _write_ci_error(args, reason: str, started: datetime, seconds: float) -> None:
    from eval_harness.gates.ci_output import (  # heavy: see the imports
        junit_error_xml,
        markdown_error_summary,
    )

    window = args.partition or (f"since {args.since}" if args.since else None)
    _write(args.junit_xml, junit_error_xml(reason, window=window, seconds=seconds,
                                           started=started))
    _write(args.summary, markdown_error_summary(reason, window=window))


def _write(path: str | None, text: str) -> None:
    if path:
        target = Path(path).resolve()
        write_report(target.parent, target.name, text)


def add_gate_commands(subparsers: argparse._SubParsersAction, *,
                      partition_runner=None) -> None:
    """``gate``; ``partition_runner(settings, day, gates)`` gates a ``--partition`` day
    (default: the library's :func:`run_gate_window`)."""
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
    gate.add_argument("--record", metavar="NAME",
                      help="also store every gate's score per answer of the window as record "
                           "NAME for `compare` (again: the newest wins, earlier ones kept)")
    # gate loads the config itself, so that a bad one still writes --junit-xml / --summary
    _add_publish_arguments(gate)
    gate.set_defaults(func=cmd_gate, loads_own_settings=True, partition_runner=partition_runner)


def _record(name: str, settings: Settings, report) -> None:
    """``--record NAME``: every gate's current score on the window's answers, for `compare`."""
    from eval_harness.comparison.records import record_gates  # heavy: see the imports
    from eval_harness.gates.registry import configured_gates

    location = open_store(settings)
    relation = answers_relation_of(location, settings)
    with location.connection() as conn:
        stored = record_gates(conn, name, relation=relation, window=report.window,
                              gates=configured_gates(settings), root=settings.root)
        conn.commit()
    say(visible(stored.describe()), file=sys.stderr)


def _publish_results(args, settings: Settings, report) -> None:
    """Send the window's gate results where ``--to-phoenix`` / ``--otlp`` ask."""
    to_phoenix, otlp = getattr(args, "to_phoenix", None), getattr(args, "otlp", None)
    if not (to_phoenix or otlp):
        return
    from eval_harness.gates.registry import configured_gates  # heavy: see the imports

    outcomes = window_outcomes(open_store(settings), report.window, configured_gates(settings),
                               relation=settings.quality_gates.answers_relation)
    if to_phoenix:
        _to_phoenix(to_phoenix, outcomes)
    if otlp:
        try:
            sent = emit_evaluation_events(otlp, outcomes)
        except OtlpError as exc:
            raise CliError(str(exc)) from None
        say(f"{sent} gen_ai.evaluation.result events written to {otlp}.")


def _to_phoenix(url: str, outcomes) -> None:
    try:
        posted, unlinked = post_annotations(url, outcomes)
    except PhoenixError as exc:
        raise CliError(str(exc)) from None
    say(f"{posted} gate results posted to Phoenix at {url} as span annotations.")
    if unlinked:
        say(f"{unlinked} answers have no span id (not imported from a trace), so their "
            "results were not posted to Phoenix.")


def _add_publish_arguments(gate: argparse.ArgumentParser) -> None:
    gate.add_argument("--to-phoenix", nargs="?", const=PHOENIX_URL, metavar="URL",
                      help="post each result as a span annotation on the answer's span in "
                           f"Phoenix (default URL {PHOENIX_URL})")
    gate.add_argument("--otlp", metavar="FILE|URL",
                      help="write each result as an OpenTelemetry gen_ai.evaluation.result "
                           "event: OTLP/JSON lines to FILE, or OTLP/HTTP to a collector URL")
