"""Throughput of the rule-based gates (format compliance + citation coverage) on one core.

    .venv/bin/python benchmarks/gates.py [--answers 100000] [--seed 676] [--stream 1000000]

Part 1 generates seeded synthetic answers (about 1 KB: a few paragraphs, a list, citations in
every accepted form, abbreviations, decimals, URLs, code, and a realistic share of formatting
defects and invalid citations) and times both gates over them in memory. Target: at least
20,000 answers/s for the two gates together.

Part 2 (``--stream N``, default 1,000,000; 0 skips it) COPYs N such answers, all created on one
day, into the ``answers`` table of a fresh embedded store in a temporary folder, then runs the
quality-gate runner over that day exactly as the Dagster asset does: server-side cursor,
batches of 1,000, both gates, results upserted into ``gate_results``, then the per-gate
summaries. It runs in a child process so that the peak RSS it reports (``ru_maxrss``) is that
of streaming alone, not of part 1's in-memory answers. Target: < 500 MB RSS. The Postgres
server is a separate process and is not counted.
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import random
import resource
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_harness.gates.citation_coverage import citation_coverage  # noqa: E402
from eval_harness.gates.format_compliance import format_compliance  # noqa: E402

SUBJECTS = [
    "Retrieval-augmented generation", "The dense retriever", "BM25", "The cross-encoder reranker",
    "Hybrid search", "The vector index", "Query expansion", "The chunking strategy",
    "Dr. Lewis et al.", "The U.S. benchmark", "The grounding judge", "Reciprocal rank fusion",
]
VERBS = [
    "improves", "reduces", "depends on", "is sensitive to", "outperforms", "complements",
    "was evaluated against", "scales with", "is cheaper than", "needs no tuning for",
]
OBJECTS = [
    "recall at 10 on the test split", "the latency of long queries", "exact keyword matches",
    "answers that cite their sources", "multi-hop questions, e.g. bridge entities",
    "rare entity names, i.e. the long tail", "the score by 3.14 points", "a 0.5 ms budget",
    "the cost per 1,000 queries vs. a single LLM call", "documents from https://example.org/a.b",
    "the `top_k` parameter", "passages of about 512 tokens",
]
CODE_BLOCKS = [
    "```python\nresults = index.search(query, k=10)  # see docs. Then rerank.\n"
    "print(results[0])\n```",
    "```bash\n# install\npip install eval-harness\n```",
    "~~~sql\nSELECT id FROM docs WHERE rank > 0.5;\n~~~",
]


def synthetic_answer(rng: random.Random, source_count: int) -> str:
    """One Markdown answer; roughly 80% clean, the rest with one or more kinds of defect."""
    parts: list[str] = []
    if rng.random() < 0.6:
        parts.append("## " + rng.choice(SUBJECTS) if rng.random() > 0.03 else "##")
    for _ in range(rng.randint(2, 4)):
        parts.append(" ".join(_sentence(rng, source_count) for _ in range(rng.randint(2, 5))))
    if rng.random() < 0.7:
        parts.append(rng.choice(["Key points:", "In short:", "The main steps are:"]))
        marker = rng.choice(["-", "*", "1."])
        items = [f"{marker} {_sentence(rng, source_count)}" for _ in range(rng.randint(3, 5))]
        if rng.random() < 0.04:
            items.insert(rng.randrange(len(items)), marker)
        parts.append("\n".join(items))
    if rng.random() < 0.25:
        block = rng.choice(CODE_BLOCKS)
        if rng.random() < 0.05:
            block = block.rsplit("\n", 1)[0]  # drop the closing fence
        parts.append(block)
    if rng.random() < 0.03:
        parts.append("More details are in [the documentation]().")
    if rng.random() < 0.1:
        parts.append("Would a larger index help here?")
    return "\n\n".join(parts) + "\n"


def _sentence(rng: random.Random, source_count: int) -> str:
    text = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
    roll = rng.random()
    if roll < 0.15:
        return text + "."  # uncited
    if roll < 0.55:
        marker = f"[{rng.randint(1, source_count)}]"
    elif roll < 0.7:
        marker = f"[{rng.randint(1, source_count)}][{rng.randint(1, source_count)}]"
    elif roll < 0.85:
        marker = f"[1, {rng.randint(2, source_count)}]"
    elif roll < 0.98:
        marker = f"[1-{rng.randint(2, source_count)}]"
    else:
        marker = f"[{source_count + rng.randint(1, 3)}]"  # points to no source
    return f"{text} {marker}." if rng.random() < 0.8 else f"{text}.{marker}"


def run_throughput(answer_count: int, seed: int) -> None:
    rng = random.Random(seed)
    source_count = 5
    sources = [{"id": f"doc-{n}", "text": f"source {n}"} for n in range(1, source_count + 1)]
    answers = [synthetic_answer(rng, source_count) for _ in range(answer_count)]
    mean_bytes = sum(len(answer.encode()) for answer in answers) / answer_count

    format_passed = coverage_passed = 0
    started = time.perf_counter()
    for answer in answers:
        format_passed += format_compliance(answer).passed
        coverage_passed += citation_coverage(answer, sources).passed
    elapsed = time.perf_counter() - started

    print(f"answers: {answer_count:,} (seed {seed}, mean {mean_bytes:,.0f} bytes)")
    print(f"format_compliance + citation_coverage: {answer_count / elapsed:,.0f} answers/s, "
          f"{elapsed * 1000 / answer_count:.4f} ms/answer ({elapsed:.2f} s total)")
    print(f"passed: format {format_passed / answer_count:.1%}, "
          f"citation coverage {coverage_passed / answer_count:.1%}")


# ---------------------------------------------------------------------------------------------
# Part 2: stream 1,000,000 answers from Postgres and gate them.
# ---------------------------------------------------------------------------------------------

STREAM_DAY = datetime(2025, 1, 15, tzinfo=UTC)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kilobytes on Linux


def _load_answers(store, answer_count: int, seed: int) -> float:
    """COPY ``answer_count`` synthetic answers, generated one at a time, into ``answers``."""
    from psycopg.types.json import Jsonb

    rng = random.Random(seed)
    source_count = 5
    sources = Jsonb([{"id": f"doc-{n}", "text": f"source {n}"}
                     for n in range(1, source_count + 1)])
    started = time.perf_counter()
    with store.connection() as conn:
        with conn.cursor().copy("COPY answers (id, query, answer, sources, created_at) "
                                "FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["text", "text", "text", "jsonb", "timestamptz"])
            for number in range(answer_count):
                created = STREAM_DAY + timedelta(seconds=rng.randrange(86_400))
                copy.write_row((f"bench-{number:07d}", "What does the benchmark show?",
                                synthetic_answer(rng, source_count), sources, created))
        conn.execute("ANALYZE answers")
        conn.commit()
    return time.perf_counter() - started


def _stream_child(answer_count: int, seed: int, results) -> None:
    """Runs in a fresh process: embedded store, COPY, then the runner over the day."""
    from eval_harness.gates.registry import build_gates
    from eval_harness.gates.runner import evaluate_window, summarize_gates
    from eval_harness.gates.window import TimeWindow
    from eval_harness.settings import QualityGateSettings
    from eval_harness.settings.gates import DEFAULT_GATES, GateSettings
    from eval_harness.store import StoreLocation, migrate
    from eval_harness.store.connection import start_embedded

    with tempfile.TemporaryDirectory(prefix="eh-gates-bench-") as folder:
        store = StoreLocation(start_embedded(Path(folder) / "pgdata"), "benchmark")
        with store.connection() as conn:
            migrate(conn)
            conn.commit()
        load_s = _load_answers(store, answer_count, seed)
        rss_before = _peak_rss_mb()
        gates = build_gates(QualityGateSettings(gates={  # the rule gates (judged ones: elsewhere)
            **DEFAULT_GATES, "grounding": GateSettings(enabled=False),
            "answer_reward": GateSettings(enabled=False)}))
        window = TimeWindow.day(STREAM_DAY.date())
        run = evaluate_window(store, window, gates)
        rss_evaluated = _peak_rss_mb()
        started = time.perf_counter()
        with store.connection() as conn:
            summaries = summarize_gates(conn, window, gates, run_id=run.run_id)
        summary_s = time.perf_counter() - started
        rerun = evaluate_window(store, window, gates)
        results.put({"load_s": load_s, "evaluate_s": run.seconds, "read": run.answers_read,
                     "summary_s": summary_s, "rerun_s": rerun.seconds,
                     "rerun_read": rerun.answers_read, "rss_before_mb": rss_before,
                     "rss_peak_mb": max(rss_evaluated, _peak_rss_mb()),
                     "pass_rates": {s.gate: s.pass_rate for s in summaries}})


def run_streaming(answer_count: int, seed: int) -> None:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_stream_child, args=(answer_count, seed, results))
    child.start()
    outcome = results.get()
    child.join()
    print(f"\npostgres streaming: {answer_count:,} answers COPY'd in {outcome['load_s']:.1f} s")
    print(f"evaluate (stream + both gates + upsert {2 * outcome['read']:,} results): "
          f"{outcome['read'] / outcome['evaluate_s']:,.0f} answers/s "
          f"({outcome['evaluate_s']:.1f} s)")
    print(f"summaries over the day: {outcome['summary_s']:.1f} s; rerun with nothing new: "
          f"{outcome['rerun_read']} evaluated in {outcome['rerun_s']:.1f} s")
    print(f"peak RSS: {outcome['rss_peak_mb']:,.0f} MB (target < 500 MB; "
          f"{outcome['rss_before_mb']:,.0f} MB before evaluating)")
    print("pass rates: " + ", ".join(f"{gate} {rate:.1%}"
                                      for gate, rate in outcome["pass_rates"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=100_000, help="synthetic answers to gate")
    parser.add_argument("--seed", type=int, default=676, help="seed of the answer generator")
    parser.add_argument("--stream", type=int, default=1_000_000,
                        help="answers to stream from Postgres in part 2 (0 skips it)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}, "
          f"python {platform.python_version()}")
    if args.answers:
        run_throughput(args.answers, args.seed)
    if args.stream:
        run_streaming(args.stream, args.seed)


if __name__ == "__main__":
    main()
