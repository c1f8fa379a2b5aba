"""Peak memory and time of ``eval-harness answers import`` on a large OTLP/JSON trace file.

    .venv/bin/python benchmarks/otlp_import_memory.py [--traces 100000] [--per-line 200]
                                                      [--layout lines|document] [--seed 31]

Writes a synthetic OTLP/JSON file of ``--traces`` OpenInference traces (a CHAIN root span, a
RETRIEVER span with 3 documents of ~300 characters, an LLM span with the answer), as an
OpenTelemetry collector's file exporter writes them: one ExportTraceServiceRequest per line,
``--per-line`` traces each (``--layout lines``), or the whole file as one JSON document
(``--layout document``: one ``resourceSpans`` array on a single line). Then runs the installed
``eval-harness answers import FILE`` in a child process against a fresh embedded store (a
temporary folder) and reports the child's peak RSS (``wait4``'s ``ru_maxrss``) and wall time,
for the first import (all new) and a second one (all unchanged).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

START_NS = 1_764_460_800 * 1_000_000_000  # 2025-11-30T00:00:00Z
WORDS = ("retrieval dense sparse index vector query rank fusion passage answer citation "
         "source claim grounding judge latency recall precision chunk token").split()


def _attr(key: str, value) -> dict:
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def _trace(rng: random.Random, number: int) -> list[dict]:
    trace_id = f"{number + 1:032x}"
    ids = [f"{number * 4 + k + 1:016x}" for k in range(3)]
    start = START_NS + number * 1_000_000
    query = " ".join(rng.choice(WORDS) for _ in range(12)) + "?"
    documents = [" ".join(rng.choice(WORDS) for _ in range(40)) for _ in range(3)]
    answer = f"{documents[0][:200]} [1]. {documents[1][:120]} [2]."
    retriever = [_attr("openinference.span.kind", "RETRIEVER"), _attr("input.value", query)]
    for rank, text in enumerate(documents):
        document_id = f"doc-{rng.randrange(10**6)}"
        retriever += [_attr(f"retrieval.documents.{rank}.document.id", document_id),
                      _attr(f"retrieval.documents.{rank}.document.content", text),
                      _attr(f"retrieval.documents.{rank}.document.score", rng.random())]
    llm = [_attr("openinference.span.kind", "LLM"), _attr("llm.model_name", "fake-large"),
           _attr("llm.output_messages.0.message.role", "assistant"),
           _attr("llm.output_messages.0.message.content", answer)]
    root = [_attr("openinference.span.kind", "CHAIN"), _attr("input.value", query),
            _attr("output.value", answer)]

    def span(span_id, parent, name, begin, end, attributes):
        out = {"traceId": trace_id, "spanId": span_id, "name": name, "kind": 1,
               "startTimeUnixNano": str(start + begin), "endTimeUnixNano": str(start + end),
               "attributes": attributes, "status": {}}
        if parent:
            out["parentSpanId"] = parent
        return out

    # children end first, as an SDK exports them
    return [span(ids[1], ids[0], "retrieve", 1000, 2000, retriever),
            span(ids[2], ids[0], "generate", 3000, 9000, llm),
            span(ids[0], None, "rag", 0, 10_000, root)]


def _request(spans: list[dict]) -> dict:
    return {"resourceSpans": [{
        "resource": {"attributes": [_attr("service.name", "rag-app")]},
        "scopeSpans": [{"scope": {"name": "openinference.instrumentation.benchmark"},
                        "spans": spans}]}]}


def write_otlp(path: Path, traces: int, per_line: int, layout: str, seed: int) -> None:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        if layout == "document":
            out.write('{"resourceSpans": [')
        for first in range(0, traces, per_line):
            spans = [s for n in range(first, min(first + per_line, traces))
                     for s in _trace(rng, n)]
            if layout == "lines":
                out.write(json.dumps(_request(spans)) + "\n")
            else:
                out.write(("" if first == 0 else ", ")
                          + json.dumps(_request(spans)["resourceSpans"][0]))
        if layout == "document":
            out.write("]}\n")


def _import(cli: str, path: Path, env: dict, cwd: Path) -> tuple[float, float, str]:
    """Seconds, peak RSS (MiB) and output of one ``answers import`` in a child process."""
    started = time.perf_counter()
    child = subprocess.Popen([cli, "--config", str(cwd / "config.yaml"), "answers", "import",
                              str(path)], env=env, cwd=cwd, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"import failed:\n{out}")
    return seconds, usage.ru_maxrss / 1024, out.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--per-line", type=int, default=200)
    parser.add_argument("--layout", choices=("lines", "document"), default="lines")
    parser.add_argument("--seed", type=int, default=31)
    args = parser.parse_args()

    from eval_harness.store import StoreLocation, migrate
    from eval_harness.store.connection import start_embedded

    cli = str(Path(sys.executable).with_name("eval-harness"))
    with tempfile.TemporaryDirectory(prefix="eh-otlp-bench-") as folder:
        root = Path(folder)
        path = root / "traces.otlp.jsonl"
        write_otlp(path, args.traces, args.per_line, args.layout, args.seed)
        store = StoreLocation(start_embedded(root / "pgdata"), "benchmark")
        with store.connection() as conn:
            migrate(conn)
            conn.commit()
        (root / "config.yaml").write_text("quality_gates:\n  partition_start: 2025-01-01\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_HARNESS_")}
        env.update(DATABASE_URL=store.url)
        env.pop("DAGSTER_HOME", None)
        print(f"machine: {platform.machine()}, {os.cpu_count()} cpus, Python "
              f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f}; "
              f"{args.traces:,} traces, layout {args.layout}, file "
              f"{path.stat().st_size / 2**20:,.0f} MiB")
        for run in ("first import", "reimport"):
            seconds, peak, line = _import(cli, path, env, root)
            print(f"{run}: {seconds:.1f} s, peak RSS {peak:,.0f} MiB ({line})")
        print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
