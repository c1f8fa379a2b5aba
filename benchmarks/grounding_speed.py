"""Speed of the offline grounding judge: claims per second on one core, 4,000-character sources.

    .venv/bin/python benchmarks/grounding_speed.py

Every BEGIN dev response (the three sets, 1,229 answers, read from ../shared as in
benchmarks/grounding_validation.py) is judged against its own source of 3,800 to 4,000
characters (its knowledge passage among others of the same set, benchmarks/
grounding_long_sources.py), with :func:`check_grounding_aligned` as the gate calls it: claim
extraction, sentence splitting and indexing of the source, alignment, verdicts. The process is
pinned to one CPU. Six passes over the same answers: the first in a fresh process (the
stemmer's cache empty), then five with it warm, as in a long gate run (median and fastest).
Claims/s = checked claims / time, wall-clock and CPU time of this process both given (the
machine may be shared: the load average before and after is printed with the machine).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grounding_long_sources import SEED, SUPPORT, long_source  # noqa: E402
from grounding_validation import SETS, load_begin  # noqa: E402

from eval_harness.judges.local.verdicts import check_grounding_aligned  # noqa: E402

LOW, HIGH = 3800, 4000
WARM_PASSES = 5


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def answers_with_long_sources() -> list[tuple[str, str]]:
    cases = []
    for path in SETS.values():
        responses, knowledge, _ = load_begin(path)
        rng = random.Random(SEED)
        cases += [(r, long_source([k], knowledge, rng, low=LOW, high=HIGH))
                  for r, k in zip(responses, knowledge)]
    return cases


def timed_pass(cases: list[tuple[str, str]]) -> tuple[int, float, float]:
    """(claims checked, wall seconds, CPU seconds) for one pass over ``cases``."""
    claims = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for answer, source in cases:
        claims += len(check_grounding_aligned(answer, [source], SUPPORT).claims)
    return claims, time.perf_counter() - wall, time.process_time() - cpu


def _median(passes: list[tuple[int, float, float]]) -> tuple[int, float, float]:
    return sorted(passes, key=lambda p: p[1])[len(passes) // 2]


def main(argv: list[str]) -> int:
    missing = [str(p) for p in SETS.values() if not p.exists()]
    if missing:
        print(f"{', '.join(missing)} not found: the BEGIN dev splits are read from ../shared.")
        return 2
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    cases = answers_with_long_sources()
    chars = sum(len(s) for _, s in cases) / len(cases)
    load_before = os.getloadavg()
    print(f"{platform.machine()}, {cpu_model()}, {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, {dt.date.today().isoformat()}; pinned to one CPU")
    print(f"{len(cases)} answers, mean source {chars:,.0f} characters "
          f"(min {min(len(s) for _, s in cases):,}, max {max(len(s) for _, s in cases):,})")
    passes = [timed_pass(cases) for _ in range(1 + WARM_PASSES)]
    for label, (claims, wall, cpu) in (("first pass (cold stemmer cache)", passes[0]),
                                       ("warm passes, median", _median(passes[1:])),
                                       ("warm passes, fastest", min(passes[1:],
                                                                    key=lambda p: p[1]))):
        print(f"{label}: {claims} claims, {wall:.2f} s wall = {claims / wall:,.0f} claims/s, "
              f"{cpu:.2f} s CPU = {claims / cpu:,.0f} claims/s "
              f"({len(cases) / wall:,.0f} answers/s wall)")
    print("load average (1, 5, 15 min) before: " + ", ".join(f"{x:.2f}" for x in load_before)
          + "; after: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
