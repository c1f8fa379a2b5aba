"""Section 2: dual-judge agreement
(:func:`eval_harness.agreement.dataset_agreement.dataset_agreement`), the judges against the
human labels, and the review queue."""

from __future__ import annotations

import re

import psycopg

from eval_harness.agreement.dataset_agreement import DatasetAgreement, dataset_agreement
from eval_harness.agreement.report import format_agreement_markdown
from eval_harness.judges.dual.record import HEADER as RECORD_HEADER, load_record, record_table
from eval_harness.judges.staging.staged import stop_rule, stored_saving
from eval_harness.reporting import formatting as fmt
from eval_harness.reporting.judge_trend import HISTORY, judge_trend_blocks
from eval_harness.reporting.blocks import (FAIL, PASS, SECTION_TITLES, WARN, Block,
                                           BuiltSection, Check, Details, Metric, Paragraph,
                                           Section, Table, no_data)
from eval_harness.datasets.ground_truth import last_judged_at
from eval_harness.settings import Settings

CHECK_NAME = "Judge agreement gate"


def agreement_metric_keys() -> dict[str, Metric]:
    """The section's metrics, all None: what a report without agreement data records."""
    return dict.fromkeys(("kappa", "kappa_ci_low", "kappa_ci_high", "kappa_floor",
                          "agreement_passed", "landis_koch", "gwet_ac1", "krippendorff_alpha",
                          "n_pairs", "n_scored", "review_pending", "judge1_models",
                          "judge2_models"))


def agreement_section(conn: psycopg.Connection, settings: Settings,
                      dataset: str) -> BuiltSection:
    """The agreement gate's verdict and statistics of ``dataset``'s judge labels."""
    title = SECTION_TITLES["agreement"]
    result = dataset_agreement(conn, dataset, settings.agreement, configured_judges=(
        settings.judges.judge1, settings.judges.judge2))
    as_of = last_judged_at(conn, dataset)
    summary = result.summary()
    metrics = agreement_metric_keys()
    metrics.update({key: summary[key] for key in metrics if key in summary})
    metrics.update(agreement_passed=result.gate.passed,
                   judge1_models=", ".join(result.judge1_models) or None,
                   judge2_models=", ".join(result.judge2_models) or None)
    if result.n_pairs == 0:
        hint = (f"No judged pairs yet in dataset '{dataset}' ({result.n_queries} ground-truth "
                "queries): run the judges (`eval-harness judge`).")
        return no_data("agreement", hint, metrics, check=CHECK_NAME)
    verdict = result.verdict  # the one verdict: the summary, this heading, the folded report
    status = {"PASS": PASS, "WARN": WARN, "FAIL": FAIL}[verdict.status]
    blocks: list[Block] = [Paragraph(f"**Gate: {status}.** {verdict.description}")]
    blocks.append(Paragraph(
        f"{result.n_judged_queries} of {result.n_queries} ground-truth queries judged, "
        f"{result.n_pairs} (query, document) pairs; judge 1: "
        f"{', '.join(result.judge1_models) or 'unknown'}, judge 2: "
        f"{', '.join(result.judge2_models) or 'unknown'}."))
    if result.report is None:
        blocks.append(Paragraph(f"No agreement statistics: {result.reason}."))
    else:
        blocks.append(_agreement_table(result))
    blocks += [Paragraph("Test-retest: " + r.line() + ".") for r in result.retest]
    if result.record:
        blocks.append(Table(RECORD_HEADER, tuple(record_table(result.record)),
                            (False,) * 5 + (True,) * 4,
                            caption="Judges' record: the last runs of each judge spec (n/a: "
                            "not measured that run)"))
    blocks += [Paragraph(people.line() + ".") for people in result.people
               if people.report is not None]
    blocks += judge_trend_blocks(load_record(conn, dataset, per_spec=HISTORY))
    if result.n_judge2_skipped:
        blocks.append(Paragraph(_staging_sentence(conn, settings, dataset,
                                                  result.n_judged_queries)))
    blocks += [_versus_human_table(result), Paragraph(
        f"Review queue: {result.review_pending} pair(s) wait for a human verdict, "
        f"{result.review_adjudicated} adjudicated, {result.n_adjudicated_overrides} "
        "verdict(s) override the judges (`eval-harness review export FILE.csv`)."),
        Details("Full agreement report", _demote_headings(format_agreement_markdown(result)))]
    kappa = "n/a" if summary["kappa"] is None else f"{summary['kappa']:.3f}"
    check = Check(CHECK_NAME, status,
                  f"kappa {kappa}, lower bound {fmt.num(summary['kappa_ci_low'])} vs floor "
                  f"{settings.agreement.kappa_floor:g}", as_of)
    return BuiltSection(Section("agreement", title, tuple(blocks), status), metrics, (check,))


def _staging_sentence(conn: psycopg.Connection, settings: Settings, dataset: str,
                      n_queries: int) -> str:
    """What staged dual judging saved (:func:`eval_harness.judges.staging.staged.stored_saving`)
    and the stop rule it read (as ``judges.staged`` plans ``n_queries`` queries)."""
    saving = stored_saving(conn, settings, dataset)
    rule = stop_rule(settings.agreement, settings.judges.staged, n_queries)
    return (f"Staged judging: judge 2 was not asked for {saving.skipped_pairs} pair(s) of "
            f"{saving.skipped_queries} queries (on its random sample the {rule.describe()} "
            f"cleared the floor {rule.floor:.2f}, looks as judges.staged plans {n_queries} "
            f"queries); they carry judge 1's label. Saved about {saving.saved_requests} "
            f"request(s), {fmt.usd(saving.saved_usd)} USD at judges.prices (an estimate: "
            "characters/4 input tokens, a one-number reply).")


def _agreement_table(result: DatasetAgreement) -> Table:
    report = result.report
    interval = report.kappa_interval
    rows = [
        ("Cohen's kappa (pooled)", fmt.num(report.kappa.value), report.interpretation),
        (f"{interval.confidence:.0%} interval (bootstrap over {interval.n_queries} queries)",
         fmt.interval(interval.low, interval.high), interval.reason or
         f"the gate needs the lower bound to reach {result.settings.kappa_floor:g}"),
        ("Floor", f"{result.settings.kappa_floor:.2f}", "agreement.kappa_floor"),
        ("Gwet's AC1", fmt.num(report.gwet_ac1.value),
         "not pulled down when one label dominates"),
        ("Krippendorff's alpha (raw scores)", fmt.num(report.krippendorff_alpha.value),
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
                     fmt.num(report.kappa.value),
                     fmt.interval(report.kappa_interval.low, report.kappa_interval.high),
                     report.interpretation, fmt.num(report.precision), fmt.num(report.recall)))
    return Table(("rater vs human", "models", "pairs", "kappa", "interval", "band", "precision",
                  "recall"), tuple(rows), (False, False, True, True, False, False, True, True),
                 caption="Judges and final labels against the human labels (expected_docs)")


def _demote_headings(markdown: str) -> str:
    """Headings two levels down, so an embedded report sits under a section heading."""
    return re.sub(r"^(#{1,4}) ", r"\1## ", markdown, flags=re.MULTILINE)
