"""The adaptive judge rate limiter under a provider limit that changes mid-run.

    .venv/bin/python benchmarks/judge_adaptive.py [--phase-seconds 25] [--apis anthropic openai]

The fake LLM server (tests/fake_llm_server.py, 127.0.0.1) answers in 100 ms, enforces its own
requests-per-minute limit (a token bucket of two seconds; 429 + Retry-After when exceeded) and
sends the rate-limit headers of each wire format (``rate_limit_headers``; ``--no-headers``
leaves only the 429s to adapt to). Its limit goes
3,000 -> 1,000 -> 3,000 requests/min, one phase of ``--phase-seconds`` each. The judge pipeline
(real SDK, reply cache in a fresh embedded Postgres, client ceiling 3,000 requests/min, 16
requests in flight, retries) judges distinct pairs for the three phases.

Per phase, counted from what the server received in the phase's window: requests sent,
requests served (200) per minute and their share of the server's limit (target >= 90%), and
the share refused by the server's limiter (target < 2%); plus the client limiter's rate at
the end of the phase and its multiplicative cuts. Prints a Markdown block for
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from eval_harness.judges.config import RateLimit  # noqa: E402
from eval_harness.judges.session import JudgeSession  # noqa: E402
from eval_harness.settings import load_settings  # noqa: E402
from eval_harness.store import StoreLocation, migrate  # noqa: E402
from eval_harness.store.connection import start_embedded  # noqa: E402
from fake_llm_server import FakeLLMServer  # noqa: E402

CEILING = 3000
PHASES = (3000, 1000, 3000)
MODELS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4o-mini"}
WORDS = ("aspirin heart attack risk statins cholesterol sleep memory exercise liver coffee "
         "bones vitamin trial cohort dose placebo outcome mortality biomarker").split()


def pair(i: int, tag: str) -> tuple[str, str]:
    """A distinct (query, document) of realistic length (~600 characters)."""
    query = f"{WORDS[i % 20]} {WORDS[(i * 7) % 20]} effect {tag} {i}"
    return query, f"Study {i}. " + " ".join(WORDS[(i + j) % 20] for j in range(90))


async def judge_through_phases(settings, conn, fake: FakeLLMServer, api: str, *,
                               phase_seconds: float, window: int) -> dict:
    """Judge pairs while the server's limit walks through PHASES; the phases' windows on the
    server's clock and the client limiter's state at the end of each phase."""
    tag = uuid.uuid4().hex[:6]
    async with JudgeSession(settings, conn) as session:
        limiter = session.pipeline.limiter(api)
        gate = asyncio.Semaphore(window)
        tasks: set[asyncio.Task] = set()
        windows, client = [], []

        async def one(i: int) -> None:
            try:
                await session.judge1.relevance(*pair(i, tag))
            finally:
                gate.release()

        started = time.monotonic()
        i = 0
        for limit in PHASES:
            fake.set_rpm_limit(limit)
            begin = time.monotonic()
            end = started + phase_seconds * (len(windows) + 1)
            while time.monotonic() < end:
                try:
                    await asyncio.wait_for(gate.acquire(), timeout=end - time.monotonic())
                except TimeoutError:
                    break
                task = asyncio.create_task(one(i))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                i += 1
            windows.append((begin, time.monotonic(), limit))
            client.append((limiter.requests_per_minute, limiter.controller.cuts))
        await asyncio.gather(*tasks, return_exceptions=True)  # answered after the last window
    return {"windows": windows, "client": client, "judged": i}


def phase_rows(fake: FakeLLMServer, api: str, run: dict) -> list[dict]:
    rows = []
    records = fake.chat_records(api)
    for (begin, end, limit), (client_rate, cuts) in zip(run["windows"], run["client"]):
        inside = [r for r in records if begin <= r.at < end]
        served = sum(r.status == 200 for r in inside)
        refused = sum(r.fault == "over_limit" for r in inside)
        minutes = (end - begin) / 60.0
        rows.append({"limit": limit, "seconds": end - begin, "sent": len(inside),
                     "served_rpm": served / minutes, "ratio": served / minutes / limit,
                     "refused": refused, "refused_share": refused / max(1, len(inside)),
                     "client_rate": client_rate, "cuts": cuts})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase-seconds", type=float, default=25.0)
    parser.add_argument("--apis", nargs="+", default=["anthropic", "openai"],
                        choices=sorted(MODELS))
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--no-headers", action="store_true",
                        help="the server sends no rate-limit headers: 429s alone (AIMD)")
    args = parser.parse_args()
    load = os.getloadavg()
    results = {}
    with tempfile.TemporaryDirectory(prefix="eh-bench-") as tmp:
        store = StoreLocation(start_embedded(Path(tmp) / "pgdata"), "benchmark")
        for api in args.apis:
            fake = FakeLLMServer(latency=0.1, rpm_limit=PHASES[0], burst_seconds=2.0,
                                 rate_limit_headers=not args.no_headers)
            with fake, store.connection() as conn:
                migrate(conn)
                base = load_settings(ROOT / "config.yaml", environ={
                    "ANTHROPIC_API_KEY": "sk-ant-benchmark",
                    "ANTHROPIC_BASE_URL": fake.anthropic_base_url,
                    "OPENAI_API_KEY": "sk-benchmark", "OPENAI_BASE_URL": fake.openai_base_url})
                settings = replace(base, judges=replace(
                    base.judges, judge1=f"{api}:{MODELS[api]}", judge2="local:lexical",
                    budget_usd=None, concurrency=args.concurrency,
                    rate_limits={"anthropic": RateLimit(CEILING, None),
                                 "openai": RateLimit(CEILING, None)}))
                run = asyncio.run(judge_through_phases(
                    settings, conn, fake, api, phase_seconds=args.phase_seconds,
                    window=4 * args.concurrency))
                results[api] = phase_rows(fake, api, run)
    load_after = os.getloadavg()
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.processor() or "unknown") if Path("/proc/cpuinfo").exists() else "?"
    print(f"{cpu}, {os.cpu_count()} cpus, Python {platform.python_version()}; load average "
          f"{load[0]:.2f} before, {load_after[0]:.2f} after; phases of "
          f"{args.phase_seconds:g} s, client ceiling {CEILING}/min, {args.concurrency} in flight, "
          f"rate-limit headers {'off' if args.no_headers else 'on'}")
    print()
    print("| API | phase | server limit/min | requests sent | served/min | share of limit "
          "| refused (share) | client rate at end | client cuts |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ok = True
    for api, rows in results.items():
        for n, row in enumerate(rows, 1):
            ok &= row["ratio"] >= 0.9 and row["refused_share"] < 0.02
            print(f"| {api} | {n} | {row['limit']:,} | {row['sent']:,} | "
                  f"{row['served_rpm']:,.0f} | {row['ratio']:.1%} | {row['refused']} "
                  f"({row['refused_share']:.2%}) | {row['client_rate']:,.0f} | {row['cuts']} |")
    print()
    print("Targets (every phase): served >= 90% of the limit, refused < 2%:",
          "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
