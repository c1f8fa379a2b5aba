"""Quality-gates domain: are the answers we serve good enough?

``answers`` is the answers relation, partitioned by day (UTC) of ``created_at``. Materializing
a partition evaluates the answers of that day that are new or changed since their stored
results (the library's incremental runner) and stores per-answer results. Each enabled gate
is a partitioned asset check on it, computed from the stored results of every answer of the
partition; a blocking gate fails with ERROR severity, a warning gate with WARN.

The partitions (their first day) and the set of checks are structure, which Dagster needs
when it loads the definitions, so they come from the config.yaml read at that moment (the
same file the resources read: ``EVAL_HARNESS_CONFIG`` or ./config.yaml). Thresholds, pass
rates and severities are read at run time. Partitioned asset checks are a preview feature
of Dagster 1.13 (the version pinned in requirements.lock); its warning is silenced here only.
"""

import warnings
from datetime import date

import dagster as dg

from assets.resources import EvalSettings, LiveStore
from eval_harness.answers import TimeWindow
from eval_harness.gates.registry import GATE_DESCRIPTIONS, Gate, configured_gates, enabled_gate_names
from eval_harness.gates.report import GateSummary
from eval_harness.gates.runner import evaluate_window, summarize_gates
from eval_harness.settings import ConfigError, Settings, load_settings

GROUP = "quality_gates"
ANSWERS_ASSET = "answers"
QUALITY_GATE_JOB = "quality_gate_job"


def answers_partitions(start: date) -> dg.DailyPartitionsDefinition:
    """Daily UTC partitions from ``start``; the current day is a partition (end_offset=1),
    so answers arriving today can be gated today."""
    return dg.DailyPartitionsDefinition(start_date=start.isoformat(), timezone="UTC",
                                        end_offset=1)


def enabled_gates(settings: Settings) -> dict[str, Gate]:
    return {gate.name: gate for gate in configured_gates(settings)}


def _number(value):
    return dg.MetadataValue.null() if value is None else dg.MetadataValue.float(float(value))


def check_metadata(summary: GateSummary) -> dict:
    low, high = summary.pass_rate_interval or (None, None)
    return {
        "pass_rate": _number(summary.pass_rate),
        "pass_rate_wilson95_low": _number(low),
        "pass_rate_wilson95_high": _number(high),
        "min_pass_rate": summary.min_pass_rate,
        "mean_score": _number(summary.mean_score),
        "threshold": summary.threshold,
        "answers": summary.answers,
        "passed_answers": summary.passed_answers,
        "unscored": summary.unscored,
        "evaluated_now": summary.evaluated_now,
        "worst_answer_ids": dg.MetadataValue.json(list(summary.worst_answer_ids)),
        "latency_p50_ms": _number(summary.latency_p50_ms),
        "latency_p95_ms": _number(summary.latency_p95_ms),
        "summary": dg.MetadataValue.json(summary.to_dict()),
    }


def build_answers_asset(partitions: dg.PartitionsDefinition) -> dg.AssetsDefinition:
    @dg.asset(
        name=ANSWERS_ASSET, group_name=GROUP, partitions_def=partitions,
        description="The answers relation (one partition per UTC day of created_at); "
                    "materializing evaluates new or changed answers with every enabled gate.")
    def answers_asset(context: dg.AssetExecutionContext, settings: EvalSettings,
                      store: LiveStore) -> dg.MaterializeResult:
        cfg = settings.load()
        gates = list(enabled_gates(cfg).values())
        window = TimeWindow.day(context.partition_key)
        run = evaluate_window(store.location(), window, gates,
                              relation=cfg.quality_gates.answers_relation, run_id=context.run_id)
        context.log.info(f"{window.describe()}: evaluated {run.answers_read} new or changed "
                         f"answer(s) in {run.seconds:.2f} s")
        metadata = {"window_start": window.start.isoformat(), "window_end": window.end.isoformat(),
                    "answers_evaluated_now": run.answers_read, "seconds": run.seconds}
        with store.location().connection() as conn:  # pass rates: the UI plots them per day
            summaries = summarize_gates(conn, window, gates,
                                        relation=cfg.quality_gates.answers_relation,
                                        run_id=context.run_id)
        metadata["answers"] = summaries[0].answers if summaries else 0
        for gate, summary in zip(gates, summaries):
            metadata[f"{gate.name}_pass_rate"] = _number(summary.pass_rate)
            metadata[f"{gate.name}_evaluated_now"] = run.evaluated.get(gate.name, 0)
            metadata[f"{gate.name}_unscored_now"] = run.unscored.get(gate.name, 0)
        return dg.MaterializeResult(metadata=metadata)

    return answers_asset


def build_gate_check(gate_name: str,
                     partitions: dg.PartitionsDefinition) -> dg.AssetChecksDefinition:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)

        # blocking=True on every gate: Dagster blocks only on ERROR severity, which the
        # configured `blocking` decides at run time; a warning gate fails with WARN.
        @dg.asset_check(asset=ANSWERS_ASSET, name=gate_name, blocking=True,
                        partitions_def=partitions, description=(
                            f"{GATE_DESCRIPTIONS[gate_name]} Blocks only when "
                            f"quality_gates.gates.{gate_name}.blocking is true; otherwise a "
                            "failure is a warning (WARN severity)."))
        def gate_check(context: dg.AssetCheckExecutionContext, settings: EvalSettings,
                       store: LiveStore) -> dg.AssetCheckResult:
            cfg = settings.load()
            gate = enabled_gates(cfg).get(gate_name)
            if gate is None:
                raise ConfigError(f"quality gate '{gate_name}' is disabled in config.yaml; "
                                  "reload the Dagster definitions.")
            window = TimeWindow.day(context.partition_key)
            with store.location().connection() as conn:
                summary = summarize_gates(conn, window, [gate],
                                          relation=cfg.quality_gates.answers_relation,
                                          run_id=context.run.run_id)[0]
            return dg.AssetCheckResult(
                passed=summary.passed,
                severity=dg.AssetCheckSeverity.ERROR if gate.blocking else
                dg.AssetCheckSeverity.WARN,
                description=summary.verdict, metadata=check_metadata(summary))

    return gate_check


def quality_gate_assets(settings: Settings):
    """The partitioned ``answers`` asset and one check per enabled gate, from ``settings``."""
    partitions = answers_partitions(settings.quality_gates.partition_start)
    checks = [build_gate_check(name, partitions)
              for name in enabled_gate_names(settings.quality_gates)]
    return build_answers_asset(partitions), checks


quality_gate_job = dg.define_asset_job(
    QUALITY_GATE_JOB, selection=dg.AssetSelection.assets(ANSWERS_ASSET),
    description="Evaluate one day's new or changed answers and run every quality-gate check.")


def quality_gate_definitions(settings: Settings) -> dg.Definitions:
    answers_asset, checks = quality_gate_assets(settings)
    return dg.Definitions(assets=[answers_asset], asset_checks=checks, jobs=[quality_gate_job])


defs = quality_gate_definitions(load_settings())
