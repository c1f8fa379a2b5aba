"""Judge drift and test-retest (issue #23): how often the drift check catches a drifted judge
and how often it cries wolf, how well test-retest measures a noisy judge, and what both cost
a night.

1. **Drift detection.** The simulation model of tests/metrics/test_drift.py: each of the
   re-judged anchors flips its label independently with probability ``flip share``; the
   decision is the real one, :func:`eval_harness.metrics.drift.drift_alarm` (vectorised,
   200 seeded repetitions per cell as in the test, and 20,000 for a precise rate), and on the
   200 repetitions also :func:`eval_harness.judges.anchors.drift.drift_reasons` on a real
   :func:`compare_judge` of simulated frozen and re-judged scores (the fake server's flip:
   the score reflected across the threshold), which must decide the same every time.
   An alarm is a detection when the flip share exceeds the ceiling
   (``judges.drift.max_flip_rate``), a false alarm otherwise.
2. **Test-retest.** The fake server's noisy judge: the first scoring of a pair is its base
   score, each retest flips its label with probability ``p``. 20 queries x 6 pairs x 3
   repeats (the defaults), 200 seeded repetitions per ``p``, measured by the real
   :func:`eval_harness.metrics.agreement.retest.retest_agreement` (2,000 query-bootstrap
   resamples): mean measured flip rate and how often its 95% interval holds ``p``.
3. **Nightly cost.** Requests: one per anchor and LLM judge; test-retest ``queries`` x pairs
   per query x ``repeats`` per LLM judge, pairs per query from SciFact's test qrels
   (expected documents + ``hybrid_top_k`` hits not among them: between 5 and 5 + expected).
   Dollars: the dry run's own token estimate of real relevance requests (SciFact queries and
   abstracts, the shipped prompt) at config.yaml's prices.

    .venv/bin/python benchmarks/drift_detection.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_harness.judges.anchors.drift import compare_judge, drift_reasons  # noqa: E402
from eval_harness.judges.client.pricing import (PriceTable, estimated_input_tokens,  # noqa: E402
                                                estimated_output_tokens)
from eval_harness.judges.llm import LLMJudge  # noqa: E402
from eval_harness.judges.protocol import Usage  # noqa: E402
from eval_harness.metrics.agreement.retest import retest_agreement  # noqa: E402
from eval_harness.metrics.drift import drift_alarm  # noqa: E402
from eval_harness.settings import load_settings  # noqa: E402
from eval_harness.settings.judges import DriftSettings  # noqa: E402

SIZES = (25, 50, 100, 200)
SHARES = (0.0, 0.02, 0.05, 0.10, 0.15, 0.20)
CEILINGS = (0.05, 0.10)
REPETITIONS, PRECISE = 200, 20_000
THRESHOLD = 0.5


def alarm_rate(anchors: int, share: float, ceiling: float, *, repetitions: int,
               seed: int = 0) -> tuple[float, np.ndarray]:
    """tests/metrics/test_drift.py's ``alarm_rate``, also returning the flip masks."""
    rng = np.random.default_rng(seed)
    flipped = rng.random((repetitions, anchors)) < share
    alarms = drift_alarm(flipped.sum(axis=1), anchors, max_flip_rate=ceiling)
    return float(np.mean(alarms)), flipped


def reasons_agree(flipped: np.ndarray, ceiling: float, alarms_rate: float, *,
                  seed: int = 0) -> bool:
    """drift_reasons on a real comparison decides like drift_alarm on every repetition."""
    rng = np.random.default_rng(seed + 1)
    drift = DriftSettings(max_flip_rate=ceiling)
    alarms = 0
    for mask in flipped:
        frozen = rng.uniform(0.0, 1.0, mask.size)
        frozen[frozen == THRESHOLD] = 0.6
        now = np.where(mask, 2 * THRESHOLD - frozen, frozen)
        comparison = compare_judge(1, [(float(f), None) for f in frozen],
                                   [float(n) for n in now], spec="sim:judge",
                                   prompt_version="v", frozen_spec="sim:judge",
                                   frozen_prompt_version="v", threshold=THRESHOLD)
        assert comparison.flips == int(mask.sum())
        alarms += bool(drift_reasons(comparison, drift))
    return alarms / len(flipped) == alarms_rate


def drift_tables() -> None:
    for ceiling in CEILINGS:
        print(f"\nceiling judges.drift.max_flip_rate = {ceiling:.2f}: alarm rate, "
              f"{REPETITIONS} seeded repetitions ({PRECISE:,} in brackets); "
              "cells at or below the ceiling are false alarms")
        print("| anchors | " + " | ".join(f"flips {s:.0%}" for s in SHARES) + " |")
        print("|---:|" + "---:|" * len(SHARES))
        agree = True
        for size in SIZES:
            cells = []
            for share in SHARES:
                rate, flipped = alarm_rate(size, share, ceiling, repetitions=REPETITIONS)
                precise, _ = alarm_rate(size, share, ceiling, repetitions=PRECISE, seed=7)
                agree &= reasons_agree(flipped, ceiling, rate)
                kind = "" if share > ceiling else " FA"
                cells.append(f"{rate:.1%} ({precise:.1%}){kind}")
            print(f"| {size} | " + " | ".join(cells) + " |")
        print(f"drift_reasons on real comparisons agrees with drift_alarm on every "
              f"repetition: {agree}")


def noisy_judge(p: float, *, queries: int = 20, pairs: int = 6, repeats: int = 3,
                seed: int) -> np.ndarray:
    """Scores of a judge whose retests flip each label with probability ``p``."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.0, 1.0, (queries * pairs, 1))
    flips = rng.random((queries * pairs, repeats)) < p
    retests = np.where(flips, 2 * THRESHOLD - base, base)
    return np.hstack([base, retests])


def retest_table() -> None:
    print(f"\ntest-retest of the noisy judge: 20 queries x 6 pairs x 3 repeats, "
          f"{REPETITIONS} seeded repetitions per p, 95% query bootstrap (2,000 resamples)")
    print("| set p | mean measured flip rate | sd | 95% interval covers p | "
          "mean interval width |")
    print("|---:|---:|---:|---:|---:|")
    query_ids = np.repeat(np.arange(20), 6)
    for p in (0.0, 0.05, 0.10, 0.15, 0.20):
        rates, covered, widths = [], 0, []
        for seed in range(REPETITIONS):
            figures = retest_agreement(noisy_judge(p, seed=seed), query_ids=query_ids,
                                       threshold=THRESHOLD, seed=seed)
            rates.append(figures.flip_rate)
            low, high = figures.flip_interval.low, figures.flip_interval.high
            covered += low <= p <= high
            widths.append(high - low)
        print(f"| {p:.2f} | {np.mean(rates):.4f} | {np.std(rates):.4f} | "
              f"{covered / REPETITIONS:.1%} | {np.mean(widths):.3f} |")


def scifact_pairs() -> tuple[list[tuple[str, str]], float]:
    """Real (query, abstract) pairs of SciFact's test split (a query with each of its expected
    documents) and the mean expected documents per query."""
    folder = ROOT / "datasets" / "scifact"
    corpus = {}
    with (folder / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            doc = json.loads(line)
            corpus[doc["_id"]] = (doc.get("title", "") + "\n" + doc["text"]).strip()
    queries = {}
    with (folder / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            query = json.loads(line)
            queries[query["_id"]] = query["text"]
    expected: dict[str, list[str]] = {}
    qrels = folder / "qrels" / "test.tsv"
    for row in qrels.read_text(encoding="utf-8").splitlines()[1:]:
        query_id, doc_id, score = row.split("\t")[:3]
        if int(score) > 0:
            expected.setdefault(query_id, []).append(doc_id)
    pairs = [(queries[q], corpus[d]) for q, docs in expected.items() for d in docs
             if q in queries and d in corpus]
    return pairs, float(np.mean([len(d) for d in expected.values()]))


def cost_table() -> None:
    settings = load_settings(ROOT / "config.yaml", environ={})
    judges = settings.judges
    prices = PriceTable(judges.prices)
    pairs, expected = scifact_pairs()
    retest = judges.retest
    top_k = judges.hybrid_top_k
    low, high = retest.queries * top_k * 3, retest.queries * (top_k + expected) * 3
    print(f"\nnightly cost with the defaults (anchors 100, retest {retest.queries} queries x "
          f"pairs per query x {retest.repeats} repeats; SciFact: {expected:.2f} expected "
          f"documents per query, so {top_k}..{top_k + expected:.2f} pairs per query)")
    print("| judge | anchors: requests | anchors: USD | retest: requests | retest: USD "
          "| USD per request (worst case) |")
    print("|---|---:|---:|---:|---:|---:|")
    totals = np.zeros(4)
    for spec in (judges.judge1, judges.judge2):
        judge = LLMJudge(spec, None, judges)
        model = spec.split(":", 1)[1]
        requests = [judge.relevance_request(q, d) for q, d in pairs]
        each = np.mean([prices.cost(model, Usage(estimated_input_tokens(r),
                                                 estimated_output_tokens(r)))
                        for r in requests])
        worst = np.mean([prices.worst_case(r) for r in requests])
        anchors = 100
        retests = (low + high) / 2
        row = np.array([anchors, anchors * each, retests, retests * each])
        totals += row
        print(f"| {spec} | {anchors} | ${anchors * each:.3f} | {low:.0f}..{high:.0f} | "
              f"${low * each:.3f}..${high * each:.3f} | ${each:.5f} (${worst:.5f}) |")
    print(f"| both | {totals[0]:.0f} | ${totals[1]:.3f} | {2 * low:.0f}..{2 * high:.0f} | "
          f"~${totals[3]:.3f} | |")
    chars = np.mean([len(q) + len(d) for q, d in pairs])
    print(f"({len(pairs)} SciFact test pairs priced: {chars:.0f} characters of query and "
          "abstract on average)")


def main() -> None:
    started = time.perf_counter()
    drift_tables()
    retest_table()
    cost_table()
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
