"""Answers in place citing the own ids of a store LangChain made (the real library,
tests/support/rag_library_stores.py), its corpus mapped by the one-line preset: the mapping
is checked like attach checks the preset, and each cited id reads its document's text."""

from __future__ import annotations

from eval_harness.datasets.live import attach_live_dataset
from eval_harness.gates.answers import TimeWindow, stream_answers
from eval_harness.gates.answers_mapping import check_answers_mapping
from eval_harness.settings import QualityGateSettings, Settings, load_settings
from eval_harness.settings.datasets import Relation
from eval_harness.settings.gates_answers import AnswersMapping
from live_store import no_embedder
from rag_library_stores import GROUND_TRUTH

DAY = "2025-05-01"
CONFIG = """\
datasets:
  prod:
    embedder: local:all-MiniLM-L6-v2
    live:
      corpus: {corpus}
      ground_truth: {{relation: public.{gt}, id: id, query: query, expected_docs: expected_docs}}
"""
MAPPING = AnswersMapping(Relation("public", "served_answers"), id="answer_id",
                         query="question", answer="response", created_at="served_at",
                         sources="source_ids", kind="ids", dataset="prod")


def test_answers_citing_a_preset_stores_own_ids_read_their_texts(langchain_store, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(corpus=langchain_store.corpus_line, gt=GROUND_TRUTH),
                      encoding="utf-8")
    cfg = load_settings(str(config), environ={}).datasets["prod"]
    settings = Settings(config_path=None, root=tmp_path, datasets={"prod": cfg},
                        quality_gates=QualityGateSettings(answers=MAPPING))
    data = langchain_store.data
    cited = data.doc_ids[:2]
    text = dict(zip(data.doc_ids, data.texts))
    with langchain_store.connection() as conn:
        attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        conn.execute("CREATE TABLE public.served_answers (answer_id text PRIMARY KEY, "
                     "question text, response text, source_ids varchar[], served_at timestamptz)")
        conn.execute("INSERT INTO public.served_answers VALUES ('a1', 'q', 'Both say so [1] [2].', "
                     "%s, %s)", ([langchain_store.own_id[d] for d in cited], f"{DAY}T12:00:00Z"))
        mapped = check_answers_mapping(conn, settings)
        (answer,) = stream_answers(conn, TimeWindow.day(DAY), relation=mapped)
        conn.rollback()
    assert answer.sources == [{"id": langchain_store.own_id[d], "text": text[d]} for d in cited]
