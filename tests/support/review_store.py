"""The review queue's small dataset on the real store, and its score and CSV helpers.

Loaded as a plugin by the root conftest: the ``dataset`` fixture (overridden by the test
files that define their own) ingests eight queries, each with one document relevant for the
human and one not. Judge scores are written straight into ground_truth with SQL, as the
judge layer would (``set_scores``).
"""

from __future__ import annotations

import csv
import uuid
from pathlib import Path

import pytest

from beir_factory import write_beir
from eval_harness.agreement.review_file import CSV_COLUMNS
from eval_harness.settings import AgreementSettings

N_QUERIES = 8
DOCS = {f"d{i}": f"Document {i} on topic {i % 4}" for i in range(1, 2 * N_QUERIES + 1)}
QUERIES = {f"q{k}": f"question {k} | about topic {k % 4}" for k in range(1, N_QUERIES + 1)}
QUERIES["q3"] = "+3 question | about topic 3"  # a spreadsheet would run it as a formula
# Query k: d(2k-1) is relevant for the human; d(2k) is not.
QRELS = [(f"q{k}", f"d{2 * k - 1}", 1) for k in range(1, N_QUERIES + 1)]
# Agreement statistics with few bootstrap resamples: fast, and enough for these datasets.
FAST_AGREEMENT = AgreementSettings(bootstrap_resamples=300)


@pytest.fixture
def dataset(db, tmp_path):
    from eval_harness.datasets.ingest import ingest_beir

    name = f"agr{uuid.uuid4().hex[:8]}"
    folder = write_beir(tmp_path / "data", DOCS, QUERIES, QRELS)
    ingest_beir(db, folder, name=name)
    return {"name": name, "folder": folder}


def write_agreement_config(path: Path, dataset) -> None:
    """A config.yaml for the review dataset (kappa floor 0.70, 300 resamples, a Dagster home
    beside it): the project the asset and the CLI tests run (tests/support/projects.py)."""
    path.write_text(f"""
default_dataset: {dataset['name']}
datasets:
  {dataset['name']}:
    path: data
agreement:
  kappa_floor: 0.70
  bootstrap_resamples: 300
dagster:
  home: dagster-home
""")


def set_scores(db, dataset: str, scores: dict[str, list[tuple[str, float | None, float | None]]],
               models=("judge-a", "judge-b")) -> None:
    """Write judged_docs and both judges' aligned scores for some queries, as the judges do."""
    with db.transaction():
        ids = dict(db.execute("SELECT external_id, id FROM l2_insights WHERE dataset = %s",
                              (dataset,)).fetchall())
        for query, rows in scores.items():
            db.execute("""UPDATE ground_truth SET judged_docs = %s, judge1_score = %s,
                              judge2_score = %s, judge1_model = %s, judge2_model = %s
                          WHERE dataset = %s AND external_id = %s""",
                       ([ids[d] for d, _, _ in rows], [s1 for _, s1, _ in rows],
                        [s2 for _, _, s2 in rows], *models, dataset, query))


def agreeing_scores() -> dict:
    """Every query: the human-relevant doc scored high by both judges, the other low."""
    return {f"q{k}": [(f"d{2 * k - 1}", 0.9, 0.8), (f"d{2 * k}", 0.1, 0.2)]
            for k in range(1, N_QUERIES + 1)}


def disagreeing_scores() -> dict:
    """Judge 2 flips the label of the relevant doc on half the queries (far apart)."""
    scores = agreeing_scores()
    for k in range(1, N_QUERIES + 1, 2):
        scores[f"q{k}"][0] = (f"d{2 * k - 1}", 0.9, 0.1)
    return scores


def review_rows(db, dataset: str) -> list[tuple]:
    return db.execute("""
        SELECT r.* FROM judge_review r JOIN ground_truth g ON g.id = r.ground_truth_id
        WHERE g.dataset = %s ORDER BY r.ground_truth_id, r.doc_id""", (dataset,)).fetchall()


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def write_csv(path: Path, rows: list[dict[str, str]], header=CSV_COLUMNS) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(header), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path
