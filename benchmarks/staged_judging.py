"""Cost of dual judging the bundled SciFact test queries with and without staged judging,
against the local fake LLM server (127.0.0.1 only; replies and token counts are the fake's).

    .venv/bin/python benchmarks/staged_judging.py [--queries N] [--staged-only]

Judge 1 (openai:gpt-4o) answers by word overlap (the fake's default reply). Judge 2
(anthropic:claude-haiku-4-5) is that reply with its relevant/not-relevant label flipped for
a share of the pairs (by a hash of the prompt): 0% (agreeing judges), 5%, 10%, 15% and 40%
(judges that barely agree). Each scenario judges the same dataset twice, in two databases:
all pairs by both judges, then staged (``judges.staged``: 20 queries first, 20 more per
step, agreement.kappa_floor 0.70, 2,000 bootstrap resamples). Reported: pairs, judge 2's
requests, the provider cost both runs were billed (fake token counts at judges.prices) and
the price-table estimate of what staging saved. ``--staged-only`` skips the all-pairs runs
(they do not depend on the stop rule). The stop rule (kappa's lower bound with alpha spent
over the planned early looks, :mod:`eval_harness.judges.staging.staged`) is printed under the
table.

Prints a Markdown block for benchmarks/RESULTS.md ("## Staged dual judging").
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from eval_harness.settings.judges import RateLimit, StagedSettings  # noqa: E402
from eval_harness.judges.dual.run import judge_dataset  # noqa: E402
from eval_harness.settings import load_settings  # noqa: E402
from eval_harness.store import StoreLocation, migrate  # noqa: E402
from eval_harness.store.connection import start_embedded  # noqa: E402
from eval_harness.datasets.ingest import ingest_beir  # noqa: E402
from fake_llm_server import FakeLLMServer, default_reply  # noqa: E402

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402


def scratch_database(url: str, name: str) -> str:
    """A new empty database ``name`` on the server of ``url`` (its reply cache starts empty)."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(**{**conninfo_to_dict(url), "dbname": name})

FLIP_SHARES = (0.0, 0.05, 0.10, 0.15, 0.40)
DATASET = "scifact-beir"  # config.yaml's ingested copy of the bundled SciFact


def flipping_judge2(share: float):
    def responder(api, system, user, body):
        reply = default_reply(api, system, user, body)
        if api != "anthropic" or "Relevance score" not in user:
            return reply
        if int.from_bytes(hashlib.sha256(user.encode()).digest()[:4], "big") / 2**32 < share:
            return "0.0" if float(reply) > 0.5 else "1.0"
        return reply
    return responder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=None, help="first N queries only")
    parser.add_argument("--staged-only", action="store_true",
                        help="only the staged runs (the all-pairs ones ignore the stop rule)")
    args = parser.parse_args()
    lines = ["| judge 2 flips | run | queries judged by judge 2 | pairs | judge 2 requests | "
             "billed $ | judge 2 skipped pairs | est. saved $ | kappa lower bound |",
             "|---|---|---|---|---|---|---|---|---|"]
    staged_reports = []
    with tempfile.TemporaryDirectory(prefix="eh-staged-") as tmp, FakeLLMServer() as fake:
        url = start_embedded(Path(tmp) / "pgdata")
        base = load_settings(ROOT / "config.yaml", environ={"DATABASE_URL": url})
        judges = replace(base.judges, budget_usd=None, concurrency=16,
                         rate_limits={"openai": RateLimit(1e6, None),
                                      "anthropic": RateLimit(1e6, None)})
        base = replace(base, judges=judges, openai_api_key="sk-bench-000000",
                       anthropic_api_key="sk-ant-bench-000000",
                       openai_base_url=fake.openai_base_url,
                       anthropic_base_url=fake.anthropic_base_url)
        for n, share in enumerate(FLIP_SHARES):
            fake.responder = flipping_judge2(share)
            for staged in (True,) if args.staged_only else (False, True):
                store = StoreLocation(scratch_database(url, f"bench{n}{int(staged)}"),
                                      f"bench{n}{int(staged)}")
                settings = replace(base, judges=replace(
                    base.judges, staged=StagedSettings(enabled=staged)))
                with store.connection() as conn:
                    migrate(conn)
                    ingest_beir(conn, ROOT / "datasets" / "scifact", name=DATASET)
                    before = len(fake.chat_records("anthropic"))
                    summary = judge_dataset(conn, settings, DATASET, limit=args.queries)
                    asked2 = len(fake.chat_records("anthropic")) - before
                st = summary.staging
                if st is not None:
                    staged_reports.append(st)
                sample = st.sample_queries if st else summary.queries
                bound = (f"{st.lower_bound:.3f}" if st and st.lower_bound is not None
                         else "-")
                lines.append(
                    f"| {share:.0%} | {'staged' if staged else 'all pairs'} | {sample} of "
                    f"{summary.queries} | {summary.pairs} | {asked2} | "
                    f"{summary.cost_usd:.4f} | {summary.judge2_skipped} | "
                    f"{(st.saved_usd if st else 0):.4f} | {bound} |")
                print(lines[-1], file=sys.stderr)
                # a fresh reply cache for the next run: another database, same server
                fake.reset()
                fake.responder = flipping_judge2(share)
    rules = sorted({st.rule.describe() for st in staged_reports})
    lines += ["", *(f"Stop rule: {rule}." for rule in rules)]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
