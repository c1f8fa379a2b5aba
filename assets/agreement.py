"""Agreement domain: are the dual-judge relevance labels trustworthy enough to calibrate on?"""


from collections.abc import Iterator
from typing import Optional

import dagster as dg

from eval_harness_pipelines.check_outcomes import below, check_outcome, readable
from eval_harness_pipelines.resources import EvalSettings, LiveStore
from eval_harness.agreement.dataset_agreement import dataset_agreement
from eval_harness.agreement.kappa_gate import kappa_gate, kappa_verdict
from eval_harness.agreement.people import recorded_agreement
from eval_harness.agreement.report import format_agreement_markdown
from eval_harness.files import write_report
from eval_harness.agreement.review import queue_disagreements

GROUP = "agreement"
REPORT_NAME = "agreement.md"
GATE_INPUTS = "kappa_gate_inputs"  # exact figures for the check; the others are rounded


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
        result = dataset_agreement(conn, dataset, cfg.agreement, configured_judges=(
            cfg.judges.judge1, cfg.judges.judge2))
        result, recorded = recorded_agreement(conn, result)  # record and anchors get people
    text = format_agreement_markdown(result)
    path = write_report(cfg.root / "reports", REPORT_NAME, text)
    context.log.info(f"review queue: {queued}; {result.gate.description}")
    for people in result.people:
        context.log.info(people.line())
    summary = result.summary()
    metadata = dict(summary)
    metadata.update({"judge1_models": ", ".join(result.judge1_models),
                     "judge2_models": ", ".join(result.judge2_models),
                     "review_queued_new": queued.new, "review_requeued": queued.requeued,
                     "people_recorded": recorded.written,
                     "anchors_given_verdicts": recorded.anchors_updated,
                     "report_path": dg.MetadataValue.path(str(path)),
                     "report": dg.MetadataValue.md(text)})
    metadata = readable(metadata)
    metadata[GATE_INPUTS] = dg.MetadataValue.json(
        {key: summary[key] for key in ("kappa_ci_low", "kappa", "kappa_floor", "n_scored",
                                       "confidence")})
    return dg.MaterializeResult(metadata=metadata)


# Declared blocking: a failure on the configured judges' labels stops calibration. Whether
# the labels came from local stand-ins (a failure on theirs only warns under
# agreement.stand_in_judges: warn) is known only when the check reads them, long after the
# definitions were loaded; such a failure is a WARN result, which Dagster does not block on,
# and its metadata says blocks_downstream: false.
@dg.asset_check(
    asset=judge_agreement, blocking=True,
    description="Blocking: the lower confidence bound of pooled kappa must reach "
                "agreement.kappa_floor, else calibration does not run on these labels. When "
                "the labels come from local stand-ins for API judges whose keys are unset, a "
                "failure only warns (agreement.stand_in_judges: warn, the default; block "
                "makes it block); each result's metadata says whether it blocked.")
def kappa_lower_bound_above_floor(context: dg.AssetCheckExecutionContext,
                                  settings: EvalSettings) -> Iterator[dg.AssetCheckResult]:
    event = context.instance.get_latest_materialization_event(judge_agreement.key)
    if event is None or event.asset_materialization is None:
        description = "judge_agreement has not been materialized; run it first."
        yield from check_outcome(
            dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.ERROR,
                                description=description),
            name="kappa_lower_bound_above_floor", blocking=True, figure=description)
        return
    seen = {key: value.value for key, value in event.asset_materialization.metadata.items()}
    inputs = seen.get(GATE_INPUTS) or seen  # materializations from before the exact inputs
    gate = kappa_gate(lower_bound=inputs.get("kappa_ci_low"), kappa=inputs.get("kappa"),
                      floor=inputs["kappa_floor"], n_scored=inputs.get("n_scored", 0),
                      confidence=inputs.get("confidence", 0.95))
    cfg = settings.load()
    used = tuple(tuple(m for m in str(seen.get(key) or "").split(", ") if m)
                 for key in ("judge1_models", "judge2_models"))
    verdict = kappa_verdict(gate, configured=(cfg.judges.judge1, cfg.judges.judge2),
                            used=used, stand_in_judges=cfg.agreement.stand_in_judges)
    # WARN severity does not block: calibration still runs, the failure stays visible
    severity = (dg.AssetCheckSeverity.WARN if verdict.status == "WARN"
                else dg.AssetCheckSeverity.ERROR)
    result = dg.AssetCheckResult(
        passed=gate.passed, severity=severity, description=verdict.description,
        metadata=readable({
            "lower_bound": gate.lower_bound, "kappa": gate.kappa, "floor": gate.floor,
            "n_scored": gate.n_scored, "dataset": seen.get("dataset"),
            "verdict": verdict.status, "stand_in_judges": verdict.stand_ins or "no",
            "blocks_downstream": verdict.blocks}))
    yield from check_outcome(result, name="kappa_lower_bound_above_floor", blocking=True,
                             figure=_kappa_figure(gate), figures={
                                 "lower_bound": gate.lower_bound, "floor": gate.floor,
                                 "kappa": gate.kappa, "n_scored": gate.n_scored})


def _kappa_figure(gate) -> str:
    """The failed gate in a few words: the lower bound against the floor, or why none."""
    if gate.lower_bound is None:
        return gate.description
    kappa = "undefined" if gate.kappa is None else f"{gate.kappa:.3f}"
    return (f"kappa lower bound {below(gate.lower_bound, gate.floor, name='floor')} "
            f"(kappa {kappa}, {gate.n_scored} pairs)")


agreement_job = dg.define_asset_job(
    "agreement_job", selection=dg.AssetSelection.groups(GROUP),
    description="Judge agreement of the default dataset, the review queue and the kappa gate.")

defs = dg.Definitions(assets=[judge_agreement], asset_checks=[kappa_lower_bound_above_floor],
                      jobs=[agreement_job])
