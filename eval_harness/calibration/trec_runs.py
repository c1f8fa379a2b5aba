"""TREC run files of a calibration, one per weight, so trec_eval or ranx can check us.

Each line is ``qid Q0 docid rank score tag`` with the dataset's own (external) query and
document ids; every candidate of every ground-truth query is listed, best first.
``qrels.<dataset>.trec`` (``qid 0 docid grade``) is written beside the runs
``run.<dataset>.semantic-<weight>.trec``: every file and run tag names its dataset, so the
runs of several datasets can share a folder.

trec_eval and ranx rank a run by its score column and break ties their own way, not by our
document-id rule, and trec_eval holds scores as 32-bit floats. So the score is the fused
hybrid score rounded to single precision, and within a tie each following document is
lowered by one single-precision step (~6e-8 near 1): the file then has strictly decreasing
scores, in single as in double precision, in exactly our order, and trec_eval and ranx
reproduce our metrics. Scores are printed in the shortest form that reads back exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psycopg

from eval_harness.calibration.grid import weight_label
from eval_harness.calibration.report import dataset_file_stem
from eval_harness.calibration.result import CalibrationResult
from eval_harness.files import write_file_atomically
from eval_harness.retrieval.fusion import fuse_normalised
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness.retrieval.sweep import normalised_scores
from eval_harness.datasets import ground_truth
from eval_harness.datasets.corpus import Corpus, document_external_ids


def run_file_name(dataset: str, semantic_weight: float) -> str:
    return f"run.{dataset_file_stem(dataset)}.semantic-{weight_label(semantic_weight)}.trec"


def qrels_file_name(dataset: str) -> str:
    return f"qrels.{dataset_file_stem(dataset)}.trec"


def write_trec_runs(conn: psycopg.Connection, result: CalibrationResult,
                    folder: Path | str) -> list[Path]:
    """Write the dataset's qrels and one run file per grid weight into ``folder``; their
    paths, the qrels first."""
    folder = Path(folder)
    candidates = result.candidates
    query_names = ground_truth.query_external_ids(conn, candidates.query_ids)
    corpus = dataset_info(conn, result.dataset, with_counts=False).corpus
    doc_names = document_external_ids(conn, corpus,
                                      np.unique(candidates.doc_ids[candidates.mask]).tolist())
    qids = [query_names[q] for q in candidates.query_ids]
    paths = [_write_qrels(conn, corpus, folder / qrels_file_name(result.dataset))]
    sem_norm, kw_norm = normalised_scores(candidates)
    stem = dataset_file_stem(result.dataset)
    for point in result.grid:
        w_sem, w_kw = point.semantic_weight, point.keyword_weight
        fused = fuse_normalised(sem_norm, kw_norm, w_sem, w_kw)  # the one fusion rule
        fused[~candidates.mask] = -np.inf
        order = np.lexsort((candidates.doc_ids, -fused), axis=1)
        ranked_ids = np.take_along_axis(candidates.doc_ids, order, axis=1)
        scores = _strictly_decreasing(np.take_along_axis(fused, order, axis=1))
        tag = f"eval-harness-{stem}-semantic-{weight_label(w_sem)}"
        lines = []
        for row, qid in enumerate(qids):
            for rank in range(int(candidates.mask[row].sum())):
                lines.append(f"{qid} Q0 {doc_names[int(ranked_ids[row, rank])]} {rank + 1} "
                             f"{scores[row, rank]} {tag}\n")
        run_file = folder / run_file_name(result.dataset, w_sem)
        paths.append(write_file_atomically(run_file, "".join(lines).encode("utf-8")))
    return paths


def _strictly_decreasing(scores: np.ndarray) -> np.ndarray:
    """Per row (sorted descending), the scores as float32, each lowered just enough to lie
    below its predecessor; only ties (also ties created by the rounding) move."""
    out = scores.astype(np.float32)
    low = np.float32(-np.inf)
    for col in range(1, out.shape[1]):
        out[:, col] = np.minimum(out[:, col], np.nextafter(out[:, col - 1], low))
    return out


def _write_qrels(conn: psycopg.Connection, corpus: Corpus, path: Path) -> Path:
    rows = ground_truth.external_qrels(conn, corpus)
    text = "".join(f"{qid} 0 {docid} {grade}\n" for qid, docid, grade in rows)
    return write_file_atomically(path, text.encode("utf-8"))
