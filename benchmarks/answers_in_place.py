"""Answers in place (``quality_gates.answers``, sources ``kind: ids``) against the same answers
imported into the harness's own ``answers`` table, on the rule-based gates.

    .venv/bin/python benchmarks/answers_in_place.py [--answers 100000] [--documents 20000]
                                                    [--sources 3] [--seed 676]

A fresh embedded store in a temporary folder gets a seeds-style corpus ``rag.l2_insights``
(``--documents`` rows of about 800 characters, integer primary key) and the same synthetic
answers (benchmarks/gates.py's generator, one day) twice: in ``rag.served`` citing
``--sources`` random corpus ids (``integer[]``, read in place: each source's text is looked up
in the corpus by id, in citation order), and in the harness's ``answers`` with those texts
copied into the ``sources`` JSON (the answers contract). For each: the first evaluation
(server-side cursor, batches of 1,000, format_compliance + citation_coverage, results
upserted), the per-gate summaries, and a rerun that finds nothing stale. Both runs gate the
same texts, so their pass rates must be equal; they use different answer ids, so neither sees
the other's results.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DAY = datetime(2025, 6, 2, tzinfo=UTC)


def _generator():
    """benchmarks/gates.py's synthetic answer generator."""
    spec = importlib.util.spec_from_file_location("bench_gates",
                                                  Path(__file__).with_name("gates.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.synthetic_answer


def _load(store, answers: int, documents: int, sources: int, seed: int) -> float:
    from psycopg.types.json import Jsonb

    synthetic_answer = _generator()
    rng = random.Random(seed)
    words = ("retrieval dense sparse index vector query rank fusion passage answer citation "
             "source claim grounding judge latency recall precision chunk token").split()
    texts = [" ".join(rng.choice(words) for _ in range(110)) for _ in range(documents)]
    started = time.perf_counter()
    with store.connection() as conn:
        conn.execute("CREATE SCHEMA rag")
        conn.execute("CREATE TABLE rag.l2_insights (id integer PRIMARY KEY, content text NOT "
                     "NULL)")
        conn.execute("CREATE TABLE rag.served (id bigint PRIMARY KEY, query text NOT NULL, "
                     "answer text NOT NULL, sources integer[] NOT NULL, "
                     "created_at timestamptz NOT NULL)")
        with conn.cursor().copy("COPY rag.l2_insights (id, content) FROM STDIN") as copy:
            for number, text in enumerate(texts, start=1):
                copy.write_row((number, text))
        rows = []  # two COPYs cannot be open at once: the rows first
        for number in range(answers):
            ids = [rng.randint(1, documents) for _ in range(sources)]
            rows.append((number, synthetic_answer(rng, sources), ids,
                         DAY.replace(second=number % 60, minute=(number // 60) % 60)))
        with conn.cursor().copy("COPY rag.served FROM STDIN") as copy:
            for number, text, ids, created in rows:
                copy.write_row((number, "What does the benchmark show?", text, ids, created))
        with conn.cursor().copy("COPY answers (id, query, answer, sources, created_at) "
                                "FROM STDIN") as copy:
            for number, text, ids, created in rows:
                copy.write_row((f"imported-{number}", "What does the benchmark show?", text,
                                Jsonb([{"id": i, "text": texts[i - 1]} for i in ids]),
                                created))
        conn.execute("CREATE INDEX ON rag.served (created_at)")
        conn.execute("ANALYZE rag.l2_insights")
        conn.execute("ANALYZE rag.served")
        conn.execute("ANALYZE answers")
        conn.commit()
    return time.perf_counter() - started


def _gate(store, relation) -> dict:
    from eval_harness.gates.registry import build_gates
    from eval_harness.gates.runner import evaluate_window, summarize_gates
    from eval_harness.gates.window import TimeWindow
    from eval_harness.settings import QualityGateSettings
    from eval_harness.settings.gates import DEFAULT_GATES, GateSettings

    gates = build_gates(QualityGateSettings(gates={  # the rule gates (judged ones: elsewhere)
            **DEFAULT_GATES, "grounding": GateSettings(enabled=False),
            "answer_reward": GateSettings(enabled=False)}))
    window = TimeWindow.day(DAY.date())
    run = evaluate_window(store, window, gates, relation=relation)
    started = time.perf_counter()
    with store.connection() as conn:
        summaries = summarize_gates(conn, window, gates, relation=relation, run_id=run.run_id)
    summary_s = time.perf_counter() - started
    rerun = evaluate_window(store, window, gates, relation=relation)
    return {"read": run.answers_read, "evaluate_s": run.seconds, "summary_s": summary_s,
            "rerun_s": rerun.seconds, "rerun_read": rerun.answers_read,
            "pass_rates": {s.gate: round(s.pass_rate, 6) for s in summaries}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--documents", type=int, default=20_000)
    parser.add_argument("--sources", type=int, default=3)
    parser.add_argument("--seed", type=int, default=676)
    args = parser.parse_args()

    from eval_harness.gates.answers_mapping import check_answers_mapping
    from eval_harness.settings import QualityGateSettings, Settings
    from eval_harness.settings.datasets import (
        CorpusMapping,
        DatasetConfig,
        GroundTruthMapping,
        LiveMapping,
        Relation,
    )
    from eval_harness.settings.gates_answers import AnswersMapping
    from eval_harness.store import StoreLocation, migrate
    from eval_harness.store.connection import start_embedded

    corpus = CorpusMapping(Relation("rag", "l2_insights"), "id", "content", "embedding", None)
    truth = GroundTruthMapping(Relation("rag", "ground_truth"), "id", "query", "expected_docs")
    settings = Settings(
        config_path=None, root=Path.cwd(),
        datasets={"bench": DatasetConfig("bench", embedder="local:x",
                                         live=LiveMapping(corpus, truth))},
        quality_gates=QualityGateSettings(answers=AnswersMapping(
            Relation("rag", "served"), kind="ids", dataset="bench")))
    print(f"machine: {platform.machine()}, {platform.python_version()}; {args.answers:,} "
          f"answers citing {args.sources} of {args.documents:,} documents, seed {args.seed}")
    with tempfile.TemporaryDirectory(prefix="eh-in-place-bench-") as folder:
        store = StoreLocation(start_embedded(Path(folder) / "pgdata"), "benchmark")
        with store.connection() as conn:
            migrate(conn)
            conn.commit()
        load_s = _load(store, args.answers, args.documents, args.sources, args.seed)
        print(f"load (corpus, both copies of the answers): {load_s:.1f} s")
        with store.connection() as conn:
            mapped = check_answers_mapping(conn, settings)
        for name, relation in (("imported (answers, JSON sources)", "answers"),
                               ("in place (rag.served, ids resolved)", mapped)):
            r = _gate(store, relation)
            print(f"{name}: evaluate {r['read'] / r['evaluate_s']:,.0f} answers/s "
                  f"({r['evaluate_s']:.1f} s), summaries {r['summary_s']:.1f} s, rerun "
                  f"{r['rerun_read']} evaluated in {r['rerun_s']:.1f} s; pass rates "
                  f"{r['pass_rates']}")


if __name__ == "__main__":
    main()
