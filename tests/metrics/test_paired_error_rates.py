"""The merge gate's decision rule (paired test, Holm over six rows, margin) keeps its promise on
simulated records: benchmarks/compare_error_rates.py, run small here. With no real difference
the rate of any "worse" is not above alpha (the Wilson interval's lower bound stays below it,
so an anti-conservative rule fails); a drop of 0.1 in P@5 over 300 queries is found nearly
always."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def simulate(*, repetitions: int, queries: int, drop: float) -> dict:
    done = subprocess.run([sys.executable, "benchmarks/compare_error_rates.py", "--json",
                           "--repetitions", str(repetitions), "--queries", str(queries),
                           "--drop", str(drop), "--resamples", "2000"],
                          cwd=REPO, check=True, capture_output=True, text=True, timeout=600)
    return json.loads(done.stdout)


def test_no_real_difference_is_rarely_called_worse():
    null = simulate(repetitions=200, queries=100, drop=0.0)
    assert null["any_worse_interval"][0] < null["alpha"], null


def test_a_large_drop_is_found():
    found = simulate(repetitions=100, queries=300, drop=0.1)
    assert found["p5_worse_rate"] >= 0.9, found
