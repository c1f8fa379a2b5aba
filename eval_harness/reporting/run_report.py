"""The per-run report: an HTML page and its Markdown twin in ``reports/runs/<time>-<run>/``.

Sections, each built from what the store and the DuckDB history hold now (nothing is
re-computed or re-evaluated here; a section whose data is missing says what to run instead
of failing the report):

1. summary: one line per verdict, with the time its data is from ("as of");
2. dual-judge agreement (:func:`eval_harness.agreement.data.dataset_agreement`);
3. the latest calibration grid in the history and its P@5 verdict;
4. quality gates: each enabled gate's figures per day from the stored results, and the
   worst answers with the reason the gate recorded;
5. cost by provider, model and operation from ``api_cost_log``, with the batch discount
   (saved = the batch calls' tokens at list price - what was paid) and the judge reply cache
   (``api_cache_hit_log``: hits and the list price of the replies they served);
6. trends: the run's headline numbers are recorded in the DuckDB history
   (:mod:`eval_harness.reporting.history`; a re-rendered run replaces its rows) and plotted over
   the earlier runs.

The HTML is one self-contained file (the PNGs are inlined as data URIs, so a CI artifact or
``reports/latest.html`` shows them anywhere); the PNGs are also written beside it for the
Markdown. ``reports/latest.html`` and ``reports/latest.md`` are copies of the newest report.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import psycopg
from markupsafe import Markup, escape
from psycopg import sql

from eval_harness.agreement.data import DatasetAgreement, dataset_agreement, stand_in_note
from eval_harness.agreement.report import format_agreement_markdown
from eval_harness.gates.answers import (TimeWindow, content_hash_sql, relation_sql, window_condition,
                                  window_params)
from eval_harness.calibration.history import (HistoryUnavailable, calibrated_row,
                                              read_grid_history, verdict_from_grid)
from eval_harness.calibration.report import (axis_label, draw_reference, legend_outside,
                                             zoomed_limits)
from eval_harness.calibration.run import (VERDICT_LABELS, VerdictBands, verdict_sentence,
                                          weight_label)
from eval_harness.calibration.weights import write_file_atomically
from eval_harness.gates.registry import (Gate, configured_gates, configured_scale,
                                         enabled_gate_names)
from eval_harness.gates.report import GateSummary
from eval_harness.gates.runner import summarize_gates
from eval_harness.judges.pricing import PriceTable
from eval_harness.judges.protocol import Usage
from eval_harness.reporting.files import write_report
from eval_harness.reporting.history import (figure_png, plot_cost_trend,
                                      plot_gate_trend, plot_kappa_trend, plot_p_at_5_trend,
                                      read_run_history, record_run, runs_table)
from eval_harness.settings import Settings

Metric = float | int | str | bool | None
SECTION_TITLES = {"summary": "Summary", "agreement": "Dual-judge agreement",
                  "calibration": "Calibration grid and P@5 verdict",
                  "quality_gates": "Quality gates", "cost": "Cost",
                  "trends": "Trends over past runs"}
WORST_SHOWN = 5          # worst answers listed per gate and day
COST_WINDOW_DAYS = 30
RECENT_RUNS_SHOWN = 10
REASON_CHARS = 160
PASS, FAIL, WARN, NO_DATA = "PASS", "FAIL", "WARN", "NO DATA"


# ---------------------------------------------------------------------------- the model

@dataclass(frozen=True)
class Paragraph:
    text: str  # may hold `code` and **bold**, rendered in both formats


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...] = ()         # right-aligned columns
    marked: frozenset[int] = frozenset()   # rows shown in bold (the best weight, totals)
    caption: str | None = None


@dataclass(frozen=True)
class Figure:
    file_name: str
    png: bytes = field(repr=False)
    caption: str

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


@dataclass(frozen=True)
class Details:
    summary: str
    text: str  # shown as preformatted text in HTML, as Markdown in Markdown


Block = Paragraph | Table | Figure | Details


@dataclass(frozen=True)
class Check:
    """One line of the summary: a verdict and the time of the data it rests on."""

    name: str
    status: str  # PASS | FAIL | WARN | NO DATA
    detail: str
    as_of: datetime | None = None


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    blocks: tuple[Block, ...] = ()
    status: str | None = None
    hint: str | None = None  # what to run when the section's data is missing


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


@dataclass(frozen=True)
class _Part:
    section: Section
    metrics: dict[str, Metric]
    checks: tuple[Check, ...] = ()


# ---------------------------------------------------------------------------- entry point

def build_run_report(conn: psycopg.Connection, settings: Settings, *, run_id: str | None,
                     dataset: str | None = None, days: Sequence[date] | None = None,
                     related_run_ids: Sequence[str] = (), out_dir: Path | None = None,
                     now: datetime | None = None) -> RunReport:
    """Write the report of run ``run_id`` and return where it is and its headline numbers.

    ``dataset`` defaults to ``default_dataset``; ``days`` (UTC answer partitions) to the
    latest day that has answers; ``out_dir`` to ``<root>/reports``; ``now`` (the report's
    time) to the current time. ``run_id`` selects the run's cost rows and keys its point in
    the DuckDB history (replacing an earlier report of the same run); without one nothing
    is recorded and cost covers the last 30 days. ``related_run_ids`` are runs that belong
    to this one (e.g. the gate runs `eval-harness run` started): their cost counts as the
    run's. The store is only read. A section whose
    data is missing or unreadable shows a hint and its metrics are None; only an error
    writing the report files raises.
    """
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    dataset = dataset or settings.default_dataset
    reports = Path(out_dir) if out_dir is not None else settings.root / "reports"
    parts = {
        "agreement": _guarded(conn, "agreement", _agreement_metric_keys(),
                              lambda: _agreement_part(conn, settings, dataset)),
        "calibration": _guarded(conn, "calibration", _CALIBRATION_KEYS,
                                lambda: _calibration_part(settings, dataset)),
        "quality_gates": _guarded(conn, "quality_gates", _gate_metric_keys(settings),
                                  lambda: _gates_part(conn, settings, days, run_id)),
        "cost": _guarded(conn, "cost", _COST_KEYS,
                         lambda: _cost_part(conn, settings, run_id, now,
                                            tuple(related_run_ids))),
    }
    metrics: dict[str, Metric] = {"run_id": run_id, "dataset": dataset,
                                  "generated_at": now.isoformat()}
    for part in parts.values():
        metrics.update(part.metrics)
    parts["trends"] = _guarded(conn, "trends", {}, lambda: _trends_part(
        settings, run_id, dataset, now, metrics))
    checks = tuple(check for part in parts.values() for check in part.checks)
    summary = _summary_section(conn, run_id, dataset, now, checks)
    sections = (summary, *(part.section for part in parts.values()))
    return _write(reports, run_id, now, sections, metrics, checks)


def _guarded(conn: psycopg.Connection, key: str, metric_keys: Mapping[str, Metric],
             build: Callable[[], _Part]) -> _Part:
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
    return _Part(Section(key, title, status=NO_DATA, hint=hint), dict(metric_keys),
                 (Check(title, NO_DATA, hint),))


# ---------------------------------------------------------------------------- agreement

def _agreement_metric_keys() -> dict[str, Metric]:
    return dict.fromkeys(("kappa", "kappa_ci_low", "kappa_ci_high", "kappa_floor",
                          "agreement_passed", "landis_koch", "gwet_ac1", "krippendorff_alpha",
                          "n_pairs", "n_scored", "review_pending", "judge1_models",
                          "judge2_models"))


def _agreement_part(conn: psycopg.Connection, settings: Settings, dataset: str) -> _Part:
    title = SECTION_TITLES["agreement"]
    result = dataset_agreement(conn, dataset, settings.agreement)
    as_of = conn.execute("SELECT max(judged_at) FROM ground_truth WHERE dataset = %s",
                         (dataset,)).fetchone()[0]
    summary = result.summary()
    metrics = _agreement_metric_keys()
    metrics.update({key: summary[key] for key in metrics if key in summary})
    metrics.update(agreement_passed=result.gate.passed,
                   judge1_models=", ".join(result.judge1_models) or None,
                   judge2_models=", ".join(result.judge2_models) or None)
    if result.n_pairs == 0:
        hint = (f"No judged pairs yet in dataset '{dataset}' ({result.n_queries} ground-truth "
                "queries): run the judges (`eval-harness judge`).")
        return _Part(Section("agreement", title, status=NO_DATA, hint=hint), metrics,
                     (Check("Judge agreement gate", NO_DATA, hint),))
    note = stand_in_note((settings.judges.judge1, settings.judges.judge2),
                         (result.judge1_models, result.judge2_models))
    status = PASS if result.gate.passed else FAIL
    if status == FAIL and note and settings.agreement.stand_in_judges == "warn":
        status = WARN
    blocks: list[Block] = [Paragraph(f"**Gate: {status}.** {result.gate.description}")]
    if note:
        blocks.append(Paragraph(f"Note: {note}; this says nothing about the configured judges."))
    blocks.append(Paragraph(
        f"{result.n_judged_queries} of {result.n_queries} ground-truth queries judged, "
        f"{result.n_pairs} (query, document) pairs; judge 1: "
        f"{', '.join(result.judge1_models) or 'unknown'}, judge 2: "
        f"{', '.join(result.judge2_models) or 'unknown'}."))
    if result.report is None:
        blocks.append(Paragraph(f"No agreement statistics: {result.reason}."))
    else:
        blocks.append(_agreement_table(result))
    blocks += [_versus_human_table(result), Paragraph(
        f"Review queue: {result.review_pending} pair(s) wait for a human verdict, "
        f"{result.review_adjudicated} adjudicated, {result.n_adjudicated_overrides} "
        "verdict(s) override the judges (`eval-harness review export FILE.csv`)."),
        Details("Full agreement report", _demote_headings(format_agreement_markdown(result)))]
    kappa = "n/a" if summary["kappa"] is None else f"{summary['kappa']:.3f}"
    check = Check("Judge agreement gate", status,
                  f"kappa {kappa}, lower bound {_num(summary['kappa_ci_low'])} vs floor "
                  f"{settings.agreement.kappa_floor:g}", as_of)
    return _Part(Section("agreement", title, tuple(blocks), status), metrics, (check,))


def _agreement_table(result: DatasetAgreement) -> Table:
    report = result.report
    interval = report.kappa_interval
    rows = [
        ("Cohen's kappa (pooled)", _num(report.kappa.value), report.interpretation),
        (f"{interval.confidence:.0%} interval (bootstrap over {interval.n_queries} queries)",
         _interval(interval.low, interval.high), interval.reason or
         f"the gate needs the lower bound to reach {result.settings.kappa_floor:g}"),
        ("Floor", f"{result.settings.kappa_floor:.2f}", "agreement.kappa_floor"),
        ("Gwet's AC1", _num(report.gwet_ac1.value), "not pulled down when one label dominates"),
        ("Krippendorff's alpha (raw scores)", _num(report.krippendorff_alpha.value),
         report.krippendorff_alpha.reason or ">= 0.80 reliable, >= 0.667 tentative"),
        ("Pairs scored by both judges", str(report.n_scored),
         f"{report.n_unscored} unscored pair(s) left out, never guessed"),
    ]
    return Table(("statistic", "value", "reading"), tuple(rows), (False, True, False))


def _versus_human_table(result: DatasetAgreement) -> Table:
    rows = []
    for rater in result.versus_human:
        report = rater.report
        if report is None:
            rows.append((rater.rater, ", ".join(rater.models) or "-", "0", "n/a", "n/a",
                         rater.reason or "n/a", "n/a", "n/a"))
            continue
        rows.append((rater.rater, ", ".join(rater.models) or "-", str(report.n_scored),
                     _num(report.kappa.value),
                     _interval(report.kappa_interval.low, report.kappa_interval.high),
                     report.interpretation, _num(report.precision), _num(report.recall)))
    return Table(("rater vs human", "models", "pairs", "kappa", "interval", "band", "precision",
                  "recall"), tuple(rows), (False, False, True, True, False, False, True, True),
                 caption="Judges and final labels against the human labels (expected_docs)")


# ---------------------------------------------------------------------------- calibration

_CALIBRATION_KEYS: dict[str, Metric] = dict.fromkeys(
    ("p_at_5_best", "best_semantic_weight", "p_at_5_default", "p_at_5_ceiling", "verdict",
     "calibrated_at"))
CALIBRATION_PLOT = "calibration-grid.png"


def _calibration_part(settings: Settings, dataset: str) -> _Part:
    title = SECTION_TITLES["calibration"]
    history = read_grid_history(settings.history_duckdb_path, dataset)
    if history.empty:
        hint = (f"No calibration of dataset '{dataset}' in the history "
                f"({settings.history_duckdb_path}): run `eval-harness calibrate`.")
        return _Part(Section("calibration", title, status=NO_DATA, hint=hint),
                     dict(_CALIBRATION_KEYS), (Check("P@5 verdict", NO_DATA, hint),))
    grid = history[history["run_at"] == history["run_at"].max()].sort_values("semantic_weight")
    bands = VerdictBands(settings.calibration.full_success, settings.calibration.partial_success)
    verdict, p_at_5 = verdict_from_grid(grid, bands)
    best = calibrated_row(grid)
    default = grid[grid["is_default"]]
    ceiling = float(best["p_at_5_ceiling"])
    calibrated_at = _utc(best["run_at"])
    status = {"full_success": PASS, "partial_success": WARN, "failure": FAIL}[verdict]
    sentence = verdict_sentence(verdict, p_at_5, bands, ceiling)
    rows, marked = [], set()
    for position, row in enumerate(grid.itertuples(index=False)):
        marks = [name for name, chosen in (("best", row.is_best), ("default", row.is_default))
                 if chosen]
        if row.is_best:
            marked.add(position)
        rows.append((weight_label(row.semantic_weight), weight_label(row.keyword_weight),
                     f"{row.p_at_5:.4f}", f"{row.recall_at_5:.4f}", f"{row.ndcg_at_10:.4f}",
                     f"{row.mrr_at_10:.4f}", ", ".join(marks)))
    table = Table(("semantic", "keyword", "P@5", "Recall@5", "nDCG@10", "MRR@10", ""),
                  tuple(rows), (True,) * 6 + (False,), frozenset(marked))
    blocks = (
        Paragraph(f"**{sentence}.**"),
        Paragraph(f"Dataset `{dataset}`: {int(best['n_queries'])} ground-truth queries, "
                  f"candidate depth {int(best['candidate_depth'])}, calibrated "
                  f"{calibrated_at:%Y-%m-%d %H:%M} UTC. Keyword weight = 1 - semantic weight."),
        table,
        Figure(CALIBRATION_PLOT, plot_calibration_grid(grid, bands),
               "P@5 against the semantic weight in its verdict bands (top) and the other "
               "ranking metrics, which have no verdict (bottom); both y axes are zoomed to "
               "the data"),
        Paragraph(f"P@5 ceiling (what a perfect ranker gets on this ground truth: mean of "
                  f"min(5, relevant) / 5): **{ceiling:.4f}**."))
    default_p = float(default["p_at_5"].iloc[0]) if len(default) else None
    metrics = {"p_at_5_best": p_at_5, "best_semantic_weight": float(best["semantic_weight"]),
               "p_at_5_default": default_p, "p_at_5_ceiling": ceiling,
               "verdict": VERDICT_LABELS[verdict], "calibrated_at": calibrated_at.isoformat()}
    check = Check("P@5 verdict", status, f"{VERDICT_LABELS[verdict]}: P@5 {p_at_5:.4f} at "
                  f"semantic {weight_label(float(best['semantic_weight']))}", calibrated_at)
    return _Part(Section("calibration", title, blocks, status), metrics, (check,))


def plot_calibration_grid(grid, bands: VerdictBands) -> bytes:
    """PNG bytes of :func:`calibration_grid_figure`."""
    return figure_png(calibration_grid_figure(grid, bands))


BAND_EDGE_REACH = 0.05  # P@5 within this of a verdict band's edge: the edge stays in view
OTHER_GRID_METRICS = (("recall_at_5", "Recall@5", "--"), ("ndcg_at_10", "nDCG@10", "-."),
                      ("mrr_at_10", "MRR@10", ":"))


def calibration_grid_figure(grid, bands: VerdictBands):
    """The history's grid in two panels sharing the semantic weight axis.

    Top: P@5, the metric the verdict is about, in its verdict bands, with the ceiling, the
    best and the default weight; the y axis is zoomed to the P@5 values and any band edge
    within 0.05 of them (the bands outside the view are named in the legend). Bottom:
    Recall@5, nDCG@10 and MRR@10 on their own zoomed axis and without bands: they have no
    verdict, and drawn over the success band they would read as one. Legends sit outside the
    axes, so they cover no line.

    :func:`eval_harness.calibration.report.plot_p_at_5` draws a fresh
    :class:`CalibrationResult` (with the RRF reference, which the history does not keep);
    this one draws what the history holds.
    """
    import matplotlib

    matplotlib.use("Agg")  # no display; safe in Dagster workers and CI
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9.0, 6.0), dpi=100, layout="tight")  # room for the legends
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    figure.suptitle(f"Calibration grid ({len(grid)} weights)")
    _p_at_5_panel(top, grid, bands)
    _other_metrics_panel(bottom, grid)
    return figure


def _p_at_5_panel(axes, grid, bands: VerdictBands) -> None:
    weights, p_at_5 = grid["semantic_weight"].to_numpy(), grid["p_at_5"].to_numpy()
    # a band edge close to the data is kept in view: how far P@5 is from the next band
    edges = [edge for edge in (bands.partial_success, bands.full_success)
             if p_at_5.min() - BAND_EDGE_REACH <= edge <= p_at_5.max() + BAND_EDGE_REACH]
    axes.set_ylim(*zoomed_limits([*p_at_5, *edges]))
    low, high = axes.get_ylim()
    for start, stop, colour, alpha, name in (
            (0.0, bands.partial_success, "tab:red", 0.08, "failure"),
            (bands.partial_success, bands.full_success, "tab:orange", 0.12, "partial success"),
            (bands.full_success, 1.0, "tab:green", 0.08, "full success")):
        label = f"{name} {start:g}..{stop:g}"
        if stop <= low or start >= high:  # outside the view: named, not drawn
            label += " (above the axis)" if start >= high else " (below the axis)"
        axes.axhspan(start, stop, color=colour, alpha=alpha, label=label)
    axes.set_ylim(low, high)  # the spans must not widen the view
    axes.plot(weights, p_at_5, marker="o", color="tab:blue", label="P@5")
    ceiling = float(grid["p_at_5_ceiling"].iloc[0])
    draw_reference(axes, ceiling, f"P@5 ceiling {ceiling:.3f}", color="grey", linestyle="--")
    best, default = grid[grid["is_best"]], grid[grid["is_default"]]
    axes.scatter(default["semantic_weight"], default["p_at_5"], s=90, facecolors="none",
                 edgecolors="black", zorder=3, label="default")
    axes.scatter(best["semantic_weight"], best["p_at_5"], s=140, marker="*", color="tab:red",
                 zorder=4, label="best")
    axes.set_ylabel(axis_label("mean P@5", axes))
    axes.set_title("P@5 in its verdict bands", fontsize="medium")
    axes.grid(alpha=0.3)
    legend_outside(axes)


def _other_metrics_panel(axes, grid) -> None:
    weights = grid["semantic_weight"].to_numpy()
    others = [grid[column].to_numpy() for column, _, _ in OTHER_GRID_METRICS]
    for values, (_, label, style) in zip(others, OTHER_GRID_METRICS):
        axes.plot(weights, values, marker="o", linestyle=style, label=label)
    axes.set_ylim(*zoomed_limits([v for values in others for v in values]))
    axes.set_ylabel(axis_label("mean", axes))
    axes.set_title("Other ranking metrics (no verdict)", fontsize="medium")
    axes.set_xlabel("semantic weight (keyword = 1 - semantic)")
    axes.grid(alpha=0.3)
    legend_outside(axes)


# ---------------------------------------------------------------------------- quality gates

def _gate_metric_keys(settings: Settings) -> dict[str, Metric]:
    keys: dict[str, Metric] = {}
    for name in enabled_gate_names(settings.quality_gates):
        keys.update(dict.fromkeys((f"{name}_pass_rate", f"{name}_passed", f"{name}_answers",
                                   f"{name}_unscored")))
    keys.update(gates_passed=None, gate_days=None)
    return keys


def _gates_part(conn: psycopg.Connection, settings: Settings, days: Sequence[date] | None,
                run_id: str | None) -> _Part:
    title = SECTION_TITLES["quality_gates"]
    relation = settings.quality_gates.answers_relation
    metrics = _gate_metric_keys(settings)
    gates = configured_gates(settings)
    if not gates:
        hint = "Every quality gate is disabled (quality_gates.gates in config.yaml)."
        return _Part(Section("quality_gates", title, status=NO_DATA, hint=hint), metrics)
    days = sorted(set(days)) if days else _latest_answer_day(conn, relation)
    if not days:
        hint = (f"No answers in `{relation}` yet: import some (`eval-harness answers import "
                "FILE`), then run the gates (`eval-harness gate`).")
        return _Part(Section("quality_gates", title, status=NO_DATA, hint=hint), metrics,
                     (Check("Quality gates", NO_DATA, hint),))
    blocks: list[Block] = []
    checks: list[Check] = []
    per_gate: dict[str, list[GateSummary]] = {gate.name: [] for gate in gates}
    for day in days:
        window = TimeWindow.day(day)
        summaries = summarize_gates(conn, window, gates, relation=relation, run_id=run_id)
        as_of = conn.execute(sql.SQL(
            "SELECT max(r.evaluated_at) FROM {relation} AS a JOIN gate_results AS r "
            "ON r.answer_id = a.id WHERE {window}").format(
            relation=relation_sql(relation), window=window_condition("a", window)),
            window_params(window)).fetchone()[0]
        blocks += _gate_day_blocks(conn, relation, window, gates, summaries, as_of)
        for summary in summaries:
            per_gate[summary.gate].append(summary)
            checks.append(Check(f"Gate {summary.gate} ({window.partition})",
                                _gate_status(summary), summary.verdict, as_of))
    for name, summaries in per_gate.items():
        answers = sum(s.answers for s in summaries)
        metrics.update({f"{name}_pass_rate": (sum(s.passed_answers for s in summaries) / answers
                                              if answers else None),
                        f"{name}_passed": all(s.passed for s in summaries),
                        f"{name}_answers": answers,
                        f"{name}_unscored": sum(s.unscored for s in summaries)})
    statuses = {check.status for check in checks}
    metrics.update(gates_passed=FAIL not in statuses,
                   gate_days=", ".join(day.isoformat() for day in days))
    status = FAIL if FAIL in statuses else WARN if WARN in statuses else PASS
    return _Part(Section("quality_gates", title, tuple(blocks), status), metrics, tuple(checks))


def _latest_answer_day(conn: psycopg.Connection, relation: str) -> list[date]:
    latest = conn.execute(sql.SQL("SELECT max(created_at) FROM {}").format(
        relation_sql(relation))).fetchone()[0]
    return [] if latest is None else [latest.astimezone(timezone.utc).date()]


def _gate_status(summary: GateSummary) -> str:
    if summary.passed:
        return PASS
    return FAIL if summary.blocking else WARN


def _gate_day_blocks(conn: psycopg.Connection, relation: str, window: TimeWindow,
                     gates: Sequence[Gate], summaries: Sequence[GateSummary],
                     as_of: datetime | None) -> list[Block]:
    answers = summaries[0].answers if summaries else 0
    rows = []
    for s in summaries:
        interval = (_interval(*s.pass_rate_interval) if s.pass_rate_interval else "n/a")
        rows.append((s.gate, _gate_status(s), "blocking" if s.blocking else "warn only",
                     _num(s.pass_rate), interval, f"{s.threshold:g}", f"{s.min_pass_rate:g}",
                     str(s.answers), str(s.answers - s.unscored), str(s.unscored),
                     _num(s.mean_score)))
    blocks: list[Block] = [
        Paragraph(f"**{window.describe()}**: {answers} answer(s); results as of "
                  f"{_when(as_of)}. An unscored answer counts as failing."),
        Table(("gate", "status", "severity", "pass rate", "95% CI", "threshold",
               "min pass rate", "answers", "scored", "unscored", "mean score"),
              tuple(rows), (False, False, False) + (True,) * 8)]
    if answers and all(s.unscored == s.answers for s in summaries):
        blocks.append(Paragraph(f"No stored gate result for these answers: run the gates "
                                f"(`eval-harness gate --partition {window.partition}`)."))
        return blocks
    worst_rows = []
    for gate, summary in zip(gates, summaries):
        for answer_id, query, score, details in _worst_answers(
                conn, relation, gate, summary.failing_answer_ids[:WORST_SHOWN]):
            worst_rows.append((gate.name, answer_id, _num(configured_scale(gate.name, score)),
                               _reason(gate.name, details), _shorten(query, 80)))
    if worst_rows:
        blocks.append(Table(("gate", "answer", "score", "reason", "query"), tuple(worst_rows),
                            (False, False, True, False, False),
                            caption=f"Worst answers of {window.partition}: each gate's failing "
                                    f"answers, lowest score first (at most {WORST_SHOWN})"))
    elif answers:
        blocks.append(Paragraph("No answer of this day fails a gate."))
    return blocks


def _worst_answers(conn: psycopg.Connection, relation: str, gate: Gate,
                   ids: Sequence[str]) -> list[tuple[str, str, float | None, dict | None]]:
    """The answers ``ids`` (in that order) with their current result for ``gate``."""
    if not ids:
        return []
    rows = conn.execute(sql.SQL("""
        SELECT a.id, a.query, r.score, r.details
        FROM {relation} AS a
        LEFT JOIN gate_results AS r
          ON r.answer_id = a.id AND r.gate = %(gate)s AND r.gate_version = %(version)s
         AND r.content_hash = {hash}
        WHERE a.id = ANY(%(ids)s)""").format(relation=relation_sql(relation),
                                             hash=content_hash_sql("a")),
        {"gate": gate.name, "version": gate.version, "ids": list(ids)}).fetchall()
    found = {row[0]: row for row in rows}
    return [found[answer_id] for answer_id in ids if answer_id in found]


def _reason(gate: str, details: Mapping[str, Any] | None) -> str:
    """A short why from the stored details of one result (each gate keeps its own)."""
    if details is None:
        return "no current result: the gate has not scored this answer"
    if details.get("error"):
        return _shorten(f"unscored: {details['error']}", REASON_CHARS)
    if details.get("issue_types"):  # format_compliance
        return _shorten("format issues: " + ", ".join(details["issue_types"]), REASON_CHARS)
    if "claim_sentences" in details:  # citation_coverage
        text = (f"{details.get('cited_claim_sentences', 0)} of {details['claim_sentences']} "
                "claim sentences cite a source")
        if details.get("invalid_citations"):
            text += "; a citation points to a missing source"
        if details.get("uncited_claims"):
            text += f"; uncited: \"{details['uncited_claims'][0]}\""
        return _shorten(text, REASON_CHARS)
    if isinstance(details.get("claims"), list):  # grounding
        unsupported = [c.get("claim", "") for c in details["claims"]
                       if isinstance(c, Mapping) and not c.get("supported")]
        if unsupported:
            return _shorten(f"{len(unsupported)} unsupported claim(s): \"{unsupported[0]}\"",
                            REASON_CHARS)
        return details.get("note") or "every claim is supported"
    for key in ("improvement_hint", "reasoning"):  # answer_reward
        if details.get(key):
            return _shorten(str(details[key]), REASON_CHARS)
    return ""


# ---------------------------------------------------------------------------- cost

_COST_KEYS: dict[str, Metric] = dict.fromkeys(
    ("cost_scope", "cost_usd", "calls", "batch_calls", "batch_saved_usd", "cache_hits",
     "cache_saved_usd", "input_tokens", "output_tokens", "cached_tokens", "cost_30d_usd",
     "cost_all_time_usd"))


@dataclass
class CostLine:
    """Billed calls and cache hits of one (provider, model, operation)."""

    api_name: str
    model: str
    operation: str
    calls: int = 0
    batch_calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    batch_saved_usd: float | None = 0.0  # None: the model has no price to compare with
    cache_hits: int | None = 0            # None: api_cache_hit_log does not exist yet
    cache_saved_usd: float = 0.0
    last_at: datetime | None = None


_COST_SQL = """
    SELECT api_name, model, operation, count(*), count(*) FILTER (WHERE batch),
           coalesce(sum(input_tokens), 0), coalesce(sum(cached_tokens), 0),
           coalesce(sum(output_tokens), 0), coalesce(sum(estimated_cost), 0),
           coalesce(sum(input_tokens) FILTER (WHERE batch), 0),
           coalesce(sum(least(cached_tokens, input_tokens)) FILTER (WHERE batch), 0),
           coalesce(sum(output_tokens) FILTER (WHERE batch), 0),
           coalesce(sum(estimated_cost) FILTER (WHERE batch), 0), max(created_at)
    FROM api_cost_log
    WHERE (%(run_ids)s::text[] IS NULL OR run_id = ANY(%(run_ids)s))
      AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
    GROUP BY api_name, model, operation"""

_HITS_SQL = """
    SELECT api_name, model, operation, sum(hits), coalesce(sum(saved_cost), 0), max(created_at)
    FROM api_cache_hit_log
    WHERE (%(run_ids)s::text[] IS NULL OR run_id = ANY(%(run_ids)s))
      AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)
    GROUP BY api_name, model, operation"""


def cost_lines(conn: psycopg.Connection, prices: PriceTable, *,
               run_ids: Sequence[str] | None = None,
               since: datetime | None = None) -> list[CostLine]:
    """Billed calls (``api_cost_log``) and cache hits (``api_cache_hit_log``) per provider,
    model and operation, of one run and/or since a time; sorted by provider, model, operation.

    ``batch_saved_usd`` = the batch calls' tokens at list price (``judges.prices``, no batch
    discount) - what they cost; ``cache_saved_usd`` = the cached replies at list price.
    """
    params = {"run_ids": None if run_ids is None else list(run_ids), "since": since}
    lines: dict[tuple[str, str, str], CostLine] = {}
    for (api, model, operation, calls, batch_calls, tokens_in, cached, tokens_out, cost,
         batch_in, batch_cached, batch_out, batch_cost, last_at) in conn.execute(_COST_SQL,
                                                                                   params):
        saved: float | None = 0.0
        if batch_calls:
            price_known = prices.lookup(model) is not None
            saved = (prices.cost(model, Usage(batch_in, batch_out, batch_cached)) - batch_cost
                     if price_known else None)
        lines[(api, model, operation)] = CostLine(
            api, model, operation, calls, batch_calls, tokens_in, cached, tokens_out,
            float(cost), saved, last_at=last_at)
    try:
        with conn.transaction():
            hits = conn.execute(_HITS_SQL, params).fetchall()
    except psycopg.errors.UndefinedTable:  # the store predates migration 0005
        for line in lines.values():
            line.cache_hits = None
        return sorted(lines.values(), key=_line_key)
    for api, model, operation, count, saved_cost, last_at in hits:
        line = lines.setdefault((api, model, operation), CostLine(api, model, operation))
        line.cache_hits, line.cache_saved_usd = int(count), float(saved_cost)
        line.last_at = max(filter(None, (line.last_at, last_at)))
    return sorted(lines.values(), key=_line_key)


def _line_key(line: CostLine) -> tuple[str, str, str]:
    return line.api_name, line.model, line.operation


def _cost_totals(lines: Sequence[CostLine]) -> dict[str, Metric]:
    saved = [line.batch_saved_usd for line in lines]
    hits = [line.cache_hits for line in lines]
    return {"cost_usd": sum(line.cost_usd for line in lines),
            "calls": sum(line.calls for line in lines),
            "batch_calls": sum(line.batch_calls for line in lines),
            "batch_saved_usd": None if None in saved else sum(saved),
            "cache_hits": None if None in hits else sum(hits),
            "cache_saved_usd": sum(line.cache_saved_usd for line in lines),
            "input_tokens": sum(line.input_tokens for line in lines),
            "output_tokens": sum(line.output_tokens for line in lines),
            "cached_tokens": sum(line.cached_tokens for line in lines)}


def _cost_table(lines: Sequence[CostLine], caption: str) -> Table:
    totals = _cost_totals(lines)
    rows = [(line.api_name, line.model, line.operation, str(line.calls), str(line.batch_calls),
             str(line.input_tokens), str(line.cached_tokens), str(line.output_tokens),
             _usd(line.cost_usd), _usd(line.batch_saved_usd), _count(line.cache_hits),
             _usd(line.cache_saved_usd)) for line in lines]
    rows.append(("total", "", "", str(totals["calls"]), str(totals["batch_calls"]),
                 str(totals["input_tokens"]), str(totals["cached_tokens"]),
                 str(totals["output_tokens"]), _usd(totals["cost_usd"]),
                 _usd(totals["batch_saved_usd"]), _count(totals["cache_hits"]),
                 _usd(totals["cache_saved_usd"])))
    return Table(("provider", "model", "operation", "calls", "batch calls", "input tokens",
                  "cached tokens", "output tokens", "cost USD", "batch saved USD",
                  "cache hits", "cache saved USD"), tuple(rows), (False,) * 3 + (True,) * 9,
                 frozenset({len(rows) - 1}), caption)


def _cost_part(conn: psycopg.Connection, settings: Settings, run_id: str | None,
               now: datetime, related_run_ids: tuple[str, ...] = ()) -> _Part:
    title = SECTION_TITLES["cost"]
    prices = PriceTable(settings.judges.prices)
    since = now - timedelta(days=COST_WINDOW_DAYS)
    recent = cost_lines(conn, prices, since=since)
    run_lines = (cost_lines(conn, prices, run_ids=(run_id, *related_run_ids))
                 if run_id is not None else recent)
    scope = "run" if run_id is not None else f"last {COST_WINDOW_DAYS} days"
    calls_ever, cost_ever = conn.execute(
        "SELECT count(*), coalesce(sum(estimated_cost), 0) FROM api_cost_log").fetchone()
    totals = _cost_totals(run_lines)
    metrics: dict[str, Metric] = dict(_COST_KEYS)
    metrics.update(totals, cost_scope=scope, cost_30d_usd=_cost_totals(recent)["cost_usd"],
                   cost_all_time_usd=float(cost_ever))
    blocks: list[Block] = []
    if run_id is not None:
        if run_lines:
            blocks += [Paragraph(_cost_sentence(f"This run (`{run_id}`)", totals)),
                       _cost_table(run_lines, f"Run {run_id}")]
        else:
            blocks.append(Paragraph(f"This run (`{run_id}`) made no billed provider call and "
                                    "was served no cached reply."))
    if recent:
        if run_id is None:
            blocks.append(Paragraph(_cost_sentence(f"The last {COST_WINDOW_DAYS} days",
                                                   totals)))
        blocks.append(_cost_table(recent, f"Last {COST_WINDOW_DAYS} days (since "
                                          f"{since:%Y-%m-%d %H:%M} UTC)"))
    else:
        blocks.append(Paragraph(f"No billed provider call and no cache hit in the last "
                                f"{COST_WINDOW_DAYS} days."))
    blocks.append(Paragraph(
        f"All time: {calls_ever} billed call(s), {_usd(float(cost_ever))} USD. Batch saved = "
        "the batch calls' tokens at list price (judges.prices) minus what they cost; cache "
        "saved = the replies the judge cache served, at list price. Local judges "
        "(`local:lexical`, `local:embedding`) call no provider: they cost nothing and write "
        "no cost rows."))
    if any(line.batch_saved_usd is None for line in run_lines + recent):
        blocks.append(Paragraph("n/a: a model without an entry in judges.prices, so its "
                                "batch saving is unknown."))
    if any(line.cache_hits is None for line in run_lines + recent):
        blocks.append(Paragraph("Cache hits are not logged in this store yet: run "
                                "`eval-harness migrate`."))
    as_of = max((line.last_at for line in run_lines if line.last_at), default=None)
    check = Check("Cost", "INFO", _cost_sentence("This run" if run_id else
                                                 f"Last {COST_WINDOW_DAYS} days", totals),
                  as_of)
    return _Part(Section("cost", title, tuple(blocks)), metrics, (check,))


def _cost_sentence(scope: str, totals: Mapping[str, Metric]) -> str:
    return (f"{scope}: {totals['calls']} billed call(s) ({totals['batch_calls']} in batches), "
            f"{_usd(totals['cost_usd'])} USD; batch discount saved "
            f"{_usd(totals['batch_saved_usd'])} USD; {_count(totals['cache_hits'])} cache "
            f"hit(s) saved {_usd(totals['cache_saved_usd'])} USD.")


# ---------------------------------------------------------------------------- trends

TREND_PLOTS = ("trend-kappa.png", "trend-p-at-5.png", "trend-gates.png", "trend-cost.png")


def _trends_part(settings: Settings, run_id: str | None, dataset: str, now: datetime,
                 metrics: Mapping[str, Metric]) -> _Part:
    title = SECTION_TITLES["trends"]
    path = settings.history_duckdb_path
    blocks: list[Block] = []
    if run_id is None:
        blocks.append(Paragraph("This report has no run id, so its numbers are not recorded "
                                "in the history."))
    else:
        record_run(path, run_id=run_id, dataset=dataset, recorded_at=now, metrics=metrics)
    runs = runs_table(read_run_history(path, dataset))
    if runs.empty:
        hint = (f"No run of dataset '{dataset}' is recorded in the history ({path}) yet: "
                "every run report with a run id adds one.")
        return _Part(Section("trends", title, tuple(blocks), NO_DATA, hint), {})
    gates = {name: settings.quality_gates.gate(name).min_pass_rate
             for name in enabled_gate_names(settings.quality_gates)}
    bands = VerdictBands(settings.calibration.full_success, settings.calibration.partial_success)
    plots = (
        (plot_kappa_trend(runs, floor=settings.agreement.kappa_floor),
         "Pooled kappa and its lower confidence bound per run, against the floor", "kappa"),
        (plot_p_at_5_trend(runs, bands=bands),
         "P@5 at the calibrated and the default weights per run, over the verdict bands",
         "P@5"),
        (plot_gate_trend(runs, min_pass_rates=gates),
         "Each gate's pass rate per run; dotted: its minimum pass rate", "gate pass rate"),
        (plot_cost_trend(runs), "Provider cost per run (USD)", "cost"))
    blocks.append(Paragraph(f"{len(runs)} run(s) of dataset `{dataset}` recorded in `{path}`, "
                            "one point each."))
    for name, (png, caption, what) in zip(TREND_PLOTS, plots):
        blocks.append(Figure(name, png, caption) if png is not None
                      else Paragraph(f"No {what} recorded in any run yet."))
    blocks.append(_recent_runs_table(runs, list(gates)))
    return _Part(Section("trends", title, tuple(blocks)), {})


def _recent_runs_table(runs, gates: Sequence[str]) -> Table:
    columns = [("kappa", "kappa"), ("p_at_5_best", "P@5 best")]
    columns += [(f"{gate}_pass_rate", gate) for gate in gates]
    columns += [("cost_usd", "cost USD")]
    rows = []
    for recorded_at, row in runs.iloc[::-1].head(RECENT_RUNS_SHOWN).iterrows():
        values = [_num(row.get(metric)) if metric != "cost_usd" else _usd(row.get(metric))
                  for metric, _ in columns]
        rows.append((f"{_utc(recorded_at):%Y-%m-%d %H:%M}", str(row["run_id"]), *values))
    return Table(("recorded (UTC)", "run", *(label for _, label in columns)), tuple(rows),
                 (False, False) + (True,) * len(columns),
                 caption=f"The last {min(len(runs), RECENT_RUNS_SHOWN)} run(s), newest first")


# ---------------------------------------------------------------------------- summary

def _summary_section(conn: psycopg.Connection, run_id: str | None, dataset: str,
                     now: datetime, checks: Sequence[Check]) -> Section:
    statuses = {check.status for check in checks}
    status = FAIL if FAIL in statuses else WARN if statuses & {WARN, NO_DATA} else PASS
    store = f"database `{conn.info.dbname}` on {conn.info.host}"
    rows = tuple((check.name, check.status, check.detail, _when(check.as_of))
                 for check in checks)
    return Section("summary", SECTION_TITLES["summary"], (
        Paragraph(f"Run `{run_id or 'none'}`, dataset `{dataset}`, report generated "
                  f"{now:%Y-%m-%d %H:%M:%S} UTC from {store}."),
        Table(("check", "status", "detail", "data as of (UTC)"), rows)), status)


# ---------------------------------------------------------------------------- rendering

def render_markdown(sections: Sequence[Section], *, title: str, image_prefix: str = "") -> str:
    """The report in Markdown; images link to ``image_prefix + file name``."""
    lines = [f"# {title}", ""]
    for section in sections:
        badge = f" ({section.status})" if section.status else ""
        lines += [f"## {section.title}{badge}", ""]
        if section.hint:
            lines += [f"> {section.hint}", ""]
        for block in section.blocks:
            lines += _markdown_block(block, image_prefix) + [""]
    return "\n".join(lines)


def _markdown_block(block: Block, image_prefix: str) -> list[str]:
    if isinstance(block, Paragraph):
        return [block.text]
    if isinstance(block, Figure):
        return [f"![{block.caption}]({image_prefix}{block.file_name})"]
    if isinstance(block, Details):
        return [f"<details><summary>{block.summary}</summary>", "", block.text, "",
                "</details>"]
    lines = [f"*{block.caption}*", ""] if block.caption else []
    numeric = block.numeric or (False,) * len(block.columns)
    lines += ["| " + " | ".join(_cell(c) for c in block.columns) + " |",
              "|" + "|".join("---:" if right else "---" for right in numeric) + "|"]
    for position, row in enumerate(block.rows):
        cells = [_cell(value) for value in row]
        if position in block.marked:
            cells = [f"**{cell}**" if cell else cell for cell in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_html(sections: Sequence[Section], *, title: str) -> str:
    """The report as one self-contained HTML page (Jinja2, autoescaped; PNGs inlined)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    environment = Environment(loader=PackageLoader("eval_harness", "templates"),
                              autoescape=True, undefined=StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True)
    environment.filters["inline"] = _inline_html
    environment.tests.update(paragraph=lambda block: isinstance(block, Paragraph),
                             table=lambda block: isinstance(block, Table),
                             figure=lambda block: isinstance(block, Figure),
                             details=lambda block: isinstance(block, Details))
    return environment.get_template("run_report.html.j2").render(title=title,
                                                                 sections=sections)


def _inline_html(text: str) -> Markup:
    """Escaped text with `code` and **bold** turned into tags (after escaping, so safe)."""
    html = str(escape(text))
    html = re.sub(r"`([^`]+)`", r"<code>\1</code>", html)
    return Markup(re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html))


# ---------------------------------------------------------------------------- writing

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


# ---------------------------------------------------------------------------- formatting

def _short_id(run_id: str | None) -> str:
    if run_id is None:
        return "adhoc"
    return re.sub(r"[^A-Za-z0-9_-]", "", run_id)[:8] or "run"


def _num(value: Any, digits: int = 3) -> str:
    if value is None or isinstance(value, str):
        return "n/a"
    value = float(value)
    return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"


def _usd(value: Any) -> str:
    return _num(value, 4)


def _count(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def _interval(low: float | None, high: float | None) -> str:
    return "n/a" if low is None or high is None else f"[{_num(low)}, {_num(high)}]"


def _when(moment: datetime | None) -> str:
    return "n/a" if moment is None else f"{_utc(moment):%Y-%m-%d %H:%M}"


def _utc(moment: Any) -> datetime:
    """A timestamp (datetime or pandas Timestamp, naive meaning UTC) as an aware UTC datetime."""
    if hasattr(moment, "to_pydatetime"):
        moment = moment.to_pydatetime()
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def _shorten(text: str | None, limit: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _demote_headings(markdown: str) -> str:
    """Headings two levels down, so an embedded report sits under a section heading."""
    return re.sub(r"^(#{1,4}) ", r"\1## ", markdown, flags=re.MULTILINE)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
