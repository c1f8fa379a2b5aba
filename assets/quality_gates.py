"""Quality-gates domain: are the answers we serve good enough?

``answers`` is the answers relation, partitioned by day (UTC) of ``created_at``. Materializing
a partition evaluates the answers of that day that are new or changed since their stored
results (the library's incremental runner) and stores per-answer results. Each enabled gate
is a partitioned asset check on it, computed from the stored results of every answer of the
partition; a blocking gate fails with ERROR severity, a warning gate with WARN.

The partitions (their first day), the set of checks and whether each blocks are structure,
which Dagster needs when it loads the definitions, so they come from the settings the
definitions are built with (:func:`quality_gate_definitions`; the resources read the same file
again at run time).
Thresholds and pass rates are read at run time. A run whose config.yaml enables, disables
or (un)blocks a gate since the definitions were loaded stops before it evaluates anything and
asks for a reload: otherwise the partition would be materialized without a result for a
check the UI lists, and the UI would show that check's result of an older run beside the
current ones. Every check result names its partition (metadata ``partition``).

Partitioned asset checks are a preview feature of Dagster 1.13 (the version pinned in
requirements.lock); its warning is silenced here only.
"""

import warnings
from collections.abc import Iterator, Mapping
from datetime import date

import dagster as dg

from eval_harness.gates.answers_mapping import answers_relation, answers_relation_of
from eval_harness.gates.gate import GATE_DESCRIPTIONS, Gate
from eval_harness.gates.registry import configured_gates, enabled_gate_names
from eval_harness.gates.report import GateSummary
from eval_harness.gates.runner import evaluate_window, summarize_gates
from eval_harness.gates.window import TimeWindow
from eval_harness.settings import ConfigError, Settings
from eval_harness_pipelines.check_outcomes import below, check_outcome, readable
from eval_harness_pipelines.resources import EvalSettings, LiveStore

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


def declared_gates(settings: Settings) -> dict[str, bool]:
    """The enabled gates of ``settings`` and whether each blocks: the structure of the
    definitions (one check per gate, declared blocking or not)."""
    gates = settings.quality_gates
    return {name: gates.gate(name).blocking for name in enabled_gate_names(gates)}


def require_loaded_gates(settings: Settings, loaded: Mapping[str, bool]) -> None:
    """Raise a one-sentence :class:`ConfigError` when config.yaml no longer has the gates
    (or blocking flags) the definitions were loaded with."""
    now = declared_gates(settings)
    if now == dict(loaded):
        return
    changes = [f"enables {name}" for name in now if name not in loaded]
    changes += [f"disables {name}" for name in loaded if name not in now]
    changes += [f"makes {name} {'blocking' if now[name] else 'non-blocking'}"
                for name in now if name in loaded and now[name] != loaded[name]]
    raise ConfigError(f"config.yaml now {', '.join(changes)} (quality_gates.gates) but the "
                      "Dagster definitions were loaded before; reload them (the UI's "
                      "Reload definitions, or restart dagster dev) and run again.")


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
        "decided_by": summary.decided_by,
        "summary": dg.MetadataValue.json(summary.to_dict()),
    }


def build_answers_asset(partitions: dg.PartitionsDefinition,
                        gates: Mapping[str, bool]) -> dg.AssetsDefinition:
    """The partitioned ``answers`` asset; ``gates`` are the checks it is defined with (gate
    name -> blocking, :func:`declared_gates`), which config.yaml must still hold at run
    time."""

    @dg.asset(
        name=ANSWERS_ASSET, group_name=GROUP, partitions_def=partitions,
        description="The answers relation (one partition per UTC day of created_at); "
                    "materializing evaluates new or changed answers with every enabled gate.")
    def answers_asset(context: dg.AssetExecutionContext, settings: EvalSettings,
                      store: LiveStore) -> dg.MaterializeResult:
        cfg = settings.load()
        require_loaded_gates(cfg, gates)  # before anything is evaluated or materialized
        enabled = list(enabled_gates(cfg).values())
        window = TimeWindow.day(context.partition_key)
        relation = answers_relation_of(store.location(), cfg)  # a mapping: checked first
        run = evaluate_window(store.location(), window, enabled, relation=relation,
                              run_id=context.run_id)
        context.log.info(f"{window.describe()}: evaluated {run.answers_read} new or changed "
                         f"answer(s) in {run.seconds:.2f} s")
        metadata = {"window_start": window.start.isoformat(), "window_end": window.end.isoformat(),
                    "answers_evaluated_now": run.answers_read, "seconds": run.seconds,
                    "gates": ", ".join(gate.name for gate in enabled)}
        with store.location().connection() as conn:  # pass rates: the UI plots them per day
            summaries = summarize_gates(conn, window, enabled, relation=relation,
                                        run_id=context.run_id)
        metadata["answers"] = summaries[0].answers if summaries else 0
        for gate, summary in zip(enabled, summaries):
            metadata[f"{gate.name}_pass_rate"] = _number(summary.pass_rate)
            metadata[f"{gate.name}_evaluated_now"] = run.evaluated.get(gate.name, 0)
            metadata[f"{gate.name}_unscored_now"] = run.unscored.get(gate.name, 0)
        return dg.MaterializeResult(metadata=readable(metadata))

    return answers_asset


def build_gate_check(gate_name: str, partitions: dg.PartitionsDefinition,
                     gates: Mapping[str, bool]) -> dg.AssetChecksDefinition:
    """The check of one gate on the ``answers`` partition; it blocks (a failure is an ERROR
    that fails the run) when ``gates[gate_name]`` is true, else a failure warns."""
    blocking = gates[gate_name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)

        @dg.asset_check(asset=ANSWERS_ASSET, name=gate_name, blocking=blocking,
                        partitions_def=partitions, description=(
                            f"{GATE_DESCRIPTIONS[gate_name]} "
                            + (f"Blocking (quality_gates.gates.{gate_name}.blocking): a failure "
                               "is an ERROR and fails the run." if blocking else
                               f"Warns only (quality_gates.gates.{gate_name}.blocking: false): "
                               "a failure is a warning.")))
        def gate_check(context: dg.AssetCheckExecutionContext, settings: EvalSettings,
                       store: LiveStore) -> Iterator[dg.AssetCheckResult]:
            cfg = settings.load()
            require_loaded_gates(cfg, gates)
            gate = enabled_gates(cfg)[gate_name]
            day = context.partition_key
            window = TimeWindow.day(day)
            with store.location().connection() as conn:
                summary = summarize_gates(conn, window, [gate],
                                          relation=answers_relation(conn, cfg),
                                          run_id=context.run.run_id)[0]
            result = dg.AssetCheckResult(
                passed=summary.passed,
                severity=dg.AssetCheckSeverity.ERROR if blocking else dg.AssetCheckSeverity.WARN,
                description=summary.decision,
                metadata=dict(readable(check_metadata(summary)), partition=day))
            yield from check_outcome(result, name=gate_name, blocking=blocking,
                                     figure=_gate_figure(summary, day), figures={
                                         "partition": day, "pass_rate": summary.pass_rate,
                                         "min_pass_rate": summary.min_pass_rate,
                                         "threshold": summary.threshold,
                                         "answers": summary.answers})

    return gate_check


def _gate_figure(summary: GateSummary, day: str) -> str:
    """The failed gate in a few words: its pass rate on ``day`` against the minimum."""
    if summary.answers == 0:
        return f"{day}: {summary.verdict}"
    rate = below(summary.pass_rate, summary.min_pass_rate, name="minimum")
    return (f"pass rate {rate} on {day} ({summary.passed_answers} of {summary.answers} "
            f"answers reach {summary.measure} {summary.threshold:g})")


def quality_gate_assets(settings: Settings):
    """The partitioned ``answers`` asset and one check per enabled gate, from ``settings``."""
    partitions = answers_partitions(settings.quality_gates.partition_start)
    gates = declared_gates(settings)
    checks = [build_gate_check(name, partitions, gates) for name in gates]
    return build_answers_asset(partitions, gates), checks


quality_gate_job = dg.define_asset_job(
    QUALITY_GATE_JOB, selection=dg.AssetSelection.assets(ANSWERS_ASSET),
    description="Evaluate one day's new or changed answers and run every quality-gate check.")


def quality_gate_definitions(settings: Settings) -> dg.Definitions:
    answers_asset, checks = quality_gate_assets(settings)
    return dg.Definitions(assets=[answers_asset], asset_checks=checks, jobs=[quality_gate_job])

