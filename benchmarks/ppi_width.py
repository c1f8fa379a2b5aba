"""How wide the PPI-corrected P@5 interval is for a given number of human labels.

The setup of tests/metrics/test_ppi_coverage.py (tests/support/scifact_hidden_qrels.py: SciFact test
queries, qrels hidden, two biased ``local:lexical`` judges, P@5 at the default weights), in a
fresh embedded store: for each number of human-labelled queries, 200 seeded uniform samples
give the median 95% interval width and the coverage of the qrels P@5, beside the interval
from the human labels alone (the classical t-free CLT interval of their mean) and the
uncorrected judge P@5.

    .venv/bin/python benchmarks/ppi_width.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from eval_harness.metrics.ppi import labels_to_halve_width, prediction_powered_mean  # noqa: E402
from eval_harness.store import StoreLocation, migrate  # noqa: E402
from eval_harness.store.connection import start_embedded  # noqa: E402
from scifact_hidden_qrels import hidden_qrels_p_at_5  # noqa: E402

REPETITIONS = 200


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        location = StoreLocation(start_embedded(Path(scratch) / "pgdata"), "benchmark")
        with location.connection() as conn:
            migrate(conn)
        (Path(scratch) / "data").mkdir()
        judge, human = hidden_qrels_p_at_5(location, Path(scratch) / "data")
    truth = human.mean()
    print(f"{judge.size} queries; qrels P@5 {truth:.4f}; uncorrected judge P@5 "
          f"{judge.mean():.4f}")
    print("| human labels | PPI median width | PPI coverage | human-only median width | "
          "more labels to halve (median) |")
    print("|---:|---:|---:|---:|---:|")
    for n in (25, 50, 100, 150, 200):
        widths, alone, covered, halve = [], [], 0, []
        for seed in range(REPETITIONS):
            sample = np.random.default_rng(seed).choice(judge.size, size=n, replace=False)
            args = dict(y_labeled=human[sample], yhat_labeled=judge[sample],
                        yhat_unlabeled=judge)
            low, high = prediction_powered_mean(**args).interval
            widths.append(high - low)
            covered += low <= truth <= high
            alone.append(2 * 1.959964 * human[sample].std(ddof=1) / np.sqrt(n))
            more = labels_to_halve_width(**args)
            if more is not None:
                halve.append(more)
        # None: labelling every remaining query could not halve it
        halving = (f"{int(np.median(halve))}" if len(halve) > REPETITIONS / 2
                   else "not possible within these queries")
        print(f"| {n} | {np.median(widths):.4f} | {covered / REPETITIONS:.1%} | "
              f"{np.median(alone):.4f} | {halving} |")


if __name__ == "__main__":
    main()
