"""The per-run report: an HTML page and its Markdown twin in ``reports/runs/<time>-<run>/``.

Sections (:mod:`eval_harness.reporting.sections`), each built from what the store and the
DuckDB history hold now (nothing is re-computed or re-evaluated here; a section whose data
is missing says what to run instead of failing the report):

1. summary: one line per verdict, with the time its data is from ("as of");
2. dual-judge agreement (:func:`eval_harness.agreement.dataset_agreement.dataset_agreement`);
3. the latest calibration grid in the history and its P@5 verdict;
4. quality gates: each enabled gate's figures per day from the stored results, and the
   worst answers with the reason the gate recorded;
5. cost by provider, model and operation from ``api_cost_log``, with the batch discount
   (saved = the batch calls' tokens at list price - what was paid) and the judge reply cache
   (``api_cache_hit_log``: hits and the list price of the replies they served);
6. trends: the run's headline numbers are recorded in the DuckDB history
   (:mod:`eval_harness.reporting.run_history`; a re-rendered run replaces its rows) and
   plotted over the earlier runs.

The HTML is one self-contained file (the PNGs are inlined as data URIs, so a CI artifact or
``reports/latest.html`` shows them anywhere); the PNGs are also written beside it for the
Markdown. ``reports/latest.html`` and ``reports/latest.md`` are copies of the newest report.
This module assembles the sections and writes the files; :mod:`eval_harness.reporting.render`
renders them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path

import duckdb
import psycopg

from eval_harness.calibration.history import HistoryUnavailable
from eval_harness.files import write_file_atomically, write_report
from eval_harness.reporting.blocks import (SECTION_TITLES, BuiltSection, Check, Figure, Metric,
                                           Section, no_data)
from eval_harness.reporting.render import render_html, render_markdown
from eval_harness.reporting.sections.agreement import agreement_metric_keys, agreement_section
from eval_harness.reporting.sections.calibration import CALIBRATION_KEYS, calibration_section
from eval_harness.reporting.sections.cost import COST_KEYS, cost_section
from eval_harness.reporting.sections.gates import gate_metric_keys, gates_section
from eval_harness.reporting.sections.summary import summary_section
from eval_harness.reporting.sections.retrieval import retrieval_section
from eval_harness.reporting.sections.trends import trends_section
from eval_harness.retrieval.report import RetrievalReport
from eval_harness.settings import Settings


@dataclass(frozen=True)
class RunReport:
    """What :func:`build_run_report` wrote; ``metrics`` are flat values for asset metadata."""

    directory: Path
    html_path: Path
    markdown_path: Path
    latest_html_path: Path
    latest_markdown_path: Path
    png_paths: tuple[Path, ...]
    metrics: dict[str, Metric]
    markdown: str
    html: str = field(repr=False)
    sections: tuple[str, ...]
    checks: tuple[Check, ...]


def build_run_report(conn: psycopg.Connection, settings: Settings, *, run_id: str | None,
                     dataset: str | None = None, days: Sequence[date] | None = None,
                     related_run_ids: Sequence[str] = (), out_dir: Path | None = None,
                     now: datetime | None = None,
                     retrieval: RetrievalReport | None = None) -> RunReport:
    """Write the report of run ``run_id`` and return where it is and its headline numbers.

    ``dataset`` defaults to ``default_dataset``; ``days`` (UTC answer partitions) to the
    latest day that has answers; ``out_dir`` to ``<root>/reports``; ``now`` (the report's
    time) to the current time. ``run_id`` selects the run's cost rows and keys its point in
    the DuckDB history (replacing an earlier report of the same run); without one nothing
    is recorded and cost covers the last 30 days. ``related_run_ids`` are runs that belong
    to this one (e.g. the gate runs `eval-harness run` started): their cost counts as the
    run's. ``retrieval`` (what ``eval-harness report`` computed) adds its figures as the
    section after the summary. The store is only read. A section whose
    data is missing or unreadable shows a hint and its metrics are None; only an error
    writing the report files raises.
    """
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    dataset = dataset or settings.default_dataset
    reports = Path(out_dir) if out_dir is not None else settings.root / "reports"
    parts = {
        "agreement": _guarded(conn, "agreement", agreement_metric_keys(),
                              lambda: agreement_section(conn, settings, dataset)),
        "calibration": _guarded(conn, "calibration", CALIBRATION_KEYS,
                                lambda: calibration_section(settings, dataset)),
        "quality_gates": _guarded(conn, "quality_gates", gate_metric_keys(settings),
                                  lambda: gates_section(conn, settings, days, run_id)),
        "cost": _guarded(conn, "cost", COST_KEYS,
                         lambda: cost_section(conn, settings, run_id, now,
                                              tuple(related_run_ids))),
    }
    metrics: dict[str, Metric] = {"run_id": run_id, "dataset": dataset,
                                  "generated_at": now.isoformat()}
    for part in parts.values():
        metrics.update(part.metrics)
    parts["trends"] = _guarded(conn, "trends", {}, lambda: trends_section(
        settings, run_id, dataset, now, metrics))
    checks = tuple(check for part in parts.values() for check in part.checks)
    summary = summary_section(conn, run_id, dataset, now, checks)
    first = (retrieval_section(retrieval).section,) if retrieval is not None else ()
    sections = (summary, *first, *(part.section for part in parts.values()))
    return _write(reports, run_id, now, sections, metrics, checks)


def _guarded(conn: psycopg.Connection, key: str, metric_keys: Mapping[str, Metric],
             build: Callable[[], BuiltSection]) -> BuiltSection:
    """``build()``, or the section with a hint when its data cannot be read at all.

    Each builder reads in its own transaction (a savepoint inside the caller's), so a
    missing table rolls back that section's reads only and the others still run.
    """
    title = SECTION_TITLES[key]
    try:
        with conn.transaction():
            return build()
    except psycopg.errors.UndefinedTable as exc:
        hint = (f"The store has no table for this section yet ({_first_line(exc)}): run "
                "`eval-harness migrate`.")
    except LookupError as exc:  # an unknown dataset, a judge without its key: says what to do
        hint = str(exc.args[0]) if exc.args else type(exc).__name__
    except (psycopg.Error, duckdb.Error, HistoryUnavailable, ValueError, OSError) as exc:
        hint = f"{title} could not be read: {_first_line(exc)}"
    return no_data(key, hint, dict(metric_keys), check=title)


def _write(reports: Path, run_id: str | None, now: datetime, sections: Sequence[Section],
           metrics: dict[str, Metric], checks: Sequence[Check]) -> RunReport:
    directory = reports / "runs" / f"{now:%Y%m%dT%H%M%SZ}-{_short_id(run_id)}"
    title = f"Run report: {metrics['dataset']}, {now:%Y-%m-%d %H:%M} UTC"
    figures = [block for section in sections for block in section.blocks
               if isinstance(block, Figure)]
    png_paths = tuple(write_file_atomically(directory / figure.file_name, figure.png)
                      for figure in figures)
    markdown = render_markdown(sections, title=title)
    html = render_html(sections, title=title)
    markdown_path = write_report(directory, "report.md", markdown)
    html_path = write_report(directory, "report.html", html)
    prefix = directory.relative_to(reports).as_posix() + "/"
    latest_markdown = write_report(reports, "latest.md",
                                   render_markdown(sections, title=title, image_prefix=prefix))
    latest_html = write_report(reports, "latest.html", html)
    return RunReport(directory=directory, html_path=html_path, markdown_path=markdown_path,
                     latest_html_path=latest_html, latest_markdown_path=latest_markdown,
                     png_paths=png_paths, metrics=metrics, markdown=markdown, html=html,
                     sections=tuple(section.key for section in sections), checks=tuple(checks))


def _short_id(run_id: str | None) -> str:
    if run_id is None:
        return "adhoc"
    return re.sub(r"[^A-Za-z0-9_-]", "", run_id)[:8] or "run"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
