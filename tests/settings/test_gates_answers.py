"""``quality_gates.answers``: the RAG system's answers table mapped in config.yaml
(eval_harness.settings.gates_answers); its check against the store is
tests/gates/test_answers_mapping.py."""

from __future__ import annotations

import pytest

from eval_harness.settings import ConfigError, load_settings
from eval_harness.settings.datasets import Relation
from eval_harness.settings.gates_answers import AnswersMapping
from paths import REPO

pytestmark = pytest.mark.unit

MAPPED = ("quality_gates:\n  answers_file: null\n  answers: {relation: rag.served, id: answer_id, "
          "query: question, answer: response, created_at: served_at, "
          "sources: {column: source_ids, kind: ids}, dataset: prod}\n")


def _load(tmp_path, text: str):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    return load_settings(config, environ={})


def test_the_long_form_names_every_column(tmp_path):
    mapping = _load(tmp_path, MAPPED).quality_gates.answers
    assert mapping == AnswersMapping(Relation("rag", "served"), id="answer_id", query="question",
                                     answer="response", created_at="served_at",
                                     sources="source_ids", kind="ids", dataset="prod")


def test_column_names_default_to_the_contract_and_the_schema_to_public(tmp_path):
    mapping = _load(tmp_path, "quality_gates: {answers: {relation: Served, "
                              "sources: {kind: json}}}\n").quality_gates.answers
    assert mapping == AnswersMapping(Relation("public", "served"), kind="json")
    assert (mapping.id, mapping.sources, mapping.dataset) == ("id", "sources", None)


def test_the_shipped_config_maps_the_demo_store_answers():
    settings = load_settings(REPO / "config.yaml", environ={})
    mapping = settings.quality_gates.answers
    assert (str(mapping), mapping.kind, mapping.dataset) == ("rag.answers", "ids", "scifact")
    assert settings.datasets["scifact"].live.corpus.relation == Relation("rag", "l2_insights")
    assert settings.quality_gates.answers_file is None
    assert settings.demo_rag_answers == REPO / "datasets" / "answers" / "sample_answers.jsonl"


@pytest.mark.parametrize(("section", "message"), [
    ("{answers_relation: answers, answers: {relation: rag.a, sources: {kind: json}}}",
     "'quality_gates.answers' and 'quality_gates.answers_relation' both name"),
    ("{answers: {relation: rag.a, sources: {kind: json}}, answers_file: a.jsonl}",
     "'quality_gates.answers_file' imports into the harness's own answers table"),
    ("{answers: {sources: {kind: json}}}", "'quality_gates.answers.relation' must be"),
    ("{answers: {relation: 'a.b.c', sources: {kind: json}}}", "'quality_gates.answers.relation'"),
    ("{answers: {relation: rag.a}}", "'quality_gates.answers.sources' must be a mapping"),
    ("{answers: {relation: rag.a, sources: {kind: list}}}",
     "'quality_gates.answers.sources.kind' must be ids"),
    ("{answers: {relation: rag.a, sources: {kind: ids}}}",
     "'quality_gates.answers.dataset' must name the dataset"),
    ("{answers: {relation: rag.a, sources: {kind: json}, dataset: prod}}",
     "'quality_gates.answers.dataset' is only read with sources.kind ids"),
    ("{answers: {relation: rag.a, sources: {kind: ids, colum: x}, dataset: p}}",
     "'quality_gates.answers.sources.colum'"),
    ("{answers: {relation: rag.a, query: 'a b', sources: {kind: json}}}",
     "'quality_gates.answers.query' must be a column name"),
    ("{answers: {relation: rag.a, sources: {kind: json}, when: t}}",
     "'quality_gates.answers.when'"),
    ("{answers: [rag.a]}", "'quality_gates.answers' must be a mapping"),
])
def test_each_bad_mapping_is_one_sentence_naming_the_key(tmp_path, section, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        _load(tmp_path, f"quality_gates: {section}\n")
    assert "\n" not in str(err.value)
