"""Ground truth the judges make: queries without labels, the grid pool, the
labels' rules, and ``calibrate --labels``. Local judges, no API key, a real store."""

from __future__ import annotations

import csv
import json
import uuid
from dataclasses import replace

import numpy as np
import pytest

from beir_factory import write_beir
from eval_harness.agreement.labels import derive_labels, load_judge_labels, pair_label
from eval_harness.agreement.review import import_review_csv, refresh_and_export
from eval_harness.datasets.beir import DatasetError, read_beir
from eval_harness.datasets.ground_truth import graded_expected_docs
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.judges.dual.run import judge_dataset
from eval_harness.retrieval.hybrid import hybrid_search
from eval_harness.retrieval.weights import configured_grid, keyword_weight_for
from eval_harness.settings import ConfigError
from eval_harness.settings.datasets import parse_datasets
from eval_harness_pipelines import cli

WORDS = ("aspirin heart attack dose risk blood pressure stroke vitamin diet sleep exercise "
         "insulin glucose liver kidney fever vaccine virus cell gene protein cancer").split()


def unlabelled_folder(folder, tag: str):
    """A BEIR folder whose qrels file is deleted: queries.jsonl and no labels."""
    rng = np.random.default_rng(11)
    docs = {f"d{i}": " ".join(rng.choice(WORDS, size=10)) + f" {tag}" for i in range(40)}
    queries = {f"q{i}": " ".join(rng.choice(WORDS, size=3)) for i in range(8)}
    write_beir(folder, docs, queries, [("q0", "d0", 1)], dim=8, seed=5)
    (folder / "qrels" / "test.tsv").unlink()
    (folder / "qrels").rmdir()
    return folder


@pytest.fixture
def unlabelled(tmp_path, conn):
    tag = uuid.uuid4().hex[:8]
    folder = unlabelled_folder(tmp_path / "beir", tag)
    name = f"nolabels_{tag}"
    ingest_beir(conn, folder, name=name)
    return {"name": name, "folder": folder}


def local(settings):
    return replace(settings, openai_api_key=None, anthropic_api_key=None)


def judged_docs(conn, name) -> dict[int, list[int]]:
    return dict(conn.execute("SELECT id, judged_docs FROM ground_truth WHERE dataset = %s",
                             (name,)).fetchall())


# ------------------------------------------------------------------ queries without labels

def test_beir_folder_without_qrels_keeps_every_query_unlabelled(conn, unlabelled):
    data = read_beir(unlabelled["folder"])
    assert not data.labelled and len(data.queries) == 8
    assert "no qrels file" in data.notices[0]
    rows = graded_expected_docs(conn, unlabelled["name"])
    assert len(rows) == 8 and all(docs == [] and grades == [] for _, docs, grades in rows)


@pytest.mark.unit
def test_missing_split_beside_other_splits_is_refused(tmp_path):
    folder = write_beir(tmp_path / "b", {"d1": "a b"}, {"q1": "a"}, [("q1", "d1", 1)],
                        split="dev")
    with pytest.raises(DatasetError, match=r"test\.tsv: file not found .*splits dev"):
        read_beir(folder, split="test")


@pytest.mark.unit
def test_live_queries_mapping_parses_and_exactly_one_source_is_required(tmp_path):
    corpus = {"relation": "rag.l2_insights", "id": "id", "content": "content",
              "embedding": "embedding"}
    live = {"corpus": corpus, "ground_truth": None,
            "queries": {"relation": "rag.questions", "id": "id", "query": "text"}}
    parsed = parse_datasets({"prod": {"embedder": "local:m", "live": live}}, tmp_path)
    gt = parsed["prod"].live.ground_truth
    assert (str(gt.relation), gt.query, gt.expected_docs, gt.labelled) == \
        ("rag.questions", "text", None, False)
    both = dict(live, ground_truth={"relation": "rag.gt", "id": "id", "query": "q",
                                    "expected_docs": "e"})
    with pytest.raises(ConfigError, match="at most one of 'ground_truth'"):
        parse_datasets({"prod": {"embedder": "local:m", "live": both}}, tmp_path)
    corpus_only = parse_datasets({"prod": {"embedder": "local:m",
                                           "live": dict(live, queries=None)}}, tmp_path)
    assert corpus_only["prod"].live.ground_truth is None  # queries come from ground-truth


def test_live_dataset_mapped_by_queries_mirrors_every_query_without_labels(fresh, tmp_path):
    from eval_harness.datasets.demo_store import build_rag_store
    from eval_harness.datasets.live import attach_live_dataset
    from eval_harness.settings.datasets import (
        CorpusMapping,
        DatasetConfig,
        GroundTruthMapping,
        LiveMapping,
        Relation,
    )

    folder = write_beir(tmp_path / "l", {f"d{i}": f"aspirin {i}" for i in range(6)},
                        {"q1": "aspirin", "q2": "heart"}, [("q1", "d1", 1)], seed=2)
    with fresh.connection() as conn:
        build_rag_store(conn, folder, schema="rag")
        conn.execute("UPDATE rag.ground_truth SET expected_docs = '{}'")  # no labels at all
        cfg = DatasetConfig(name="unl", language="english", embedder="local:test-random",
                            live=LiveMapping(
                                CorpusMapping(Relation("rag", "l2_insights"), "id", "content",
                                              "embedding", None),
                                GroundTruthMapping(Relation("rag", "ground_truth"), "id",
                                                   "query", None)))

        def no_embedder():
            raise AssertionError("query vectors are cached")

        report = attach_live_dataset(conn, cfg, embedder_factory=no_embedder)
        assert report.queries == report.inserted == 1 and report.without_expected == 0
        rows = conn.execute("SELECT expected_docs, relevance_grades, query_embedding IS NULL "
                            "FROM ground_truth WHERE dataset = 'unl'").fetchall()
        assert rows == [([], [], False)]


# ---------------------------------------------------------------------------- the grid pool

def test_pool_holds_every_grid_weights_top_5(conn, settings, unlabelled):
    name = unlabelled["name"]
    summary = judge_dataset(conn, local(settings), name)
    assert summary.complete and summary.queries == 8
    judged = judged_docs(conn, name)
    depth = settings.weights_for(name).candidate_depth
    tops = {}
    for weight in configured_grid(settings):
        for query_id, _ in judged.items():
            embedding, text = conn.execute(
                "SELECT query_embedding, query FROM ground_truth WHERE id = %s",
                (query_id,)).fetchone()
            # hybrid search in SQL: not the numpy sweep that planned the pool
            hits = hybrid_search(conn, name, query_text=text,
                                 query_embedding=np.asarray(embedding, dtype=np.float32), k=5,
                                 semantic_weight=float(weight),
                                 keyword_weight=keyword_weight_for(weight),
                                 candidate_depth=depth)
            tops.setdefault(query_id, set()).update(h.id for h in hits)
            assert {h.id for h in hits} <= set(judged[query_id]), (weight, query_id)
    sizes = sorted(len(v) for v in judged.values())
    assert [len(tops[q]) for q in sorted(tops)] == [len(judged[q]) for q in sorted(tops)]
    assert summary.pool_sizes == {"min": sizes[0], "median": float(np.median(sizes)),
                                  "max": sizes[-1]}
    assert sizes[-1] > 5  # the grid's weights disagree somewhere: more than one top 5
    assert f"pool per query: min {sizes[0]}" in summary.format()


# -------------------------------------------------------------------------------- labels

@pytest.mark.unit
@pytest.mark.parametrize("rule, expected", [
    # judge 1 says 0.9 (relevant), judge 2 says 0.3 (not): mean 0.6 > 0.5
    ("exclude", (None, "excluded")), ("judge1", (1, "rule")), ("mean", (1, "rule"))])
def test_disagreement_follows_the_rule(rule, expected):
    assert pair_label(0.9, 0.3, threshold=0.5, rule=rule) == expected
    # judge 1 not relevant (0.2), judge 2 relevant (0.7): mean 0.45, not relevant
    flipped = pair_label(0.2, 0.7, threshold=0.5, rule=rule)
    assert flipped == {"exclude": (None, "excluded"), "judge1": (0, "rule"),
                       "mean": (0, "rule")}[rule]


@pytest.mark.unit
def test_agreement_and_adjudication_and_unscored():
    assert pair_label(0.8, 0.6, threshold=0.5, rule="exclude") == (1, "judges")
    assert pair_label(0.1, 0.5, threshold=0.5, rule="judge1") == (0, "judges")  # 0.5 is not > 0.5
    assert pair_label(0.9, 0.3, threshold=0.5, rule="judge1", adjudicated=0) == (0, "adjudicated")
    assert pair_label(0.1, 0.2, threshold=0.5, rule="mean", adjudicated=1) == (1, "adjudicated")
    assert pair_label(None, 0.9, threshold=0.5, rule="mean") == (None, "unscored")
    labels = derive_labels("x", [(1, 10, 0.9, 0.3), (1, 11, 0.9, 0.8), (2, 10, None, 0.1)],
                           {}, threshold=0.5, rule="exclude")
    assert labels.qrels() == {1: {10: 0, 11: 1}, 2: {}}
    assert labels.judged(1) == {10, 11} and labels.judged(2) == set()
    assert labels.sources == {"excluded": 1, "judges": 1, "unscored": 1}


def test_stored_disagreement_by_rule_and_the_adjudicated_verdict_wins(conn, settings,
                                                                     unlabelled, tmp_path):
    name = unlabelled["name"]
    judge_dataset(conn, local(settings), name)
    query_id, docs = sorted(judged_docs(conn, name).items())[0]
    # hand-made disagreement on the first pair: judge 1 relevant, judge 2 not, mean 0.55
    conn.execute("UPDATE ground_truth SET judge1_score[1] = 0.9, judge2_score[1] = 0.2 "
                 "WHERE id = %s", (query_id,))
    conn.commit()
    pair = (query_id, docs[0])

    def label(rule):
        found = load_judge_labels(conn, name, replace(settings.agreement,
                                                      disagreement_rule=rule))
        return found.labels[query_id][docs[0]], found

    assert label("exclude")[0] is None and pair in label("exclude")[1].excluded_pairs
    assert label("judge1")[0] == 1 and label("mean")[0] == 1
    path = tmp_path / "queue.csv"
    refresh_and_export(conn, name, path, threshold=settings.agreement.disagreement_threshold)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    keys = [(int(r["query_id"]), int(r["doc_id"])) for r in rows]
    assert pair in keys  # the disagreement waits in the review queue
    rows[keys.index(pair)]["verdict"] = "not relevant"
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    import_review_csv(conn, name, path)
    for rule in ("exclude", "judge1", "mean"):
        value, found = label(rule)
        assert value == 0 and found.sources.get("adjudicated") == 1


# -------------------------------------------------------------------------- calibrate --labels

CONFIG = """\
default_dataset: {name}
datasets:
  {name}:
    path: {folder}
history:
  duckdb_path: state/history.duckdb
"""


def write_unlabelled(path, unlabelled):
    path.write_text(CONFIG.format(**unlabelled))


pytestmark = pytest.mark.project(config=write_unlabelled)  # the project of the tests below


def run(capsys, config, *args):
    code = cli.main(["--config", str(config), "calibrate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_calibrate_on_judge_labels_end_to_end_names_the_source(project, conn, settings,
                                                              unlabelled, capsys):
    name = unlabelled["name"]
    code, out, err = run(capsys, project, "--labels", "judges", "--no-write")
    assert code == 2 and "run `eval-harness judge --dataset" in err
    assert len(err.strip().splitlines()) == 1 and "have no judge label" in err
    judge_dataset(conn, local(settings), name)
    code, out, err = run(capsys, project, "--json")  # default: judges (no expected_docs)
    assert code in (0, 1), err
    result = json.loads(out)
    assert result["label_source"] == "judges" and result["queries"] == 8
    assert result["judge_labels"]["disagreement_rule"] == "exclude"
    assert sum(result["judge_labels"]["pairs"].values()) == sum(
        len(d) for d in judged_docs(conn, name).values())
    assert result["written"]["weights"]["label_source"] == "judges"
    row = conn.execute("SELECT label_source FROM calibrated_weights WHERE dataset = %s "
                       "ORDER BY id DESC LIMIT 1", (name,)).fetchone()
    assert row == ("judges",)
    with open(result["written"]["report"], encoding="utf-8") as written:
        report = written.read()
    assert "Labels: judges (disagreement rule exclude" in report
    code, out, err = run(capsys, project, "--labels", "judges", "--no-write")
    assert "Labels: judges (disagreement rule exclude" in out


def test_human_labels_on_a_dataset_without_expected_docs_is_one_sentence(project, capsys,
                                                                        unlabelled):
    code, out, err = run(capsys, project, "--labels", "human", "--no-write")
    assert code == 2 and out == ""
    assert f"Dataset '{unlabelled['name']}' has no human labels" in err
    assert "--labels judges" in err and len(err.strip().splitlines()) == 1
