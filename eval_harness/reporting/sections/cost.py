"""Section 5: cost by provider, model and operation from ``api_cost_log``, with the batch
discount (saved = the batch calls' tokens at list price - what was paid) and the judge reply
cache (``api_cache_hit_log``: hits and the list price of the replies they served)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from eval_harness.judges.client.pricing import PriceTable
from eval_harness.judges.client.sql import billed_call_rows, billed_calls_ever, cache_hit_rows
from eval_harness.judges.protocol import Usage
from eval_harness.reporting import formatting as fmt
from eval_harness.reporting.blocks import (
    SECTION_TITLES,
    Block,
    BuiltSection,
    Check,
    Metric,
    Paragraph,
    Section,
    Table,
)
from eval_harness.settings import Settings

COST_WINDOW_DAYS = 30
COST_KEYS: dict[str, Metric] = dict.fromkeys(
    ("cost_scope", "cost_usd", "calls", "batch_calls", "batch_saved_usd", "cache_hits",
     "cache_saved_usd", "input_tokens", "output_tokens", "cached_tokens", "cost_30d_usd",
     "cost_all_time_usd", "retest_calls", "retest_cost_usd", "anchor_calls",
     "anchor_cost_usd"))
RETEST = " (retest)"  # how the cost log's retest calls read in the operation column
ANCHOR = " (anchor)"  # and its anchor re-judging's


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


def cost_lines(conn: psycopg.Connection, prices: PriceTable, *,
               run_ids: Sequence[str] | None = None,
               since: datetime | None = None) -> list[CostLine]:
    """Billed calls (``api_cost_log``) and cache hits (``api_cache_hit_log``) per provider,
    model and operation, of one run and/or since a time; sorted by provider, model, operation.

    ``batch_saved_usd`` = the batch calls' tokens at list price (``judges.prices``, no batch
    discount) - what they cost; ``cache_saved_usd`` = the cached replies at list price.
    """
    lines: dict[tuple[str, str, str], CostLine] = {}
    for (api, model, operation, calls, batch_calls, tokens_in, cached, tokens_out, cost,
         batch_in, batch_cached, batch_out, batch_cost, last_at) in billed_call_rows(
            conn, run_ids=run_ids, since=since):
        saved: float | None = 0.0
        if batch_calls:
            price_known = prices.lookup(model) is not None
            saved = (prices.cost(model, Usage(batch_in, batch_out, batch_cached)) - batch_cost
                     if price_known else None)
        lines[(api, model, operation)] = CostLine(
            api, model, operation, calls, batch_calls, tokens_in, cached, tokens_out,
            float(cost), saved, last_at=last_at)
    hits = cache_hit_rows(conn, run_ids=run_ids, since=since)
    if hits is None:  # the store predates migration 0005
        for line in lines.values():
            line.cache_hits = None
        return sorted(lines.values(), key=_line_key)
    for api, model, operation, count, saved_cost, last_at in hits:
        line = lines.setdefault((api, model, operation), CostLine(api, model, operation))
        line.cache_hits, line.cache_saved_usd = int(count), float(saved_cost)
        line.last_at = max(filter(None, (line.last_at, last_at)))
    return sorted(lines.values(), key=_line_key)


def cost_section(conn: psycopg.Connection, settings: Settings, run_id: str | None,
                 now: datetime, related_run_ids: tuple[str, ...] = ()) -> BuiltSection:
    """The cost of run ``run_id`` (and ``related_run_ids``), of the last 30 days and of all
    time; without a run id the run's figures are the last 30 days'."""
    title = SECTION_TITLES["cost"]
    prices = PriceTable(settings.judges.prices)
    since = now - timedelta(days=COST_WINDOW_DAYS)
    recent = cost_lines(conn, prices, since=since)
    run_lines = (cost_lines(conn, prices, run_ids=(run_id, *related_run_ids))
                 if run_id is not None else recent)
    scope = "run" if run_id is not None else f"last {COST_WINDOW_DAYS} days"
    calls_ever, cost_ever = billed_calls_ever(conn)
    totals = _cost_totals(run_lines)
    metrics: dict[str, Metric] = dict(COST_KEYS)
    metrics.update(totals, cost_scope=scope, cost_30d_usd=_cost_totals(recent)["cost_usd"],
                   cost_all_time_usd=cost_ever)
    blocks: list[Block] = []
    if run_id is not None:
        if run_lines:
            blocks += [Paragraph(_cost_sentence(f"This run (`{run_id}`)", totals)),
                       _cost_table(run_lines, f"Run {run_id}")]
            if totals["retest_calls"]:
                blocks.append(Paragraph(_retest_sentence(totals)))
            if totals["retest_calls"] or totals["anchor_calls"]:
                blocks.append(Paragraph(_budget_lines_sentence(totals, settings)))
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
        f"All time: {calls_ever} billed call(s), {fmt.usd(cost_ever)} USD. Batch saved = "
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
    return BuiltSection(Section("cost", title, tuple(blocks)), metrics, (check,))


def _line_key(line: CostLine) -> tuple[str, str, str]:
    return line.api_name, line.model, line.operation


def _cost_totals(lines: Sequence[CostLine]) -> dict[str, Any]:  # numbers, None unknown
    saved = [line.batch_saved_usd for line in lines]
    hits = [line.cache_hits for line in lines]
    retests = [line for line in lines if line.operation.endswith(RETEST)]
    anchors = [line for line in lines if line.operation.endswith(ANCHOR)]
    return {"cost_usd": sum(line.cost_usd for line in lines),
            "retest_calls": sum(line.calls for line in retests),
            "retest_cost_usd": sum(line.cost_usd for line in retests),
            "anchor_calls": sum(line.calls for line in anchors),
            "anchor_cost_usd": sum(line.cost_usd for line in anchors),
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
             fmt.usd(line.cost_usd), fmt.usd(line.batch_saved_usd), fmt.count(line.cache_hits),
             fmt.usd(line.cache_saved_usd)) for line in lines]
    rows.append(("total", "", "", str(totals["calls"]), str(totals["batch_calls"]),
                 str(totals["input_tokens"]), str(totals["cached_tokens"]),
                 str(totals["output_tokens"]), fmt.usd(totals["cost_usd"]),
                 fmt.usd(totals["batch_saved_usd"]), fmt.count(totals["cache_hits"]),
                 fmt.usd(totals["cache_saved_usd"])))
    return Table(("provider", "model", "operation", "calls", "batch calls", "input tokens",
                  "cached tokens", "output tokens", "cost USD", "batch saved USD",
                  "cache hits", "cache saved USD"), tuple(rows), (False,) * 3 + (True,) * 9,
                 frozenset({len(rows) - 1}), caption)


def _retest_sentence(totals: Mapping[str, Any]) -> str:
    return (f"Test-retest (`judge --retest`, the lines marked 'retest'): "
            f"{totals['retest_calls']} call(s) past the reply cache, "
            f"{fmt.usd(totals['retest_cost_usd'])} USD of this run's "
            f"{fmt.usd(totals['cost_usd'])} USD.")


def _budget_lines_sentence(totals: Mapping[str, Any], settings: Settings) -> str:
    """Each budget line of the run: the labels against ``judges.budget_usd``, the lines
    marked 'retest' and 'anchor' against their own (a run's budgets are per process: with
    shards, per shard)."""
    judges = settings.judges

    def line(name: str, spent: float, calls: int, limit: float | None, key: str) -> str:
        of = "no limit" if limit is None else f"{fmt.usd(limit)} USD"
        return f"{name} {calls} call(s), {fmt.usd(spent)} USD of {key} {of}"

    labels = totals["cost_usd"] - totals["retest_cost_usd"] - totals["anchor_cost_usd"]
    parts = [line("labels", labels, totals["calls"] - totals["retest_calls"]
                  - totals["anchor_calls"], judges.budget_usd, "judges.budget_usd"),
             line("test-retest", totals["retest_cost_usd"], totals["retest_calls"],
                  judges.retest.budget_usd, "judges.retest.budget_usd"),
             line("anchors", totals["anchor_cost_usd"], totals["anchor_calls"],
                  judges.anchors.budget_usd, "judges.anchors.budget_usd")]
    return ("Budget lines of this run (each spends only its own budget): "
            + "; ".join(parts) + ".")


def _cost_sentence(scope: str, totals: Mapping[str, Any]) -> str:
    return (f"{scope}: {totals['calls']} billed call(s) ({totals['batch_calls']} in batches), "
            f"{fmt.usd(totals['cost_usd'])} USD; batch discount saved "
            f"{fmt.usd(totals['batch_saved_usd'])} USD; {fmt.count(totals['cache_hits'])} cache "
            f"hit(s) saved {fmt.usd(totals['cache_saved_usd'])} USD.")
