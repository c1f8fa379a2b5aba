"""The cost of the calibration decision (issue #22): 1,000 queries x 101 grid points, the
max-statistic permutation test with 10,000 sign-flip permutations plus the paired bootstrap
interval of the best point's gain (10,000 resamples), as ``calibrate`` runs it.

The per-query P@5 matrix is synthetic, shaped like a sweep: hits out of 5 per query, and at
each grid point about 30% of the queries one hit up or down (so no row is all zero and
nothing is skipped). Three timed repetitions after one warm-up; the target is < 2 s.

    .venv/bin/python benchmarks/calibration_decision.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval_harness.calibration.decision import decide_weights  # noqa: E402

QUERIES, GRID_POINTS, PERMUTATIONS = 1_000, 101, 10_000


def per_query_matrix(rng: np.random.Generator) -> np.ndarray:
    hits = rng.binomial(5, rng.beta(2, 3, QUERIES))
    draw = rng.random((GRID_POINTS, QUERIES))
    moves = (draw < 0.15).astype(int) - ((draw >= 0.15) & (draw < 0.3)).astype(int)
    return np.clip(hits + moves, 0, 5) / 5


def main() -> None:
    rng = np.random.default_rng(0)
    matrix = per_query_matrix(rng)
    grid = [(round(i / 100, 2), round(1 - i / 100, 2)) for i in range(GRID_POINTS)]
    in_force = 70
    best = int(np.argmax(matrix.mean(axis=1)))

    def decide():
        return decide_weights(matrix, grid, grid[in_force], matrix[in_force], best_index=best,
                              permutations=PERMUTATIONS, bootstrap_resamples=PERMUTATIONS,
                              seed=0)

    decide()  # warm-up
    seconds = []
    for _ in range(3):
        started = time.perf_counter()
        decision = decide()
        seconds.append(time.perf_counter() - started)
    print(f"decision on {QUERIES} queries x {GRID_POINTS} grid points, {PERMUTATIONS} "
          f"permutations + {PERMUTATIONS} bootstrap resamples: median "
          f"{np.median(seconds):.2f} s (runs {', '.join(f'{s:.2f}' for s in seconds)}; "
          f"target < 2 s)")
    print(decision.sentence)


if __name__ == "__main__":
    main()
