"""`eval-harness answers import FILE [--format F]` (eval_harness.cli.answers) on a real store:
the detected format said, new/updated/unchanged counts, a bad trace named, exit codes; every
malformed record of every format named in one sentence (file:line and field) with nothing
imported; a trace twice in one file; what a reader skips, said."""

from __future__ import annotations

import json

import pytest

from answer_files import (
    SOURCES,
    answer_row,
    element_line,
    harness_answers_config,
    stored_answers,
    write_jsonl,
)
from cli_runs import run_cli
from colliding_processes import child_env, cli, finish
from eval_dataset_files import deepeval_case, write_deepeval_json
from eval_harness_pipelines import cli as pipelines_cli
from traced_rag import otlp_json_lines, phoenix_rest_spans, run_rag

# The shipped config.yaml (gates reading the harness's own answers table) on a database of its
# own: the traced answers are dated today, and the tests count its rows.
pytestmark = pytest.mark.project(config=lambda path: harness_answers_config(path.parent),
                                 database="fresh")


def test_import_of_traces_says_the_format_and_counts(project, capsys, tmp_path):
    spans, expected = run_rag()
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_json_lines(spans))
    code, out, err = run_cli(capsys, "--config", project, "answers", "import", path)
    assert code == 0, err
    assert out.splitlines() == [
        "format: otlp-json (detected: resourceSpans (an OTLP/JSON trace export))",
        f"answers from {path} into 'answers': 3 new, 0 updated, 0 unchanged"]
    code, out, _ = run_cli(capsys, "--config", project, "answers", "import", path,
                           "--format", "otlp-json")
    assert code == 0
    assert out.splitlines() == [f"answers from {path} into 'answers': 0 new, 0 updated, "
                                "3 unchanged"]


def test_a_bad_trace_exits_2_naming_it(project, capsys, tmp_path):
    spans, expected = run_rag(["Does sleep help memory?"], answer_span=False, rewrite=False)
    path = tmp_path / "traces.jsonl"
    path.write_text(otlp_json_lines(spans, batches=1))
    code, out, err = run_cli(capsys, "--config", project, "answers", "import", path)
    assert code == 2 and out.startswith("format: otlp-json")
    assert err == (f"eval-harness: error: {path}:1: trace {expected[0].trace_id}: has no LLM "
                   "span (openinference.span.kind LLM) to take the answer from.\n")


def test_an_unknown_format_name_is_refused_by_the_parser(project, capsys, tmp_path):
    with pytest.raises(SystemExit) as raised:
        pipelines_cli.main(["--config", str(project), "answers", "import", str(tmp_path / "x"),
                  "--format", "yaml"])
    assert raised.value.code == 2
    assert "invalid choice: 'yaml'" in capsys.readouterr().err


# --- malformed records: one sentence with file:line and the field, nothing imported --------

def _otlp_request(questions=("Does sleep help memory?",)) -> dict:
    spans, _ = run_rag(list(questions), rewrite=False)
    return json.loads(otlp_json_lines(spans, batches=1))


def _spans(request: dict) -> list[dict]:
    return request["resourceSpans"][0]["scopeSpans"][0]["spans"]


def _jsonl_nested_100000_deep(path):
    path.write_text('{"id": "a", "query": "q", "answer": "x", "sources": [], "meta": '
                    + "[" * 100_000 + "]" * 100_000 + "}\n")
    return (f"{path}:1: nested more than 100 levels deep (in 'meta'); an answer's record "
            "needs far fewer: flatten that field.")


def _otlp_start_10_to_the_30(path):
    request = _otlp_request()
    span = _spans(request)[0]
    span["startTimeUnixNano"] = str(10**30)
    path.write_text(json.dumps(request) + "\n")
    return (f"{path}:1: span {span['spanId']} of trace {span['traceId']}: "
            f"'startTimeUnixNano' {10**30} is not a time from 1970 to 9999")


def _phoenix_start_minus_1e300(path):
    spans, _ = run_rag(["Does sleep help memory?"], rewrite=False)
    objects = phoenix_rest_spans(spans)
    objects[1]["start_time"] = -1e300
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    context = objects[1]["context"]
    return (f"{path}:2: span {context['span_id']} of trace {context['trace_id']}: "
            "'start_time' -1e+300 is not a time from 1970 to 9999")


def _deepeval_integer_contexts(path):
    case = deepeval_case("Does sleep help memory?", "It does [1].", ["Sleep helps."])
    case["retrieval_context"] = [1, 2]
    write_deepeval_json(path, [case])
    return (f"{path}:{element_line(path.read_text(), 1)}: 'retrieval_context' must be a list "
            "of strings; item 1 is a number")


def _jsonl_created_in_year_1(path):
    write_jsonl(path, [answer_row("a-1", "Text [1].", "0001-01-01T00:00:00+01:00")])
    return (f"{path}:1: 'created_at' '0001-01-01T00:00:00+01:00' is before 1970 (the Unix "
            "epoch), which no answer can be; fix the date in the system that exported the "
            "file, or leave the field out to stamp the import time.")


def _jsonl_score_1e400(path):
    row = json.dumps(answer_row("a-1", "Text [1].", None, sources=[
        {**SOURCES[0], "score": 0.5}, {**SOURCES[1], "score": 0.25}]))
    write_jsonl(path, [row.replace("0.25", "1e400")])
    return (f"{path}:1: 'sources[1].score' is 1e400, which is not a finite JSON number "
            "(Postgres cannot store it); write a finite number or null.")


def _jsonl_id_of_10_mb(path):
    write_jsonl(path, [answer_row("x" * 10_000_000, "Text [1].", None)])
    return (f"{path}:1: 'id' is 10,000,000 characters long; an id may have at most 512 (it is "
            "the answers table's key): use a shorter id, or a hash of this one.")


MALFORMED = [_jsonl_nested_100000_deep, _otlp_start_10_to_the_30, _phoenix_start_minus_1e300,
             _deepeval_integer_contexts, _jsonl_created_in_year_1, _jsonl_score_1e400,
             _jsonl_id_of_10_mb]


@pytest.mark.parametrize("malformed", MALFORMED, ids=lambda f: f.__name__.strip("_"))
def test_a_malformed_record_is_one_sentence_naming_file_line_and_field(
        malformed, project, fresh, capsys, tmp_path):
    path = tmp_path / ("answers.json" if "deepeval" in malformed.__name__ else "answers.jsonl")
    sentence = malformed(path)
    code, out, err = run_cli(capsys, "--config", project, "answers", "import", path)
    assert (code, err) == (2, f"eval-harness: error: {sentence}\n")
    assert "answers from" not in out
    assert stored_answers(fresh) == 0


def test_the_deepest_record_is_named_by_the_installed_command(project, fresh, tmp_path):
    """In its own process, as a user runs it: the sentence, no traceback."""
    path = tmp_path / "deep.jsonl"
    sentence = _jsonl_nested_100000_deep(path)
    code, out, err = finish(cli("--config", project, "answers", "import", path,
                                env=child_env(fresh), cwd=tmp_path))
    assert (code, err) == (2, f"eval-harness: error: {sentence}\n")
    assert "Traceback" not in out + err and stored_answers(fresh) == 0


# --- the same trace twice; what is skipped -------------------------------------------------

def test_a_trace_twice_with_different_answers_is_refused_naming_both_lines(
        project, fresh, capsys, tmp_path):
    request = _otlp_request()
    changed = json.loads(json.dumps(request))
    llm = next(s for s in _spans(changed)
               if any(a["key"] == "openinference.span.kind" and a["value"]["stringValue"] == "LLM"
                      for a in s["attributes"]))
    for attribute in llm["attributes"]:
        if attribute["key"] == "llm.output_messages.0.message.content":
            attribute["value"]["stringValue"] = "A different answer [1]."
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(request) + "\n" + json.dumps(changed) + "\n")
    code, out, err = run_cli(capsys, "--config", project, "answers", "import", path)
    assert code == 2
    assert err == (f"eval-harness: error: {path}:2: trace {llm['traceId']}: span "
                   f"{llm['spanId']} differs from its copy at {path}:1 (attribute "
                   "llm.output_messages.0.message.content); the same trace twice with "
                   "different content cannot be imported: keep one copy.\n")
    assert stored_answers(fresh) == 0


def test_a_trace_twice_identically_is_imported_once_and_said(project, fresh, capsys, tmp_path):
    request = _otlp_request()
    spans = _spans(request)
    path = tmp_path / "traces.jsonl"
    path.write_text((json.dumps(request) + "\n") * 2)
    code, out, err = run_cli(capsys, "--config", project, "answers", "import", path)
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == [
        f"{path}:2: span {spans[0]['spanId']} of trace {spans[0]['traceId']} repeats "
        f"{path}:1 identically (and {len(spans) - 1} more spans repeat an identical copy); "
        "each read once.",
        f"answers from {path} into 'answers': 1 new, 0 updated, 0 unchanged"]
    assert stored_answers(fresh) == 1


def test_a_scope_with_null_spans_is_said_and_the_rest_imported(project, fresh, capsys, tmp_path):
    request = _otlp_request()
    request["resourceSpans"][0]["scopeSpans"].append(
        {"scope": {"name": "openinference.instrumentation.langchain"}, "spans": None})
    path = tmp_path / "traces.jsonl"
    path.write_text("\n" + json.dumps(request) + "\n")
    code, out, err = run_cli(capsys, "--config", project, "answers", "import", path)
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == [
        f"{path}:2: scope 'openinference.instrumentation.langchain' has no spans (null); "
        "skipped.",
        f"answers from {path} into 'answers': 1 new, 0 updated, 0 unchanged"]
    assert stored_answers(fresh) == 1
