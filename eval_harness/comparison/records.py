"""Recording a result set: ``report --record NAME`` and ``gate --record NAME``.

A retrieval record holds every ground-truth query's P@5, Recall@5, nDCG@10 and MRR@10 at the
configuration in force (keyed by the query's own id), with the weights and depth it was measured
at, the code version, and two fingerprints that say whether another record measured the same
thing: the **corpus version** (the documents' own ids and texts,
:func:`eval_harness.datasets.corpus.content_version`) and the **ground-truth version** (the
qrels in the dataset's own ids). A gate record holds each gate's score per answer of the window
gated, keyed by the answer's query normalised (case, spacing), so the answers a candidate
served to the same questions are paired with main's; several answers to one query in a window
count as their mean.

Recording a name again adds a record; the newest is the one compared, the earlier ones stay as
its history.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from eval_harness.comparison import sql
from eval_harness.datasets import ground_truth
from eval_harness.datasets.corpus import content_version
from eval_harness.errors import InvalidInput
from eval_harness.gates import sql as gates_sql
from eval_harness.retrieval.hybrid import dataset_info

if TYPE_CHECKING:
    from eval_harness.gates.gate import Gate
    from eval_harness.gates.window import TimeWindow
    from eval_harness.retrieval.report import RetrievalReport

RETRIEVAL, GATES = "retrieval", "gates"
# The retrieval report's metric keys -> the names a record (and compare's JSON) gives them.
METRIC_ROWS = {"p_at_5": "precision_at_5", "recall_at_5": "recall_at_5",
               "ndcg_at_10": "ndcg_at_10", "mrr_at_10": "mrr_at_10"}
MAX_NAME = 100


@dataclass(frozen=True)
class Stored:
    """What recording wrote: the record's id, name, kind, dataset and how many units."""

    record_id: int
    name: str
    kind: str
    dataset: str
    units: int
    rows: int

    def describe(self) -> str:
        what = (f"dataset '{self.dataset}', {self.units} queries" if self.kind == RETRIEVAL
                else f"{self.units} answered queries")
        return f"recorded '{self.name}' ({self.kind}: {what}, {self.rows} values)"


def checked_name(name: str) -> str:
    """A record name: 1-100 visible characters without spaces at its ends."""
    if not name or name != name.strip() or len(name) > MAX_NAME or not name.isprintable():
        raise InvalidInput(f"--record {name!r}: a record name is 1-{MAX_NAME} printable "
                           "characters without spaces at its ends (e.g. main, pr-123).")
    return name


def code_version(root: Path) -> str:
    """What measured a record: ``EVAL_HARNESS_CODE_VERSION``, else ``GITHUB_SHA`` (a GitHub
    Actions run), else the commit checked out in ``root`` (the config file's folder), else the
    installed eval-harness's version."""
    for variable in ("EVAL_HARNESS_CODE_VERSION", "GITHUB_SHA"):
        if os.environ.get(variable):
            return os.environ[variable]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                                text=True, timeout=5, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    if commit:
        return commit
    try:
        return f"eval-harness {version('eval-harness')}"
    except PackageNotFoundError:
        return "unknown"


def ground_truth_version(rows: list[tuple[str, str, int]]) -> str:
    """The qrels ``(query own id, document own id, grade)`` as one hash, in any order."""
    digest = hashlib.sha256()
    for query, document, grade in sorted(rows):
        digest.update(f"{query}\t{document}\t{grade}\n".encode())
    return f"{len(rows)}:{digest.hexdigest()[:32]}"


def normalised_query(text: str) -> str:
    """The key answers are paired by: the query in NFKC, case-folded, spacing collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def record_retrieval(conn: psycopg.Connection, name: str, report: RetrievalReport, *,
                     root: Path) -> Stored:
    """Store ``report`` (the retrieval report at the configuration in force) as record
    ``name`` of its dataset, in the caller's transaction."""
    name = checked_name(name)
    corpus = dataset_info(conn, report.dataset, with_counts=False).corpus
    values = [(METRIC_ROWS[metric], query, value) for query, metrics in report.per_query.items()
              for metric, value in metrics.items()]
    configuration = {"semantic_weight": report.semantic_weight,
                     "keyword_weight": report.keyword_weight,
                     "candidate_depth": report.candidate_depth}
    record_id = sql.insert_record(
        conn, name=name, kind=RETRIEVAL, dataset=report.dataset,
        code_version=code_version(root), configuration=configuration,
        corpus_version=content_version(conn, corpus),
        ground_truth_version=ground_truth_version(ground_truth.external_qrels(conn, corpus)),
        values=values)
    return Stored(record_id, name, RETRIEVAL, report.dataset, len(report.per_query), len(values))


def record_gates(conn: psycopg.Connection, name: str, *, relation: Any, window: TimeWindow,
                 gates: list[Gate], root: Path) -> Stored:
    """Store every gate's current score on the answers of ``window`` as record ``name``
    (the mean per normalised query), in the caller's transaction."""
    name = checked_name(name)
    values = []
    queries: set[str] = set()
    for gate in gates:
        scores: dict[str, list[float]] = defaultdict(list)
        for query, score in gates_sql.window_query_scores(conn, relation, window, gate.name,
                                                          gate.version):
            if score is not None:
                scores[normalised_query(query)].append(float(score))
        values += [(gate.name, query, sum(found) / len(found)) for query, found in scores.items()]
        queries |= scores.keys()
    configuration = {"window": window.describe(),
                     "gates": {gate.name: {"threshold": gate.threshold, "version": gate.version,
                                           "blocking": gate.blocking} for gate in gates}}
    record_id = sql.insert_record(conn, name=name, kind=GATES, dataset="",
                                  code_version=code_version(root), configuration=configuration,
                                  corpus_version=None, ground_truth_version=None, values=values)
    return Stored(record_id, name, GATES, "", len(queries), len(values))
