"""Reports domain: the per-run HTML + Markdown report people read.

``run_report`` reads what the other domains stored (judge labels, the calibration history,
gate results, the cost log) and writes ``reports/runs/<time>-<run>/report.html`` and
``report.md`` plus ``reports/latest.*``; its headline numbers go to asset metadata, so the
UI plots them run over run. It is deliberately *not* downstream of the calibration assets:
a blocking check that stops calibration must not stop the report that explains why. After
every nightly_job run, successful or not, a sensor asks for ``report_job`` on that run
(:mod:`eval_harness_pipelines.schedules`).
"""

from datetime import date

import dagster as dg

from eval_harness.reporting.run_report import build_run_report
from eval_harness_pipelines.check_outcomes import rounded
from eval_harness_pipelines.resources import EvalSettings, LiveStore

GROUP = "reports"
REPORT_JOB = "report_job"


class RunReportConfig(dg.Config):
    dataset: str | None = None        # default_dataset if unset
    days: list[str] | None = None      # answers partitions (YYYY-MM-DD); default: latest
    source_run_id: str | None = None   # the run the report describes; default: this one
    related_run_ids: list[str] | None = None  # runs whose cost counts as the source run's


def _metadata_value(value):
    if isinstance(value, bool):
        return dg.MetadataValue.bool(value)
    if isinstance(value, int):
        return dg.MetadataValue.int(value)
    if isinstance(value, float):
        return dg.MetadataValue.float(rounded(value))
    return dg.MetadataValue.null() if value is None else dg.MetadataValue.text(str(value))


@dg.asset(group_name=GROUP,
          description="The run report: agreement, calibration grid and P@5 verdict, quality "
                      "gates with their worst answers, cost by provider and trends over past "
                      "runs (reports/latest.html).")
def run_report(context: dg.AssetExecutionContext, config: RunReportConfig,
               settings: EvalSettings, store: LiveStore) -> dg.MaterializeResult:
    cfg = settings.load()
    days = [date.fromisoformat(day) for day in config.days] if config.days else None
    with store.location().connection() as conn:
        report = build_run_report(conn, cfg, run_id=config.source_run_id or context.run_id,
                                  dataset=config.dataset, days=days,
                                  related_run_ids=config.related_run_ids or ())
    context.log.info(f"report: {report.html_path}")
    metadata = {key: _metadata_value(value) for key, value in report.metrics.items()}
    metadata.update({"html_path": dg.MetadataValue.path(str(report.html_path)),
                     "markdown_path": dg.MetadataValue.path(str(report.markdown_path)),
                     "latest_html_path": dg.MetadataValue.path(str(report.latest_html_path)),
                     "sections": ", ".join(report.sections)})
    return dg.MaterializeResult(metadata=metadata)


report_job = dg.define_asset_job(
    REPORT_JOB, selection=dg.AssetSelection.assets(run_report),
    description="Write the run report (HTML + Markdown) from what the store holds now.")


defs = dg.Definitions(assets=[run_report], jobs=[report_job])
