"""What a dual-judge run did (:func:`eval_harness.judges.dual.run.judge_dataset`): queries and
pairs planned, written and changed, each judge's outcomes, calls, cache hits, tokens, cost, the
pooled kappa and why the run stopped early, as text, strict JSON and flat Dagster metadata."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from eval_harness.judges.anchors.drift import AnchorComparison
from eval_harness.judges.anchors.refreeze import Refrozen
from eval_harness.judges.client.batch import BatchReport
from eval_harness.judges.protocol import JudgeResult
from eval_harness.judges.retest.self_agreement import JudgeRetest
from eval_harness.judges.staging.staged import StagingReport


@dataclass
class JudgeCounts:
    scored: int = 0
    unscored: int = 0
    failed: int = 0

    def add(self, result: JudgeResult) -> None:
        setattr(self, result.outcome.value, getattr(self, result.outcome.value) + 1)


@dataclass
class JudgeRunSummary:
    """What a dual-judge run did; ``to_dict`` is strict JSON, ``metadata`` flat values."""

    dataset: str
    run_id: str
    mode: str                       # "live" | "batch"
    judge1: str
    judge2: str
    notices: tuple[str, ...]
    queries: int = 0                # planned
    queries_written: int = 0        # judged and stored (a rerun stores the same row again)
    queries_changed: int = 0        # of those, new or different from what was stored
    pairs: int = 0                  # planned (query, document) pairs
    pool_sizes: dict | None = None  # judged documents per query: {"min", "median", "max"}
    pairs_written: int = 0
    judge1_counts: JudgeCounts = field(default_factory=JudgeCounts)
    judge2_counts: JudgeCounts = field(default_factory=JudgeCounts)
    provider_calls: int = 0
    billed_calls: int = 0
    batch_requests: int = 0
    cache_hits: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    # judges.budget_usd is one budget for every process judging the dataset on one UTC day:
    # its scope ("dataset@day"), the limit, and what they spent together (this run included)
    budget_scope: str | None = None
    budget_usd: float | None = None
    spent_together_usd: float | None = None
    refused: int = 0                # requests refused as rate limited (429)
    limiter_wait_s: float = 0.0     # summed over calls: waiting for the rate limiter
    backoff_wait_s: float = 0.0     # summed over calls: retry backoffs
    paused_s: float = 0.0           # sending to a provider paused after a congestion
    wait_notices: tuple[str, ...] = ()  # a server asked to wait longer than calls wait
    pooled_kappa: float | None = None
    stopped: str | None = None      # "budget" / "quota" / "auth" / "interrupt" / "store"
                                    # when the budget, a provider's exhausted quota, a
                                    # rejected key, the user or the store ended the run early
    stop_reason: str | None = None
    changed_meanwhile: int = 0      # queries re-ingested during the run, left unwritten
    queries_waited: int = 0         # queries another run was judging: judged last, from its
                                    # cached replies
    write_back: str | None = None   # live.write_judge_scores: what was written back, or why not
    elapsed_s: float = 0.0
    batch: BatchReport | None = None
    shard: str | None = None        # "i/n": only the queries of that shard were planned
    judge2_skipped: int = 0         # pairs judge 2 was not asked (staged judging)
    staging: StagingReport | None = None
    judgements_kept: int = 0        # LLM results with a stored reply, local ones written
    judgements_stored: int | None = None  # a stopped run: the plan's judgements in the store,
                                          # from this run or an earlier one
    retest: list[JudgeRetest] | None = None  # judges.retest / --retest: each judge's figures
    anchors: list[AnchorComparison] | None = None  # judges.anchors: each judge vs its frozen self
    anchors_frozen: int = 0         # pairs this run froze as the anchor set (its first run)
    budget_lines: list[str] = field(default_factory=list)  # a retest/anchor line used up
    refrozen: Refrozen | None = None  # judge --refreeze-anchors: the set dropped, the new one

    def kept(self) -> str:
        """What a run the store went away under kept (the store cannot be asked then)."""
        return f"{self.judgements_kept:,} of {2 * self.pairs:,} judgements kept" + self._waiting()

    def stored(self) -> str:
        """What a run the user stopped leaves stored, for the line the command prints: the
        planned judgements in the store, whichever run stored them (a rerun does the rest)."""
        stored = (self.judgements_kept if self.judgements_stored is None
                  else self.judgements_stored)
        return f"{stored:,} of {2 * self.pairs:,} judgements stored" + self._waiting()

    def _waiting(self) -> str:
        if self.batch is None or not self.batch.unfinished:
            return ""
        return (f" ({self.batch.unfinished:,} more wait in provider batches still running: "
                "the next batch run collects them without paying again)")

    @property
    def scored(self) -> int:
        return self.judge1_counts.scored + self.judge2_counts.scored

    @property
    def unscored(self) -> int:
        return self.judge1_counts.unscored + self.judge2_counts.unscored

    @property
    def failed(self) -> int:
        return self.judge1_counts.failed + self.judge2_counts.failed

    @property
    def complete(self) -> bool:
        """Every planned query was written and every judgement has a score (an unscored or
        failed judgement leaves the ground truth incomplete)."""
        return (self.stopped is None and self.failed == 0 and self.unscored == 0
                and self.queries_written == self.queries)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(notices=list(self.notices), wait_notices=list(self.wait_notices),
                    limiter_wait_s=round(self.limiter_wait_s, 3),
                    backoff_wait_s=round(self.backoff_wait_s, 3),
                    paused_s=round(self.paused_s, 3),
                    scored=self.scored, unscored=self.unscored,
                    failed=self.failed, complete=self.complete,
                    staging=None if self.staging is None else self.staging.to_dict(),
                    retest=None if self.retest is None else [r.to_dict() for r in self.retest],
                    anchors=None if self.anchors is None
                    else [a.to_dict() for a in self.anchors],
                    refrozen=None if self.refrozen is None else self.refrozen.to_dict(),
                    cost_usd=round(self.cost_usd, 6), elapsed_s=round(self.elapsed_s, 3),
                    spent_together_usd=None if self.spent_together_usd is None
                    else round(self.spent_together_usd, 6))
        return data

    def metadata(self) -> dict[str, Any]:
        """Flat values for Dagster metadata (None stays None; no NaN)."""
        return {"dataset": self.dataset, "run_id": self.run_id, "mode": self.mode,
                "judge1": self.judge1, "judge2": self.judge2,
                "fallback_notices": "; ".join(self.notices) or "none",
                "queries": self.queries, "queries_written": self.queries_written,
                "queries_changed": self.queries_changed,
                "pairs": self.pairs, "pool_size_min": (self.pool_sizes or {}).get("min"),
                "pool_size_median": (self.pool_sizes or {}).get("median"),
                "pool_size_max": (self.pool_sizes or {}).get("max"), "scored": self.scored,
                "unscored": self.unscored,
                "failed": self.failed, "provider_calls": self.provider_calls,
                "batch_requests": self.batch_requests, "cache_hits": self.cache_hits,
                "retries": self.retries, "refused": self.refused,
                "waiting_s": round(self.limiter_wait_s + self.backoff_wait_s, 3),
                "paused_s": round(self.paused_s, 3),
                "wait_notices": "; ".join(self.wait_notices) or "none",
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "cost_usd": round(self.cost_usd, 6),
                "spent_together_usd": None if self.spent_together_usd is None
                else round(self.spent_together_usd, 6),
                "pooled_kappa": self.pooled_kappa, "stopped": self.stopped or "no",
                "changed_meanwhile": self.changed_meanwhile,
                "queries_waited": self.queries_waited,
                "write_back": self.write_back or "off",
                "elapsed_s": round(self.elapsed_s, 3), "shard": self.shard or "all",
                "judge2_skipped": self.judge2_skipped,
                "staging_sample_queries": None if self.staging is None
                else self.staging.sample_queries,
                "staging_saved_usd": None if self.staging is None
                else round(self.staging.saved_usd, 6),
                "staging_stop_rule": None if self.staging is None
                else self.staging.rule.describe(),
                **self._retest_metadata(), **self._anchor_metadata()}

    def _anchor_metadata(self) -> dict[str, Any]:
        """``judge1_anchor_flip_rate`` ... (None without anchors re-judged)."""
        out: dict[str, Any] = {"anchors_frozen": self.anchors_frozen}
        for slot in (1, 2):
            done = next((a for a in self.anchors or () if a.judge == slot), None)
            for name in ("flip_rate", "flip_low", "score_shift", "human_agreement"):
                out[f"judge{slot}_anchor_{name}"] = None if done is None else getattr(done, name)
            out[f"judge{slot}_anchor_changed"] = None if done is None else done.changed
        return out

    def _retest_metadata(self) -> dict[str, Any]:
        """``judge1_retest_flip_rate`` ... (None without test-retest)."""
        out: dict[str, Any] = {}
        for slot in (1, 2):
            done = next((r for r in self.retest or () if r.judge == slot), None)
            figures = None if done is None else done.agreement
            out[f"judge{slot}_retest_flip_rate"] = None if figures is None else figures.flip_rate
            out[f"judge{slot}_retest_alpha"] = None if figures is None else figures.alpha_scores
            out[f"judge{slot}_retest_cost_usd"] = (None if done is None
                                                   else round(done.cost_usd, 6))
        return out

    def together_line(self) -> str:
        """What every process judging the dataset today spent of the one budget."""
        dataset, _, day = (self.budget_scope or "").rpartition("@")
        limit = "no limit" if self.budget_usd is None else f"${self.budget_usd:.2f}"
        return (f"budget: all runs and shards of {dataset} on {day} (UTC) spent "
                f"${self.spent_together_usd:.4f} of {limit} together")

    def waiting_line(self) -> str:
        """Refusals and time spent waiting, so a slow run explains itself."""
        requests = "1 request" if self.refused == 1 else f"{self.refused} requests"
        line = (f"{requests} refused by the provider (rate limit), "
                f"{self.limiter_wait_s + self.backoff_wait_s:.0f} s waiting (rate limiter "
                f"{self.limiter_wait_s:.0f} s, retry backoffs {self.backoff_wait_s:.0f} s, "
                "summed over calls in flight)")
        if self.paused_s:
            line += f"; sending paused {self.paused_s:.0f} s in all after congestion"
        return line

    def format(self) -> str:
        kappa = "undefined" if self.pooled_kappa is None else f"{self.pooled_kappa:.3f}"
        c1, c2 = self.judge1_counts, self.judge2_counts
        fallback = {slot for slot in ("judge1", "judge2")
                    if any(n.startswith(f"{slot}:") for n in self.notices)}
        shown = {slot: getattr(self, slot) + (" (local fallback)" if slot in fallback else "")
                 for slot in ("judge1", "judge2")}
        lines = [  # the fallback notices themselves were logged once when the judges were built
            f"judges: judge1 {shown['judge1']}, judge2 {shown['judge2']} ({self.mode} mode, "
            f"run {self.run_id})",
            f"dataset {self.dataset}"
            + (f" shard {self.shard}" if self.shard else "")
            + f": {self.queries_written} of {self.queries} queries judged, "
            f"{self.queries_changed} queries changed (new or different scores), "
            f"{self.pairs} pairs" + ("" if not self.pool_sizes else
                                     f" (pool per query: min {self.pool_sizes['min']}, median "
                                     f"{self.pool_sizes['median']:g}, max "
                                     f"{self.pool_sizes['max']})"),
            f"judgements: scored {self.scored}, unscored {self.unscored}, failed {self.failed} "
            f"(judge1 {c1.scored}/{c1.unscored}/{c1.failed}, judge2 "
            f"{c2.scored}/{c2.unscored}/{c2.failed}"
            + (f", {self.judge2_skipped} not asked" if self.judge2_skipped else "") + ")",
            f"provider calls {self.provider_calls} (retries {self.retries}), batch requests "
            f"{self.batch_requests}, cache hits {self.cache_hits}",
            self.waiting_line(),
            f"tokens {self.input_tokens} in / {self.output_tokens} out, cost "
            f"${self.cost_usd:.4f}",
            f"pooled kappa {kappa}",
        ]
        if self.spent_together_usd is not None and (
                self.shard or self.spent_together_usd > self.cost_usd + 5e-5):
            lines.insert(-1, self.together_line())
        if self.staging is not None:
            lines.append(self.staging.format())
        lines += [a.line() for a in self.anchors or ()]
        if self.refrozen is not None:
            lines.append(self.refrozen.line())
        elif self.anchors_frozen:
            lines.append(f"anchor set frozen: {self.anchors_frozen} pairs "
                         "(re-judged past the cache by every later run)")
        lines += [r.line() for r in self.retest or ()]
        lines += self.budget_lines
        lines += self.wait_notices
        if self.stopped:
            lines.append(f"stopped early: {self.stop_reason}")
        if self.batch is not None and self.batch.pending_batch_ids:
            lines.append(f"{self.batch.unfinished} judgements wait in provider batches still "
                         f"running ({', '.join(self.batch.pending_batch_ids)}); run the batch "
                         "judge again later to collect them (they are not paid again)")
        if self.unscored or self.failed:
            lines.append(f"incomplete: {self.unscored} judgements unscored and {self.failed} "
                         "failed have no score; `eval-harness judge --retry-unscored` re-asks "
                         "them (one new paid call each; a plain rerun answers unscored ones "
                         "from the cache again)")
        if self.queries_waited:
            lines.append(f"{self.queries_waited} queries were being judged by another run; "
                         "this run judged them last, from that run's cached replies")
        if self.changed_meanwhile:
            lines.append(f"{self.changed_meanwhile} queries changed in the store during the run "
                         "(re-ingested) and were not written; run the judges again for them")
        if self.write_back:
            lines.append(self.write_back)
        return "\n".join(lines)
