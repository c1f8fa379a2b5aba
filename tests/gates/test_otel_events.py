"""Gate results as OpenTelemetry gen_ai.evaluation.result events (eval_harness.gates.otel_events,
``gate --otlp``): written through the SDK to an OTLP/JSON lines file and read back with
protobuf's JSON parser into the OTLP ExportLogsServiceRequest message; posted by OTLP/HTTP to
a tiny local collector that decodes the protobuf body; and, end to end, `gate --otlp` on a
store holding an answer from a trace and one from a JSONL file."""

from __future__ import annotations

import base64
import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("opentelemetry.sdk._logs", reason="gate --otlp needs the otel extra "
                    "(the test extra installs it)")
from google.protobuf.json_format import ParseDict  # noqa: E402
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (  # noqa: E402
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from eval_harness.gates.otel_events import OtlpError, emit_evaluation_events  # noqa: E402
from eval_harness.gates.outcomes import GateOutcome  # noqa: E402

TRACE, SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
OUTCOMES = [
    GateOutcome("t-1", "citation_coverage", 0.5, False, 0.7,
                "1 of 2 claim sentences cite a source; score 0.50 < threshold 0.70", TRACE, SPAN),
    GateOutcome("t-1", "format_compliance", 1.0, True, 0.95,
                "no Markdown defect; score 1.00 >= threshold 0.95", TRACE, SPAN),
    GateOutcome("a-2", "grounding", None, False, 0.8, "unscored: judge down"),
]


def decoded_file(path) -> list[ExportLogsServiceRequest]:
    """Each line parsed into the OTLP message; OTLP/JSON's hex ids turned back into the
    base64 that protobuf's generic JSON mapping reads for bytes."""
    requests = []
    for line in path.read_text().splitlines():
        document = json.loads(line)
        for resource in document["resourceLogs"]:
            for scope in resource["scopeLogs"]:
                for record in scope["logRecords"]:
                    for key in ("traceId", "spanId"):
                        if key in record:
                            assert len(record[key]) in (32, 16)
                            record[key] = base64.b64encode(bytes.fromhex(record[key])).decode()
        requests.append(ParseDict(document, ExportLogsServiceRequest()))
    return requests


def events(requests) -> list[dict]:
    found = []
    for request in requests:
        for resource in request.resource_logs:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}
            for scope in resource.scope_logs:
                for record in scope.log_records:
                    values = {}
                    for attribute in record.attributes:
                        value = attribute.value
                        values[attribute.key] = getattr(value, value.WhichOneof("value"))
                    found.append({"event": record.event_name, "trace": record.trace_id.hex(),
                                  "span": record.span_id.hex(), "attributes": values,
                                  "service": service["service.name"],
                                  "scope": scope.scope.name})
    return found


def check(found: list[dict]) -> None:
    assert len(found) == len(OUTCOMES)
    for event, outcome in zip(found, OUTCOMES):
        assert event["event"] == "gen_ai.evaluation.result"
        assert (event["service"], event["scope"]) == ("eval-harness", "eval_harness.gates")
        attributes = event["attributes"]
        assert attributes["gen_ai.evaluation.name"] == outcome.gate
        assert attributes["gen_ai.evaluation.score.label"] == outcome.label
        assert attributes["gen_ai.evaluation.explanation"] == outcome.explanation
        assert attributes["eval_harness.answer.id"] == outcome.answer_id
        if outcome.score is None:
            assert "gen_ai.evaluation.score.value" not in attributes
        else:
            assert attributes["gen_ai.evaluation.score.value"] == outcome.score
        if outcome.span_id:  # linked to the answer's span, no response id needed
            assert (event["trace"], event["span"]) == (TRACE, SPAN)
            assert "gen_ai.response.id" not in attributes
        else:
            assert event["trace"] == "" and event["span"] == ""
            assert attributes["gen_ai.response.id"] == outcome.answer_id


@pytest.mark.unit
def test_events_to_an_otlp_json_file_read_back_with_the_otlp_decoder(tmp_path):
    path = tmp_path / "results.otlp.jsonl"
    assert emit_evaluation_events(str(path), OUTCOMES) == 3
    check(events(decoded_file(path)))


class Collector(ThreadingHTTPServer):
    """Receives OTLP/HTTP protobuf log exports on /v1/logs and keeps the decoded requests."""

    def __init__(self):
        self.requests, self.paths = [], []
        super().__init__(("127.0.0.1", 0), _CollectorHandler)


class _CollectorHandler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.paths.append((self.path, self.headers["Content-Type"]))
        self.server.requests.append(ExportLogsServiceRequest.FromString(body))
        reply = ExportLogsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def test_events_to_an_otlp_http_collector():
    collector = Collector()
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{collector.server_address[1]}"
        assert emit_evaluation_events(url, OUTCOMES) == 3
    finally:
        collector.shutdown()
    assert {path for path, _ in collector.paths} == {"/v1/logs"}
    assert {kind for _, kind in collector.paths} == {"application/x-protobuf"}
    check(events(collector.requests))


def test_unwritable_file_and_unreachable_collector_say_so(tmp_path):
    with pytest.raises(OtlpError, match="cannot write"):
        emit_evaluation_events(str(tmp_path / "missing" / "results.jsonl"), OUTCOMES)
    collector = Collector()  # bound, never served: refused after the exporter's retries
    port = collector.server_address[1]
    collector.server_close()
    with pytest.raises(OtlpError, match=rf"0 of 3 evaluation events reached "
                                        rf"http://127.0.0.1:{port}/v1/logs"):
        emit_evaluation_events(f"http://127.0.0.1:{port}", OUTCOMES, timeout_seconds=2)


def test_gate_otlp_links_traced_answers_to_their_span(tmp_path, fresh, monkeypatch, capsys):
    from eval_harness.gates.answers import import_answers
    from eval_harness.gates.traces import TracedAnswer
    from eval_harness_pipelines import cli

    created = datetime(2026, 3, 3, 9, 15, tzinfo=UTC)
    sources = [{"id": "d1", "text": "Aspirin lowers the risk of heart attacks."}]
    traced = TracedAnswer(TRACE, "Does aspirin help?", "Aspirin lowers the risk of heart "
                          "attacks in adults [1].", sources, created, TRACE, SPAN)
    plain = tmp_path / "answers.jsonl"
    plain.write_text(json.dumps({"id": "a-2", "query": "Does aspirin help?",
                                 "answer": "Aspirin lowers the risk of heart attacks here.",
                                 "sources": sources, "created_at": created.isoformat()}) + "\n")
    with fresh.connection() as conn:
        import_answers(conn, tmp_path / "spans", records=[traced])
        import_answers(conn, plain)
    config = tmp_path / "config.yaml"
    config.write_text("""
quality_gates:
  answers_file: null
  gates:
    grounding: {enabled: false}
    answer_reward: {enabled: false}
""")
    monkeypatch.setenv("DATABASE_URL", fresh.url)
    out_file = tmp_path / "results.jsonl"
    code = cli.main(["--config", str(config), "gate", "--since", "2026-03-03", "--otlp",
                     str(out_file)])
    out, err = capsys.readouterr()
    assert code == 1 and "4 gen_ai.evaluation.result events written" in out, err
    with fresh.connection() as conn:
        stored = {(a, g): (s, p) for a, g, s, p in conn.execute(
            "SELECT answer_id, gate, score, passed FROM gate_results")}
    found = events(decoded_file(out_file))
    assert len(found) == len(stored) == 4
    for event in found:
        attributes = event["attributes"]
        answer = attributes["eval_harness.answer.id"]
        score, passed = stored[(answer, attributes["gen_ai.evaluation.name"])]
        assert attributes["gen_ai.evaluation.score.value"] == pytest.approx(score)
        assert attributes["gen_ai.evaluation.score.label"] == ("pass" if passed else "fail")
        linked = (event["trace"], event["span"]) == (TRACE, SPAN)
        assert linked == (answer == TRACE)
        assert ("gen_ai.response.id" in attributes) == (answer == "a-2")


@pytest.mark.unit
def test_hostile_ids_and_explanations_are_carried_and_a_lone_surrogate_does_not_drop_them(
        tmp_path, caplog):
    hostile = "ax\x1b]0;pwned\x07\x1b[2J\r\nALL GATES PASSED\x01\x0b\ufffe\u202e"
    outcome = GateOutcome(hostile + "\ud800", "citation_coverage", 0.0, False, 0.7,
                          f'uncited: "{hostile}\udcff"')
    path = tmp_path / "results.otlp.jsonl"
    assert emit_evaluation_events(str(path), [outcome]) == 1
    [event] = events(decoded_file(path))
    assert "Failed to encode" not in caplog.text  # before: logged, and the attribute dropped
    attributes = event["attributes"]
    assert attributes["eval_harness.answer.id"] == hostile + "\\ud800"
    assert attributes["gen_ai.response.id"] == hostile + "\\ud800"
    assert attributes["gen_ai.evaluation.explanation"] == f'uncited: "{hostile}\\udcff"'
