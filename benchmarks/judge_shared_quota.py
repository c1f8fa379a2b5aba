"""One provider limit shared by 1, 2, 4 and 8 judge processes (issue #36), side by side with
the same processes each on a store of its own (what every process did before the rate was
shared: each sends at the whole configured rate).

    .venv/bin/python benchmarks/judge_shared_quota.py [--processes 1 2 4 8] [--seconds 30]
        [--limit 1200] [--api anthropic]

The fake LLM server (tests/support/fake_llm_server.py, in this process) answers in 100 ms and
enforces the account's limit: a token bucket of two seconds, 429 + ``Retry-After`` when it is
empty, with the wire format's rate-limit headers. ``judges.rate_limits`` is set to that same
limit, as a team sets it to its tier. Each process is a separate Python process with one
:class:`~eval_harness.judges.client.session.JudgeSession` (real SDK, reply cache and cost log
in an embedded Postgres, 16 requests in flight), keeping 32 distinct judgements going until
the window ends. All of them start sending at the same moment.

* **shared**: every process on one database: they share the rate through the harness schema
  (``judge_holders``, ``judge_rate_shares``).
* **apart**: each process on a database of its own, so none sees the others.

Both with the server sending its rate-limit headers (each process's adaptive limiter then
also reads what is left of the bucket) and without them (a proxy or a server that sends none:
429s are then the only signal a process that does not share the rate gets).

Counted over the window after ``--settle`` seconds (the limiters finding their pace): what the
server received a minute against its limit, how many it refused with its limiter (429
``over_limit``), what each process was served a minute, and the fairness between them
(Jain's index over the processes' served rates: 1.0 when equal, 1/N when one takes all; and
the slowest process against the fastest). Targets for ``shared``: received <= limit +5%,
served >= 90% of the limit, < 2% of the requests refused, Jain's index >= 0.95. Prints the
RESULTS.md block; exits 0 when every target is met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from eval_harness.judges.client.session import JudgeSession  # noqa: E402
from eval_harness.judges.protocol import Outcome  # noqa: E402
from eval_harness.settings import load_settings  # noqa: E402
from eval_harness.settings.judges import RateLimit  # noqa: E402
from eval_harness.store import StoreLocation, migrate  # noqa: E402
from eval_harness.store.connection import start_embedded  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from judge_throughput import MODELS, keep_going, pair  # noqa: E402  # the same judgements

CONCURRENCY, WINDOW = 16, 32


# ---------------------------------------------------------------------------------------
# One process


async def _judge_until(settings, conn, tag: str, start: float, end: float) -> dict:
    async with JudgeSession(settings, conn) as session:
        await asyncio.sleep(max(0.0, start - time.monotonic()))
        gate = asyncio.Semaphore(WINDOW)
        tasks: set[asyncio.Task] = set()
        results = []

        async def one(i: int) -> None:
            try:
                results.append(await session.judge1.relevance(*pair(i, tag)))
            finally:
                gate.release()

        i = await keep_going(gate, tasks, one, 0, end)
        for task in tasks:  # the window is over: what is still waiting is not sent
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return {"started": i, "scored": sum(r.outcome is Outcome.SCORED for r in results),
                "refused": session.stats.refused}


def worker(args) -> int:
    """``--worker``: one judge process on ``--database``, sending from ``--start`` (the
    monotonic clock, which every process on the machine shares) to ``--end``."""
    base = load_settings(ROOT / "config.yaml", environ={
        "ANTHROPIC_API_KEY": "sk-ant-benchmark", "ANTHROPIC_BASE_URL": args.anthropic_url,
        "OPENAI_API_KEY": "sk-benchmark", "OPENAI_BASE_URL": args.openai_url})
    settings = replace(base, judges=replace(
        base.judges, judge1=f"{args.api}:{MODELS[args.api]}", judge2="local:lexical",
        budget_usd=None, concurrency=CONCURRENCY,
        rate_limits={"anthropic": RateLimit(args.limit, None),
                     "openai": RateLimit(args.limit, None)}))
    with StoreLocation(args.database, "benchmark").connection() as conn:
        out = asyncio.run(_judge_until(settings, conn, args.tag, args.start, args.end))
    print(json.dumps(out))
    return 0


# ---------------------------------------------------------------------------------------
# The side by side


def _database(server_url: str, name: str) -> str:
    import psycopg
    from psycopg import sql

    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = psycopg.conninfo.make_conninfo(server_url, dbname=name)
    with StoreLocation(url, "benchmark").connection() as conn:
        migrate(conn)
    return url


def run_case(fake, server_url: str, n: int, mode: str, headers: bool, args) -> dict:
    """``n`` processes in ``mode`` (shared | apart) against a fresh bucket, the server sending
    rate-limit headers or not: the window's figures."""
    fake.reset()
    fake.set_rpm_limit(args.limit)
    fake.rate_limit_headers = headers
    case = uuid.uuid4().hex[:6]
    urls = ([_database(server_url, f"q_{case}")] * n if mode == "shared" else
            [_database(server_url, f"q_{case}_{k}") for k in range(n)])
    start = time.monotonic() + 12.0  # every process imported and registered by then
    end = start + args.seconds
    tags = [f"p{k}x{case}" for k in range(n)]
    procs = [subprocess.Popen(
        [sys.executable, __file__, "--worker", "--database", urls[k], "--tag", tags[k],
         "--start", repr(start), "--end", repr(end), "--limit", str(args.limit),
         "--api", args.api, "--anthropic-url", fake.anthropic_base_url,
         "--openai-url", fake.openai_base_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(n)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=args.seconds + 120)
        if proc.returncode != 0:
            raise SystemExit(f"a worker failed (exit {proc.returncode}):\n{err[-3000:]}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    begin = start + args.settle
    minutes = (end - begin) / 60.0
    inside = [r for r in fake.chat_records() if begin <= r.at < end and r.api == args.api]
    served = []
    for tag in tags:
        mine = [r for r in inside if tag in json.dumps(r.body)]
        served.append(sum(r.status == 200 for r in mine) / minutes)
    refused = sum(r.fault == "over_limit" for r in inside)
    jain = sum(served) ** 2 / (n * sum(s * s for s in served)) if any(served) else 0.0
    row = {"n": n, "mode": mode, "headers": headers, "received": len(inside) / minutes,
           "served": sum(served), "per_process": served,
           "refused": refused, "refused_share": refused / max(1, len(inside)), "jain": jain,
           "spread": min(served) / max(served) if max(served) else 0.0,
           "scored": sum(o["scored"] for o in outs), "started": sum(o["started"] for o in outs)}
    row["met"] = (row["received"] <= args.limit * 1.05 and row["served"] >= 0.9 * args.limit
                  and row["refused_share"] < 0.02 and jain >= 0.95) if mode == "shared" else None
    return row


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", nargs="+", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--limit", type=int, default=1200, help="the account's requests/min")
    parser.add_argument("--api", default="anthropic", choices=sorted(MODELS))
    parser.add_argument("--modes", nargs="+", default=["shared", "apart"],
                        choices=["shared", "apart"])
    parser.add_argument("--headers", default="both", choices=["yes", "no", "both"],
                        help="whether the server sends its rate-limit headers")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for name in ("--database", "--tag", "--anthropic-url", "--openai-url"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    parser.add_argument("--start", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--end", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    from fake_llm_server import FakeLLMServer

    load = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="eh-bench-") as tmp, FakeLLMServer(
            latency=0.1, rpm_limit=args.limit, burst_seconds=2.0,
            rate_limit_headers=True) as fake:
        server_url = start_embedded(Path(tmp) / "pgdata")
        for headers in {"yes": [True], "no": [False], "both": [True, False]}[args.headers]:
            for n in args.processes:
                for mode in args.modes:
                    rows.append(run_case(fake, server_url, n, mode, headers, args))
                    print(f"done: {n} {mode} headers={headers} "
                          f"(load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.processor() or "?") if Path("/proc/cpuinfo").exists() else "?"
    print(f"Measured {date.today().isoformat()} on {cpu} ({os.cpu_count()} cpus), Python "
          f"{platform.python_version()}; load average {load[0]:.2f} before, {load_after[0]:.2f} "
          f"after. `benchmarks/judge_shared_quota.py --seconds {args.seconds:g} --settle "
          f"{args.settle:g} --limit {args.limit} --headers {args.headers}` ({args.api}; the "
          f"configured rate is the server's limit).\n")
    print("| server headers | processes | store | received/min (of the limit) | "
          "served/min (of the limit) | refused by the server's limiter | "
          "served per process/min | Jain's index | slowest / fastest | met |")
    print("|---|---:|---|---:|---:|---:|---|---:|---:|---|")
    ok = True
    for row in rows:
        met = {True: "yes", False: "**no**", None: "-"}[row["met"]]
        ok &= row["met"] is not False
        each = ", ".join(f"{s:,.0f}" for s in row["per_process"])
        print(f"| {'yes' if row['headers'] else 'no'} | {row['n']} | {row['mode']} | "
              f"{row['received']:,.0f} "
              f"({row['received'] / args.limit:.1%}) | {row['served']:,.0f} "
              f"({row['served'] / args.limit:.1%}) | {row['refused']} "
              f"({row['refused_share']:.1%}) | {each} | {row['jain']:.3f} | "
              f"{row['spread']:.2f} | {met} |")
    print()
    print("Targets (shared):", "all met" if ok else "NOT all met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
