"""The merge gate's error rates: how often ``eval-harness compare`` calls a candidate worse
when it is not (false alarms), and how often it finds a real drop (power).

Each repetition is one comparison as ``compare`` makes it: six rows (P@5, Recall@5, nDCG@10,
MRR@10 and two gates), each through :func:`eval_harness.metrics.paired.paired_comparison`, the
six p-values through :func:`~eval_harness.metrics.paired.holm_adjusted` together, each row's
verdict through :func:`~eval_harness.metrics.paired.paired_verdict` at the shipped
``ci.compare`` (alpha 0.05, margin 0.01, 10,000 resamples). What ``compare_records`` adds to
this is reading the two records from the store.

The data: ``queries`` queries, each with a latent relevance rate ``r ~ Beta(1.2, 4)`` (mean
0.23, SciFact-like) and a number of relevant documents ``1 + Poisson(1)``. Each record draws
its own top 5 for every query independently given ``r`` (two runs of a system on the same
queries agree through the query, not through their noise): ``hits ~ Binomial(5, r)``, so P@5 =
hits / 5; Recall@5 = min(1, hits / relevant); the rank of the first hit ~ 1 + Geometric(r)
within the top 10 gives MRR@10 and (with the hits) a DCG-like nDCG@10 = min(1, (hits / 5 + 1 /
log2(1 + rank)) / 2). The gates: per answer a pass (Bernoulli(g), g ~ Beta(8, 2) per query) and a
score (Beta(6 g, 6 (1 - g))). The candidate's "drop" lowers r by ``drop`` for every query (so
P@5's expectation drops by exactly ``drop``); the other rows drop with it as the model says;
the gates do not change.

    .venv/bin/python benchmarks/compare_error_rates.py             # the record's tables
    .venv/bin/python benchmarks/compare_error_rates.py --repetitions 200 --queries 100 \\
        --drop 0 --json                                           # one cell, as JSON

An alarm is any row found worse; with ``--drop 0`` every alarm is false, and Holm over the six
rows keeps their rate at or below alpha. With a drop, "found" is P@5 found worse.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_harness.metrics.paired import (  # noqa: E402
    holm_adjusted,
    paired_comparison,
    paired_verdict,
)
from eval_harness.metrics.proportions import wilson_interval  # noqa: E402
from eval_harness.settings.ci import CompareSettings  # noqa: E402

CELL = 200  # repetitions per cell of the power table
ROWS = ("precision_at_5", "recall_at_5", "ndcg_at_10", "mrr_at_10", "gate_pass", "gate_score")


def draw_record(rng: np.random.Generator, rate: np.ndarray, relevant: np.ndarray,
                gate: np.ndarray) -> dict[str, np.ndarray]:
    """One record's six rows over the queries, given each query's latent rates."""
    hits = rng.binomial(5, rate)
    rank = 1 + rng.geometric(np.clip(rate, 1e-6, 1)) - 1
    found = rank <= 10
    reciprocal = np.where(found, 1.0 / np.maximum(rank, 1), 0.0)
    return {"precision_at_5": hits / 5,
            "recall_at_5": np.minimum(1.0, hits / relevant),
            "ndcg_at_10": np.minimum(1.0, (hits / 5 + np.where(
                found, 1 / np.log2(1 + np.maximum(rank, 1)), 0.0)) / 2),
            "mrr_at_10": reciprocal,
            "gate_pass": rng.binomial(1, gate).astype(float),
            "gate_score": rng.beta(6 * gate, 6 * (1 - gate))}


def one_comparison(rng: np.random.Generator, queries: int, drop: float,
                   options: CompareSettings, seed: int) -> dict[str, str]:
    """Draw both records and compare them as ``compare`` does: {row: verdict}."""
    rate = rng.beta(1.2, 4.0, queries)
    relevant = 1 + rng.poisson(1.0, queries)
    gate = rng.beta(8.0, 2.0, queries)
    base = draw_record(rng, rate, relevant, gate)
    candidate = draw_record(rng, np.clip(rate - drop, 0.0, 1.0), relevant, gate)
    results = [paired_comparison(base[row], candidate[row], confidence=1 - options.alpha,
                                 resamples=options.resamples, seed=seed) for row in ROWS]
    adjusted = holm_adjusted([result.p_value for result in results])
    return {row: paired_verdict(result.difference, p, margin=options.margin,
                                alpha=options.alpha)
            for row, result, p in zip(ROWS, results, adjusted, strict=True)}


def cell(repetitions: int, queries: int, drop: float, *, seed: int = 0,
         resamples: int | None = None) -> dict:
    """``repetitions`` seeded comparisons: how often any row, and P@5, is found worse."""
    options = CompareSettings() if resamples is None else CompareSettings(resamples=resamples)
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    any_worse = p5_worse = 0
    for repetition in range(repetitions):
        verdicts = one_comparison(rng, queries, drop, options, seed=repetition)
        any_worse += any(verdict == "worse" for verdict in verdicts.values())
        p5_worse += verdicts["precision_at_5"] == "worse"
    return {"repetitions": repetitions, "queries": queries, "drop": drop,
            "alpha": options.alpha, "margin": options.margin, "resamples": options.resamples,
            "any_worse": any_worse, "any_worse_rate": any_worse / repetitions,
            "any_worse_interval": list(wilson_interval(any_worse, repetitions)),
            "p5_worse": p5_worse, "p5_worse_rate": p5_worse / repetitions,
            "p5_worse_interval": list(wilson_interval(p5_worse, repetitions)),
            "seconds": time.perf_counter() - started}


def _rate(found: int, repetitions: int) -> str:
    low, high = wilson_interval(found, repetitions)
    return f"{found / repetitions:.3f} [{low:.3f}, {high:.3f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--repetitions", type=int)
    parser.add_argument("--queries", type=int)
    parser.add_argument("--drop", type=float)
    parser.add_argument("--resamples", type=int, help="default: ci.compare.resamples")
    parser.add_argument("--json", action="store_true", help="one cell, as one JSON object")
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(cell(args.repetitions or 200, args.queries or 300, args.drop or 0.0,
                              resamples=args.resamples)))
        return 0
    null = cell(args.repetitions or 1000, args.queries or 300, 0.0, resamples=args.resamples)
    print(f"No real difference, {null['queries']} queries, {null['repetitions']} repetitions, "
          f"6 rows, Holm at alpha {null['alpha']}, margin {null['margin']}: any row worse "
          f"{_rate(null['any_worse'], null['repetitions'])} ({null['seconds']:.0f} s)")
    print(f"\nP@5 found worse (power), {CELL} repetitions per cell:")
    print("| queries | drop 0.01 | drop 0.02 | drop 0.05 | drop 0.10 | any row worse at drop 0 |")
    print("|---:|---|---|---|---|---|")
    for queries in (100, 300, 1000):
        found = [cell(CELL, queries, drop, seed=1, resamples=args.resamples)
                 for drop in (0.01, 0.02, 0.05, 0.10)]
        false = cell(CELL, queries, 0.0, seed=2, resamples=args.resamples)
        print(f"| {queries} | " + " | ".join(_rate(c["p5_worse"], CELL) for c in found)
              + f" | {_rate(false['any_worse'], CELL)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
