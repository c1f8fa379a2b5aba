"""The judge-agreement section of the reports, in Markdown (``reports/agreement.md``).

Every number has a plain-language reading next to it. A value that is undefined is shown
as "n/a" with the reason; the text never contains NaN.
"""

from __future__ import annotations

import math

import numpy as np

from eval_harness.agreement.dataset_agreement import DatasetAgreement, RaterVsHuman
from eval_harness.agreement.people import format_people_markdown
from eval_harness.judges.dual.record import format_record_markdown
from eval_harness.metrics.agreement import AgreementReport, QueryKappa, landis_koch_label

WORST_QUERIES = 10
_BANDS = ("Poor Agreement", "Slight Agreement", "Fair Agreement", "Moderate Agreement",
          "Substantial Agreement", "Almost Perfect Agreement")
_BAND_RANGES = ("< 0", "0.00-0.20", "0.21-0.40", "0.41-0.60", "0.61-0.80", "0.81-1.00")
_BAR_WIDTH = 40


def format_agreement_markdown(result: DatasetAgreement, *, worst: int = WORST_QUERIES) -> str:
    """The whole report section for one dataset."""
    parts = [_header(result)]
    if result.report is None:
        parts.append(f"## Judge 1 vs judge 2\n\nNo statistics: {result.reason}.\n")
    else:
        parts += [_statistics(result.report, result),
                  _per_query_distribution(result.report),
                  _worst_queries(result, worst)]
    parts += [_retest(result), format_record_markdown(result.record),
              format_people_markdown(result), _versus_human(result), _review_queue(result)]
    return "\n".join(parts)


def _retest(result: DatasetAgreement) -> str:
    """Each judge against itself: the newest test-retest (``judge --retest``)."""
    head = "## Each judge against itself (test-retest)\n\n"
    if not result.retest:
        return (head + "No test-retest stored: run `eval-harness judge --retest` (or set "
                "`judges.retest`) to have each judge re-score a sample of pairs past the "
                "cache.\n")
    lines = "".join(f"- {r.line()}\n" for r in result.retest)
    return (head + lines + "\nA flip is a retest label that differs from the label the "
            "run used; the unstable share counts pairs with any flip. A judge that flips "
            "often gives labels that depend on the draw: read its kappa and P@5 with that "
            "in mind.\n")


def _header(result: DatasetAgreement) -> str:
    verdict = result.verdict
    models = (f"Judge 1: {', '.join(result.judge1_models) or 'unknown model'}; "
              f"judge 2: {', '.join(result.judge2_models) or 'unknown model'}.")
    scored = result.report.n_scored if result.report else 0
    skipped = result.n_judge2_skipped
    staged = (f"{skipped} of them judge 2 was not asked (staged judging: judge 2 scored a "
              "random sample of queries until the lower bound of kappa, with alpha spent over "
              "the planned looks, cleared the floor; these pairs take judge 1's label). "
              ) if skipped else ""
    return (f"# Judge agreement: {result.dataset}\n\n"
            f"**Gate: {verdict.status}.** {verdict.description}\n\n"
            f"{result.n_judged_queries} of {result.n_queries} ground-truth queries are judged: "
            f"{result.n_pairs} (query, document) pairs, {scored} scored by both judges and "
            f"{result.n_pairs - scored} not (left out of every statistic, never guessed). "
            + staged +
            f"{models} A score above {result.settings.relevance_threshold:g} counts as "
            "relevant.\n")


def _statistics(report: AgreementReport, result: DatasetAgreement) -> str:
    kappa, interval, table = report.kappa, report.kappa_interval, report.confusion
    level = f"{interval.confidence:.0%}"
    offset = report.offset
    rows = [
        ("Cohen's kappa (all scored pairs pooled)", _num(kappa.value),
         f"{report.interpretation} (Landis & Koch)" + (f"; {kappa.reason}" if kappa.reason
                                                      else "")),
        (f"{level} interval (bootstrap over {interval.n_queries} queries, "
         f"{interval.n_resamples} resamples)", _interval(interval.low, interval.high),
         interval.reason or f"the gate needs the lower bound to reach "
                            f"{result.settings.kappa_floor:.2f}"),
        ("Observed agreement P_o", _num(kappa.observed_agreement),
         _share_reading(kappa.observed_agreement)),
        ("Chance agreement P_e", _num(kappa.expected_agreement),
         "what two judges with these base rates would agree on by chance"),
        ("Gwet's AC1", _num(report.gwet_ac1.value), _ac1_reading(report)),
        ("Krippendorff's alpha (interval, raw scores)", _num(report.krippendorff_alpha.value),
         _alpha_reading(report.krippendorff_alpha.value, report.krippendorff_alpha.reason)),
        (f"Weighted kappa ({report.weighted_kappa_weights}, anchors "
         f"{', '.join(f'{a:g}' for a in report.weighted_kappa_anchors)})",
         _num(report.weighted_kappa.value),
         f"{landis_koch_label(report.weighted_kappa.value)} on the anchor scale; near misses "
         "count as partial agreement"),
        ("Spearman's rho (raw scores)", _num(report.spearman.rho),
         report.spearman.reason or _rho_reading(report.spearman.rho)),
        ("Mean offset, judge 1 - judge 2", f"{offset.mean_difference:+.3f}"
         if math.isfinite(offset.mean_difference) else "n/a", _offset_reading(report)),
        ("Both relevant / judge 1 only / judge 2 only / neither",
         f"{table.both} / {table.first_only} / {table.second_only} / {table.neither}",
         f"{table.first_only + table.second_only} of {table.n} scored pairs get different "
         "labels"),
    ]
    lines = ["## Judge 1 vs judge 2\n", "| statistic | value | reading |", "|---|---|---|"]
    lines += [f"| {_cell(name)} | {value} | {_cell(reading)} |" for name, value, reading in rows]
    return "\n".join(lines) + "\n"


def _per_query_distribution(report: AgreementReport) -> str:
    values = [q.kappa.value for q in report.per_query if q.kappa.value is not None]
    counts = {band: 0 for band in _BANDS}
    for value in values:
        counts[landis_koch_label(value)] += 1
    unscored = sum(1 for q in report.per_query if q.n_scored == 0)
    degenerate = sum(1 for q in report.per_query if q.n_scored and q.kappa.degenerate)
    largest = max([*counts.values(), unscored, 1])
    lines = ["## Per-query kappa\n",
             "Kappa of each query's own pairs. With few documents per query many are "
             f"degenerate ({degenerate} of {len(report.per_query)} here: both judges gave "
             "one label to all of a query's documents, counted as 1.0, or each judge used a "
             "single label, 0.0), so read the distribution rather than single values.\n",
             "| band | kappa | queries | |", "|---|---|---:|---|"]
    for band, span in zip(_BANDS, _BAND_RANGES):
        lines.append(f"| {band} | {span} | {counts[band]} | {_bar(counts[band], largest)} |")
    lines.append(f"| no pair scored by both | n/a | {unscored} | {_bar(unscored, largest)} |")
    if values:
        q = np.quantile(np.array(values), [0.0, 0.25, 0.5, 0.75, 1.0])
        lines.append(f"\nOver the {len(values)} queries with a value: min {q[0]:.3f}, "
                     f"25% {q[1]:.3f}, median {q[2]:.3f}, 75% {q[3]:.3f}, max {q[4]:.3f}.")
    return "\n".join(lines) + "\n"


def _worst_queries(result: DatasetAgreement, worst: int) -> str:
    report = result.report
    ranked = sorted((q for q in report.per_query if _disagreements(q) > 0),
                    key=lambda q: (q.kappa.value, -_disagreements(q) / q.n_scored,
                                   str(q.query_id)))
    lines = ["## Worst-agreeing queries\n"]
    if not ranked:
        lines.append("No query has a pair the judges label differently.\n")
        return "\n".join(lines)
    lines += [f"The {min(worst, len(ranked))} queries with the lowest kappa among the "
              f"{len(ranked)} where the judges label some pair differently.\n",
              "| query | text | scored pairs | different labels | kappa |",
              "|---|---|---:|---:|---:|"]
    for q in ranked[:worst]:
        text = result.queries.get(q.query_id)
        external, query = (text.external_id, text.text) if text else (str(q.query_id), "")
        lines.append(f"| {_cell(external)} | {_cell(_shorten(query, 80))} | {q.n_scored} | "
                     f"{_disagreements(q)} | {_num(q.kappa.value)} |")
    return "\n".join(lines) + "\n"


def _versus_human(result: DatasetAgreement) -> str:
    lines = ["## Judges vs human labels\n",
             "A judged document counts as human-relevant iff it is in the query's "
             "`expected_docs`; queries with none are left out. Qrels are often incomplete, "
             "so a judge's precision here is a lower bound. *Final labels* are what "
             "downstream uses: the human review verdict where there is one, else the mean "
             "of the two judges' scores.\n",
             "| rater | models | pairs | kappa | interval | band | precision | recall |",
             "|---|---|---:|---:|---|---|---:|---:|"]
    for rater in result.versus_human:
        lines.append(_human_row(rater))
    notes = [f"{r.rater}: {r.reason}" for r in result.versus_human if r.report is None]
    if notes:
        lines.append("\nNot computed: " + "; ".join(_cell(n) for n in notes) + ".")
    return "\n".join(lines) + "\n"


def _human_row(rater: RaterVsHuman) -> str:
    models = ", ".join(rater.models) or "-"
    report = rater.report
    if report is None:
        return f"| {rater.rater} | {_cell(models)} | 0 | n/a | n/a | n/a | n/a | n/a |"
    interval = report.kappa_interval
    return (f"| {rater.rater} | {_cell(models)} | {report.n_scored} | "
            f"{_num(report.kappa.value)} | {_interval(interval.low, interval.high)} | "
            f"{report.interpretation} | {_num(report.precision)} | {_num(report.recall)} |")


def _review_queue(result: DatasetAgreement) -> str:
    threshold = result.settings.disagreement_threshold
    return ("## Review queue\n\n"
            f"{result.review_pending} pair(s) wait for a human verdict (judge scores more "
            f"than {threshold:g} apart), {result.review_adjudicated} adjudicated; "
            f"{result.n_adjudicated_overrides} verdict(s) override the judges in the final "
            "labels. Export with `eval-harness review export FILE.csv`, fill in `verdict` "
            "(relevant / not relevant), then `eval-harness review import FILE.csv`.\n")


# ---------------------------------------------------------------------------------------
# Readings and formatting


def _share_reading(p_o: float | None) -> str:
    return "n/a" if p_o is None else f"the judges give the same label to {p_o:.0%} of pairs"


def _ac1_reading(report: AgreementReport) -> str:
    ac1, kappa = report.gwet_ac1.value, report.kappa.value
    if ac1 is None or kappa is None:
        return "like kappa, but not pulled down when one label dominates"
    if ac1 - kappa > 0.15:
        return ("well above kappa: one label dominates, and kappa understates how often the "
                "judges agree (the prevalence paradox)")
    return "close to kappa: label prevalence does not distort kappa here"


def _alpha_reading(alpha: float | None, reason: str | None) -> str:
    if alpha is None:
        return reason or "undefined"
    if alpha >= 0.8:
        verdict = "reliable"
    elif alpha >= 0.667:
        verdict = "tentative conclusions only"
    else:
        verdict = "unreliable"
    return (f"agreement on the raw scores: {verdict} (Krippendorff: >= 0.80 reliable, "
            ">= 0.667 tentative)")


def _rho_reading(rho: float | None) -> str:
    if rho is None:
        return "undefined"
    strength = "strongly" if abs(rho) >= 0.7 else "moderately" if abs(rho) >= 0.4 else "weakly"
    return f"the judges rank pairs {strength} alike"


def _offset_reading(report: AgreementReport) -> str:
    offset = report.offset
    if offset.p_value is None:
        return offset.reason or "no test"
    if offset.p_value < 0.05:
        higher = "judge 1" if offset.mean_difference > 0 else "judge 2"
        return (f"{higher} scores systematically higher (Wilcoxon p = {offset.p_value:.3g}; "
                "descriptive, pairs of a query are not independent)")
    return f"no clear systematic offset (Wilcoxon p = {offset.p_value:.3g})"


def _disagreements(query: QueryKappa) -> int:
    p_o = query.kappa.observed_agreement
    return 0 if p_o is None else round((1.0 - p_o) * query.n_scored)


def _num(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _interval(low: float | None, high: float | None) -> str:
    return "n/a" if low is None or high is None else f"[{_num(low)}, {_num(high)}]"


def _bar(count: int, largest: int) -> str:
    return "#" * math.ceil(_BAR_WIDTH * count / largest) if count else ""


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")
