"""Agreement domain: are the dual-judge relevance labels trustworthy enough to calibrate on?"""


from typing import Optional

import dagster as dg

from assets.resources import EvalSettings, LiveStore
from eval_harness.agreement_data import dataset_agreement, kappa_gate, stand_in_note
from eval_harness.agreement_report_md import format_agreement_markdown
from eval_harness.reports import write_report
from eval_harness.review import queue_disagreements

GROUP = "agreement"
REPORT_NAME = "agreement.md"


class AgreementConfig(dg.Config):
    dataset: Optional[str] = None  # a key of `datasets` in config.yaml; default_dataset if unset


@dg.asset(
    group_name=GROUP,
    deps=["dual_judge_scores"],
    description="Cohen's kappa of the two relevance judges with a query-bootstrap interval, "
                "judges vs human labels, the disagreement review queue and reports/agreement.md.")
def judge_agreement(context: dg.AssetExecutionContext, config: AgreementConfig,
                    settings: EvalSettings, store: LiveStore) -> dg.MaterializeResult:
    cfg = settings.load()
    dataset = config.dataset or cfg.default_dataset
    with store.location().connection() as conn:
        queued = queue_disagreements(conn, dataset,
                                     threshold=cfg.agreement.disagreement_threshold)
        result = dataset_agreement(conn, dataset, cfg.agreement)
    text = format_agreement_markdown(result)
    path = write_report(cfg.root / "reports", REPORT_NAME, text)
    context.log.info(f"review queue: {queued}; {result.gate.description}")
    metadata = dict(result.summary())
    metadata.update({"judge1_models": ", ".join(result.judge1_models),
                     "judge2_models": ", ".join(result.judge2_models),
                     "review_queued_new": queued.new, "review_requeued": queued.requeued,
                     "report_path": str(path), "report": dg.MetadataValue.md(text)})
    return dg.MaterializeResult(metadata=metadata)


@dg.asset_check(
    asset=judge_agreement, blocking=True,
    description="The lower confidence bound of pooled kappa reaches agreement.kappa_floor; "
                "otherwise downstream assets do not run on these labels (labels from local "
                "stand-ins for unset API judges warn instead, agreement.stand_in_judges).")
def kappa_lower_bound_above_floor(context: dg.AssetCheckExecutionContext,
                                  settings: EvalSettings) -> dg.AssetCheckResult:
    event = context.instance.get_latest_materialization_event(judge_agreement.key)
    if event is None or event.asset_materialization is None:
        return dg.AssetCheckResult(
            passed=False, severity=dg.AssetCheckSeverity.ERROR,
            description="judge_agreement has not been materialized; run it first.")
    seen = {key: value.value for key, value in event.asset_materialization.metadata.items()}
    gate = kappa_gate(lower_bound=seen.get("kappa_ci_low"), kappa=seen.get("kappa"),
                      floor=seen["kappa_floor"], n_scored=seen.get("n_scored", 0),
                      confidence=seen.get("confidence", 0.95))
    cfg = settings.load()
    used = tuple(tuple(m for m in str(seen.get(key) or "").split(", ") if m)
                 for key in ("judge1_models", "judge2_models"))
    note = stand_in_note((cfg.judges.judge1, cfg.judges.judge2), used)
    severity, description = dg.AssetCheckSeverity.ERROR, gate.description
    if note is not None and not gate.passed and cfg.agreement.stand_in_judges == "warn":
        # WARN severity does not block: calibration still runs, the failure stays visible
        severity = dg.AssetCheckSeverity.WARN
        description += (f" Only a warning: {note}; set the keys for the real gate "
                        "(agreement.stand_in_judges: block makes it block anyway).")
    return dg.AssetCheckResult(
        passed=gate.passed, severity=severity, description=description,
        metadata={"lower_bound": gate.lower_bound, "kappa": gate.kappa, "floor": gate.floor,
                  "n_scored": gate.n_scored, "dataset": seen.get("dataset"),
                  "stand_in_judges": note or "no"})


agreement_job = dg.define_asset_job(
    "agreement_job", selection=dg.AssetSelection.groups(GROUP),
    description="Judge agreement of the default dataset, the review queue and the kappa gate.")

defs = dg.Definitions(assets=[judge_agreement], asset_checks=[kappa_lower_bound_above_floor],
                      jobs=[agreement_job])
