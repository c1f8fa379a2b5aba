"""A running Phoenix, both ways (eval_harness.gates.phoenix through the CLI): a real Phoenix
server on loopback (tests/support/phoenix_server.py) receives the spans of a small RAG loop
instrumented with OpenInference (tests/support/traced_rag.py) over OTLP/HTTP;
``answers pull`` imports one answer per trace, ``gate --to-phoenix`` posts the gate results
back as span annotations, which are read back through Phoenix's REST API; pulling and gating
again duplicates nothing. Bad traces, an unknown project and an unreachable Phoenix: one
sentence, exit 2, nothing imported."""

from __future__ import annotations

import json
import time

import pytest

from cli_runs import run_cli
from phoenix_server import free_port, phoenix_server, require_phoenix

PROJECT = "default"  # the project Phoenix files spans under without openinference.project.name
GATES = ("format_compliance", "citation_coverage")


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    require_phoenix()
    with phoenix_server(tmp_path_factory.mktemp("phoenix")) as url:
        yield url


pytestmark = [pytest.mark.slow, pytest.mark.project(database="fresh", config="""
quality_gates:
  partition_start: 2025-01-01
  answers_file: null
  gates:
    format_compliance: {enabled: true, threshold: 0.95, min_pass_rate: 0.5, blocking: true}
    citation_coverage: {enabled: true, threshold: 0.70, min_pass_rate: 0.5, blocking: true}
    grounding: {enabled: false}
    answer_reward: {enabled: false}
dagster:
  home: dagster-home
""")]


def send_spans(url: str, spans) -> None:
    """Export the spans to Phoenix's OTLP/HTTP endpoint and wait until it has stored them."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult
    from phoenix.client import Client

    assert OTLPSpanExporter(endpoint=f"{url}/v1/traces").export(spans) \
        == SpanExportResult.SUCCESS
    wanted = {format(span.context.span_id, "016x") for span in spans}
    client, deadline = Client(base_url=url), time.monotonic() + 30
    while time.monotonic() < deadline:  # Phoenix inserts spans in the background
        stored = {s["context"]["span_id"] for s in
                  client.spans.get_spans(project_identifier=PROJECT, limit=10_000)}
        if wanted <= stored:
            return
        time.sleep(0.2)
    pytest.fail(f"Phoenix stored {len(wanted & stored)} of {len(wanted)} spans in 30 s")


def annotations(url: str, span_ids):
    from phoenix.client import Client

    return Client(base_url=url).spans.get_span_annotations(span_ids=list(span_ids),
                                                           project_identifier=PROJECT)


def test_pull_gate_and_annotations_round_trip(phoenix, project, fresh, capsys):
    from traced_rag import run_rag

    spans, expected = run_rag()
    send_spans(phoenix, spans)

    code, out, err = run_cli(capsys, "--config", project, "answers", "pull",
                             "--phoenix", phoenix, "--project", PROJECT)
    assert code == 0, err
    assert "3 new, 0 updated, 0 unchanged" in out
    with fresh.connection() as conn:
        rows = conn.execute("SELECT id, query, answer, sources, trace_id, span_id "
                            "FROM answers ORDER BY id").fetchall()
        assert conn.execute("SELECT count(*) FROM answers").fetchone()[0] == 3
    assert sorted((e.trace_id, e.query, e.answer, e.source_ids, e.trace_id, e.span_id)
                  for e in expected) == [
        (r[0], r[1], r[2], [s["id"] for s in r[3]], r[4], r[5]) for r in rows]

    # an answer from a file has no span to annotate: counted, said in one line
    plain = project.parent / "answers.jsonl"
    plain.write_text(json.dumps({"id": "file-1", "query": "Is water wet?", "answer": "Yes [1].",
                                 "sources": [{"id": "w", "text": "Water is wet."}]}) + "\n")
    assert run_cli(capsys, "--config", project, "answers", "import", plain)[0] == 0
    code, out, err = run_cli(capsys, "--config", project, "gate", "--since", "2000-01-01",
                             "--to-phoenix", phoenix)
    assert code in (0, 1), err
    assert "6 gate results posted to Phoenix" in out
    assert "1 answers have no span id (not imported from a trace)" in out

    with fresh.connection() as conn:
        stored = {(answer_id, gate): (score, passed) for answer_id, gate, score, passed in
                  conn.execute("SELECT answer_id, gate, score, passed FROM gate_results "
                               "WHERE answer_id <> 'file-1'")}
    span_of = {e.trace_id: e.span_id for e in expected}
    found = annotations(phoenix, span_of.values())
    assert sorted((a["span_id"], a["name"]) for a in found) == sorted(
        (span, gate) for span in span_of.values() for gate in GATES)
    answer_of = {span: trace for trace, span in span_of.items()}
    for annotation in found:
        score, passed = stored[(answer_of[annotation["span_id"]], annotation["name"])]
        result = annotation["result"]
        assert result["score"] == pytest.approx(score)
        assert result["label"] == ("pass" if passed else "fail")
        assert "threshold" in result["explanation"] and "\n" not in result["explanation"]
        assert annotation["annotator_kind"] == "CODE"
        assert annotation["identifier"] == "eval-harness"

    # again: nothing new in the store, the same annotations updated in place
    code, out, err = run_cli(capsys, "--config", project, "answers", "pull",
                             "--phoenix", phoenix, "--project", PROJECT)
    assert code == 0 and "0 new, 0 updated, 3 unchanged" in out, err
    code, out, err = run_cli(capsys, "--config", project, "gate", "--since", "2000-01-01",
                             "--to-phoenix", phoenix)
    assert code in (0, 1) and "6 gate results posted" in out, err
    again = annotations(phoenix, span_of.values())
    assert sorted(a["id"] for a in again) == sorted(a["id"] for a in found)

    # a trace without the answering LLM span: named, and nothing of the pull imported
    bad_spans, bad = run_rag(("Is water wet?",), rewrite=False, answer_span=False)
    send_spans(phoenix, bad_spans)
    code, out, err = run_cli(capsys, "--config", project, "answers", "pull",
                             "--phoenix", phoenix, "--project", PROJECT)
    assert code == 2 and out == ""
    assert f"trace {bad[0].trace_id}" in err and "nothing imported" in err
    assert len(err.strip().splitlines()) == 1
    with fresh.connection() as conn:
        assert conn.execute("SELECT count(*) FROM answers").fetchone()[0] == 4


def test_unknown_project_and_unreachable_phoenix(phoenix, project, capsys):
    code, out, err = run_cli(capsys, "--config", project, "answers", "pull",
                             "--phoenix", phoenix, "--project", "no-such-project")
    assert code == 2 and "no project 'no-such-project'" in err
    assert len(err.strip().splitlines()) == 1

    nowhere = f"http://127.0.0.1:{free_port()}"
    code, out, err = run_cli(capsys, "--config", project, "answers", "pull",
                             "--phoenix", nowhere, "--project", PROJECT)
    assert code == 2 and f"cannot reach Phoenix at {nowhere}" in err
    assert len(err.strip().splitlines()) == 1
