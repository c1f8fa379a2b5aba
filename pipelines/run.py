"""``eval-harness run``: the whole graph in-process, then the report.

Steps, each a Dagster run in the project's DAGSTER_HOME (so the UI shows them in its run
history): on the embedded store the demo RAG store is laid out once when the dataset maps
onto ``store.demo_rag_schema`` (:mod:`eval_harness.datasets.prepare`); ``nightly_job``
(ingest, or attach a live dataset; retrieval report, dual judges, agreement with its kappa
check, calibration with the P@5 verdict); the configured answers file is imported; then
``quality_gate_job`` for every day that file covers (or the latest day with answers); then
``report_job``. A failed check does not stop the later steps, and neither does a failed
step: what ran is kept and the report says what is missing. A stop signal (SIGINT, SIGTERM)
does stop them: the step running stops as its command would (:mod:`eval_harness.stopping`),
its Dagster run ends as canceled (:mod:`eval_harness_pipelines.in_process`), no later step
starts, and one line says where it stopped and what is stored. Exit code:
0 when every step ran (checks are reported, and with ``--strict`` a failed blocking check
exits 1), 2 when a step could not run, 130 / 143 when stopped by SIGINT / SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path

from eval_harness import stopping
from eval_harness.errors import EXIT_FAILED, EXIT_OK, UserError
from eval_harness.escaping.terminal import say
from eval_harness.gates.answers import import_configured_answers
from eval_harness.gates.answers_mapping import answers_relation
from eval_harness.gates.sql import latest_answer_day, recent_answer_days
from eval_harness.settings import Settings
from eval_harness.store import StoreLocation, open_store
from eval_harness.datasets.prepare import (demo_store_wanted, describe_demo_store,
                                         prepare_demo_store, refuse_missing_demo_relations,
                                         uses_demo_schema)
from eval_harness_pipelines.dagster_home import prepare_dagster_home
from eval_harness_pipelines.gate import EXPECTED_CHECK_FAILURE, root_cause
from eval_harness_pipelines.in_process import execute_job

# Dagster and the Dagster definitions take seconds to import and only `run` needs them, while
# the console command imports this module for every command: they are imported where it runs.

DEFINITIONS_MODULE = "eval_harness_pipelines.definitions"  # its `defs` is the code location
# Answers gated in place (quality_gates.answers): the main job gates the days with answers
# in the week up to the latest one (one quality_gate_job run per day).
RECENT_ANSWER_DAYS = 7


@dataclass
class CheckLine:
    name: str
    partition: str | None
    passed: bool
    blocking: bool  # failed with ERROR severity (a warning check fails with WARN)
    description: str

    def format(self) -> str:
        status = "PASS" if self.passed else ("FAIL" if self.blocking else "WARN")
        where = f" [{self.partition}]" if self.partition else ""
        return f"  {status:<4}  {self.name}{where}: {self.description}"


@dataclass
class RunOutcome:
    """What the steps of one ``eval-harness run`` did."""

    run_ids: list[str] = field(default_factory=list)
    checks: list[CheckLine] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # steps that could not run

    @property
    def blocking_failures(self) -> list[CheckLine]:
        return [c for c in self.checks if not c.passed and c.blocking]


def add_run_command(sub) -> None:
    run = sub.add_parser(
        "run", help="run the whole pipeline (ingest, judges, agreement, calibration, quality "
                    "gates) via Dagster and write the report")
    run.add_argument("--dataset", help="dataset from config.yaml (default: default_dataset)")
    run.add_argument("--strict", action="store_true",
                     help="exit 1 when a blocking check fails (default: report it, exit 0)")
    run.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    step = ["preparing the run"]  # the step running, for the line a stop signal ends with
    try:
        return _run_steps(args, settings, step)
    except stopping.Interrupted as exc:
        exc.kept = (f"stopped during {step[0]}: {exc.kept or 'what finished is kept'}; the "
                    "later steps did not run")
        raise


def _run_steps(args: argparse.Namespace, settings: Settings, step: list[str]) -> int:
    prepare_dagster_home(settings)
    # Dagster and its definitions: only where it runs (see the imports)
    from eval_harness_pipelines.assets.quality_gates import QUALITY_GATE_JOB
    from eval_harness_pipelines.assets.reporting import REPORT_JOB
    from eval_harness_pipelines.definitions import build_defs
    from eval_harness_pipelines.jobs import NIGHTLY_JOB

    defs = build_defs(settings)  # this command's config, whatever the environment says

    dataset = args.dataset or settings.default_dataset
    configured = settings.dataset(dataset)  # fail early, in one sentence, on an unknown one
    location = open_store(settings)
    say(f"store: {location.description}")
    _lay_out_demo_store(location, settings, configured)
    outcome = RunOutcome()
    quiet = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}

    def execute(job: str, title: str, ops: dict, partition: str | None = None):
        say(title, flush=True)
        step[0] = title.split(":", 1)[0]
        result = execute_job(settings, defs.resolve_job_def(job),
                             run_config={"ops": ops, **quiet}, partition_key=partition,
                             raise_on_error=False)
        outcome.run_ids.append(result.run_id)
        stopped = _interrupted_steps(result)
        if stopped:
            step[0] += f" (step {', '.join(stopped)})"
        if stopping.requested() is not None:  # a stop signal ended this run: no later one
            _print_materializations(result)  # what it finished first
            stopping.check()
        _collect(result, outcome, partition)
        return result

    nightly_ops = {op: {"config": {"dataset": dataset}} for op in (
        "corpus", "retrieval_report", "dual_judge_scores", "judge_agreement",
        "calibration_grid")}
    loads = "attach" if configured.is_live else "ingest"
    nightly = execute(NIGHTLY_JOB, f"[1/3] nightly pipeline: {loads}, retrieval report, dual "
                      "judges, agreement, calibration", nightly_ops)
    _print_materializations(nightly)

    days = _answer_days(location, settings)
    first = settings.quality_gates.partition_start
    today = datetime.now(timezone.utc).date()
    days = [day for day in days if _gateable(day, first, today)]
    for day in days:
        gates = execute(QUALITY_GATE_JOB, f"[2/3] quality gates for the answers of {day}", {},
                        partition=day.isoformat())
        _print_materializations(gates)
    if not days:
        say("[2/3] quality gates: no answers yet (quality_gates.answers_file / "
            "answers_relation / answers)")

    report_config = {"source_run_id": nightly.run_id, "dataset": dataset,
                     "related_run_ids": outcome.run_ids[1:],  # the gate runs: their cost
                     "days": [d.isoformat() for d in days] or None}
    report = execute(REPORT_JOB, "[3/3] report", {"run_report": {"config": report_config}})

    say("\nchecks:")
    for line in outcome.checks:
        say(line.format())
    for error in outcome.errors:
        say(f"  ERROR {error}")
    _print_report_location(report)
    store = " (with DATABASE_URL set as for this run)" if settings.database_url else ""
    say(f"Dagster UI (runs {', '.join(r[:8] for r in outcome.run_ids)} are in its history): "
        f"{dagster_ui_command(settings, Path(os.environ['DAGSTER_HOME']))}, then open "
        f"http://127.0.0.1:3000{store}")
    if outcome.errors:
        raise UserError(f"{len(outcome.errors)} step(s) could not run; the first: "
                        f"{outcome.errors[0]}")
    if args.strict and outcome.blocking_failures:
        return EXIT_FAILED
    return EXIT_OK


def dagster_ui_command(settings: Settings, home: Path) -> str:
    """The ``dagster dev`` command line that shows these runs, as it works from any folder:
    this interpreter's own ``dagster`` by absolute path, the code location by module name
    (not a workspace.yaml, which only the project folder has), DAGSTER_HOME and the config
    file in use by absolute path. Without a config file the defaults are relative to this
    folder, so the line starts by going there."""
    dagster = Path(sys.executable).with_name("dagster")  # the venv's, not a resolved symlink
    program = (shlex.quote(str(dagster)) if dagster.is_file()
               else f"{shlex.quote(sys.executable)} -m dagster")
    env = f"DAGSTER_HOME={shlex.quote(str(home.resolve()))}"
    if settings.config_path is not None:
        env += f" EVAL_HARNESS_CONFIG={shlex.quote(str(settings.config_path))}"
    go_there = ("" if settings.config_path is not None
                else f"cd {shlex.quote(str(settings.root))} && ")
    return f"{go_there}{env} {program} dev -m {DEFINITIONS_MODULE} -a defs"


def _lay_out_demo_store(location: StoreLocation, settings: Settings, configured) -> None:
    """The embedded default plays a RAG system: lay out its demo store once, before the
    corpus asset attaches the live dataset mapped onto it (and say where it is). On a
    DATABASE_URL store it is never built: a mapping onto it that finds nothing stops the run
    here, in one sentence, before any step."""
    if not uses_demo_schema(configured, settings):
        return
    with location.connection() as conn:
        if not demo_store_wanted(settings):
            with conn.transaction():
                refuse_missing_demo_relations(conn, configured, settings)
            return
        say(describe_demo_store(prepare_demo_store(conn, settings, configured)), flush=True)


def _gateable(day: date, first: date, today: date) -> bool:
    """Whether ``day`` is a partition of the answers asset (partition_start .. today, UTC)."""
    if first <= day <= today:
        return True
    where = (f"before quality_gates.partition_start ({first})" if day < first
             else f"after today ({today}, UTC)")
    say(f"  answers of {day} are {where}; not gated")
    return False


def _collect(result, outcome: RunOutcome, partition: str | None) -> None:
    import dagster as dg  # only where it runs: see the imports

    for evaluation in result.get_asset_check_evaluations():
        outcome.checks.append(CheckLine(
            name=evaluation.check_name, partition=partition, passed=evaluation.passed,
            blocking=evaluation.severity == dg.AssetCheckSeverity.ERROR,
            description=(evaluation.description or "").strip()))
    for event in result.all_events:
        if not event.is_step_failure:
            continue
        error = event.event_specific_data.error
        if error is not None and error.cls_name in EXPECTED_CHECK_FAILURE:
            continue  # already listed with the checks
        outcome.errors.append(f"{event.step_key}: {root_cause(error)}")


# a step a stop signal ended: ours (eval_harness.stopping), Dagster's own, plain Python's
INTERRUPTS = ("Interrupted", "DagsterExecutionInterruptedError", "KeyboardInterrupt")


def _interrupted_steps(result) -> list[str]:
    """The steps of ``result`` a stop signal ended."""
    return [event.step_key for event in result.all_events if event.is_step_failure
            and getattr(event.event_specific_data.error, "cls_name", None) in INTERRUPTS]


def _print_materializations(result) -> None:
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        key = materialization.asset_key.to_user_string()
        values = {k: v.value for k, v in materialization.metadata.items()}
        if key == "retrieval_report":
            say("  " + str(values["report"]).strip("`\n").replace("\n", "\n  "))
            continue
        if key == "answers":  # one partition: its size and each gate's pass rate
            rates = ", ".join(f"{k.removesuffix('_pass_rate')} {_fmt(v)}"
                              for k, v in values.items() if k.endswith("_pass_rate"))
            say(f"  answers: {values.get('answers', 0)} (evaluated now "
                f"{values.get('answers_evaluated_now', 0)}); pass rates: {rates or 'none'}")
            continue
        if key == "dual_judge_scores" and "queries_changed" in values:
            say(f"  {_judging_line(values)}")
            continue
        numbers = {k: v for k, v in values.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and not k.startswith("dagster/")}
        shown = ", ".join(f"{k.replace('_', ' ')} {_fmt(v)}" for k, v in list(numbers.items())[:8])
        say(f"  {key}: {shown}" if shown else f"  {key}: materialized")


def _judging_line(values: dict) -> str:
    """The judges' work in words: a rerun on unchanged data reads "0 queries changed"."""
    kappa = values.get("pooled_kappa")
    return (f"dual_judge_scores: {values.get('queries_written', 0)} of "
            f"{values.get('queries', 0)} queries judged, {values['queries_changed']} queries "
            f"changed; provider calls {values.get('provider_calls', 0)}, cache hits "
            f"{values.get('cache_hits', 0)}, cost ${float(values.get('cost_usd') or 0):.4f}, "
            f"pooled kappa {_fmt(kappa) if kappa is not None else 'undefined'}")


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _print_report_location(result) -> None:
    """This run's report (HTML, Markdown) and ``reports/latest.html``, paths from the cwd."""
    for event in result.get_asset_materialization_events():
        metadata = event.step_materialization_data.materialization.metadata
        if "html_path" in metadata:
            say(f"\nreport: {shown_path(metadata['html_path'].value)}")
            say(f"        {shown_path(metadata['markdown_path'].value)}")
            if "latest_html_path" in metadata:
                say(f"latest: {shown_path(metadata['latest_html_path'].value)}")
            return
    say("\nreport: not written (see the ERROR lines above)")


def shown_path(path: str | Path) -> str:
    """``path`` relative to the working directory when it lies below it, else absolute:
    short, and a terminal can open it either way."""
    absolute = Path(path).resolve()
    try:
        return str(absolute.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(absolute)


def _answer_days(location: StoreLocation, settings: Settings) -> list[date]:
    """Import the configured answers file (idempotent) and return the UTC days to gate: the
    days the file covers, or the latest day with answers when no file is configured."""
    with location.connection() as conn:
        report = import_configured_answers(conn, settings)
        if report is not None:
            say(f"answers: {report} (from {report.path})")
            return list(report.days)
        relation = answers_relation(conn, settings)  # a mapping: checked before any work
        if not isinstance(relation, str):  # gated in place: the days of its latest week
            days = recent_answer_days(conn, relation, days=RECENT_ANSWER_DAYS)
            say(f"answers: gated in place in {relation} (quality_gates.answers): "
                f"{', '.join(d.isoformat() for d in days) or 'none yet'}")
            return days
        latest = latest_answer_day(conn, relation)
    return [] if latest is None else [latest]
