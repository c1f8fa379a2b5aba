"""Judge throughput at a provider's rate limit, against the local fake LLM server.

    .venv/bin/python benchmarks/judge_throughput.py [--judgements 5000] [--naive 200]

The fake server (tests/fake_llm_server.py, 127.0.0.1 only) answers the Anthropic Messages API
with 100 ms latency, enforces 3,000 requests/min with its own token bucket (429 + Retry-After
when exceeded) and answers 10% of requests 429 (Retry-After: 1) or 503 at random.

1. The judge pipeline (real AsyncAnthropic SDK, cache in a fresh embedded Postgres, client
   limiter at 3,000 requests/min, retries with backoff) makes ``--judgements`` distinct
   relevance judgements. Reported: requests the server received per minute as a share of
   the limit (target >= 90%), lost results = judgements without a score (target 0).
2. The same judgements again: provider calls of the rerun (target 0).
3. A naive client for comparison, in the same run: the SDK with its default settings
   (2 built-in retries), one request after the other, no cache, on ``--naive`` judgements;
   its time for the full count is extrapolated.

Prints a Markdown block for benchmarks/RESULTS.md ("## Judge throughput").
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
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import anthropic  # noqa: E402

from eval_harness.judges.config import RateLimit  # noqa: E402
from eval_harness.judges.parsing import ParseError, parse_relevance  # noqa: E402
from eval_harness.judges.prompts import relevance_prompt  # noqa: E402
from eval_harness.judges.protocol import Outcome  # noqa: E402
from eval_harness.judges.session import JudgeSession  # noqa: E402
from eval_harness.settings import load_settings  # noqa: E402
from eval_harness.store import StoreLocation, migrate  # noqa: E402
from eval_harness.store.connection import start_embedded  # noqa: E402
from fake_llm_server import FakeLLMServer  # noqa: E402

LIMIT_RPM = 3000
MODEL = "claude-haiku-4-5"
WORDS = ("aspirin heart attack risk statins cholesterol sleep memory exercise liver coffee "
         "bones vitamin trial cohort dose placebo outcome mortality biomarker").split()


def pairs(n: int, tag: str) -> list[tuple[str, str]]:
    """``n`` distinct (query, document) texts of realistic length (~600 characters)."""
    result = []
    for i in range(n):
        query = f"{WORDS[i % 20]} {WORDS[(i * 7) % 20]} effect {tag} {i}"
        document = " ".join(WORDS[(i + j) % 20] for j in range(90))
        result.append((query, f"Study {i}. {document}"))
    return result


async def pipeline_run(settings, conn, work, *, window: int) -> dict:
    async with JudgeSession(settings, conn) as session:
        gate = asyncio.Semaphore(window)

        async def one(query, document):
            async with gate:
                return await session.judge1.relevance(query, document)

        started = time.monotonic()
        results = await asyncio.gather(*(one(q, d) for q, d in work))
        elapsed = time.monotonic() - started
        stats = session.stats
    return {"elapsed": elapsed, "results": results, "provider_calls": stats.provider_calls,
            "retries": stats.retries, "cache_hits": stats.cache_hits}


async def naive_run(base_url: str, work) -> dict:
    client = anthropic.AsyncAnthropic(api_key="sk-ant-benchmark", base_url=base_url)
    scored = lost = 0
    started = time.monotonic()
    for query, document in work:
        prompt = relevance_prompt(query, document)
        try:
            reply = await client.messages.create(
                model=MODEL, max_tokens=100, system=prompt.system,
                messages=[{"role": "user", "content": prompt.user}])
            parse_relevance(reply.content[0].text)
            scored += 1
        except (anthropic.APIError, ParseError):
            lost += 1
    elapsed = time.monotonic() - started
    await client.close()
    return {"elapsed": elapsed, "scored": scored, "lost": lost}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--judgements", type=int, default=5000)
    parser.add_argument("--naive", type=int, default=200,
                        help="judgements for the naive sequential client (extrapolated)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    fake = FakeLLMServer(latency=0.1, rpm_limit=LIMIT_RPM, burst_seconds=2.0, fault_rate=0.10,
                         fault_kinds=("429", "503"), retry_after=1.0, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="eh-bench-") as tmp, fake:
        store = StoreLocation(start_embedded(Path(tmp) / "pgdata"), "benchmark")
        base = load_settings(ROOT / "config.yaml", environ={
            "ANTHROPIC_API_KEY": "sk-ant-benchmark", "ANTHROPIC_BASE_URL":
            fake.anthropic_base_url})
        settings = replace(base, judges=replace(
            base.judges, judge1=f"anthropic:{MODEL}", judge2="local:lexical", budget_usd=None,
            concurrency=args.concurrency,
            rate_limits={"anthropic": RateLimit(LIMIT_RPM, None),
                         "openai": RateLimit(LIMIT_RPM, None)}))
        work = pairs(args.judgements, uuid.uuid4().hex[:6])
        with store.connection() as conn:
            migrate(conn)
            first = asyncio.run(pipeline_run(settings, conn, work, window=4 * args.concurrency))
            received = fake.chat_requests
            faults = sum(1 for r in fake.chat_records() if r.status != 200)
            over_limit = sum(1 for r in fake.chat_records() if r.fault == "over_limit")
            fake.reset()
            rerun = asyncio.run(pipeline_run(settings, conn, work, window=4 * args.concurrency))
            rerun_received = fake.chat_requests
        fake.reset()
        naive = asyncio.run(naive_run(fake.anthropic_base_url, pairs(args.naive, "naive")))
        naive_received = fake.chat_requests

    lost = sum(r.outcome is not Outcome.SCORED for r in first["results"])
    rate = received / first["elapsed"] * 60
    naive_rate = naive_received / naive["elapsed"] * 60
    naive_full = naive["elapsed"] / args.naive * args.judgements
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.processor() or "unknown") if Path("/proc/cpuinfo").exists() else "unknown"
    command = (f"benchmarks/judge_throughput.py --judgements {args.judgements} "
               f"--naive {args.naive} --concurrency {args.concurrency}")
    pipeline_row = [
        f"judge pipeline: limiter {LIMIT_RPM}/min, retries, cache", str(args.judgements),
        f"{first['elapsed']:.1f} s",
        f"{received} ({faults} refused, {over_limit} by the server's limiter; "
        f"{first['retries']} retries)",
        f"{rate:.0f} ({rate / LIMIT_RPM:.1%})", str(lost),
        f"{rerun_received} ({rerun['cache_hits']} cache hits, {rerun['elapsed']:.1f} s)"]
    naive_row = [
        "naive: SDK defaults (2 SDK retries), sequential, no cache", str(args.naive),
        f"{naive['elapsed']:.1f} s (~{naive_full / 60:.0f} min for {args.judgements})",
        str(naive_received), f"{naive_rate:.0f} ({naive_rate / LIMIT_RPM:.1%})",
        str(naive["lost"]), f"{args.naive} (no cache)"]
    print(f"""## Judge throughput

Measured {date.today().isoformat()} on {cpu} ({os.cpu_count()} cores), Python
{platform.python_version()}, anthropic SDK {anthropic.__version__}, with `{command}`.
The fake Anthropic server (127.0.0.1, same process) answers in 100 ms, enforces
{LIMIT_RPM} requests/min itself and answers 10% of requests 429 (Retry-After 1 s) or 503 at
random. Requests/min counts every request the server received, the refused ones included.

| client | judgements | wall time | requests sent | requests/min (share of {LIMIT_RPM}) \
| lost results | rerun provider calls |
|---|---|---|---|---|---|---|
| {" | ".join(pipeline_row)} |
| {" | ".join(naive_row)} |

Targets: requests/min >= 90% of the limit, 0 lost results, 0 provider calls on the rerun.
""")
    ok = rate / LIMIT_RPM >= 0.9 and lost == 0 and rerun_received == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
