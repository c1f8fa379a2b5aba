"""PostgreSQL's ``ts_rank(tsvector, tsquery, 1)`` for the search's OR query, computed from
the keyword index (:mod:`eval_harness.datasets.keyword_index`) to the float4 value the server
returns, ties included (issue #25).

What the server computes (src/backend/utils/adt/tsrank.c, ``calc_rank_or`` and
``calc_rank``; the same in PostgreSQL 14 to 18) for a document ``t`` and a query of ``n``
distinct lexemes, every position of ``t`` having weight D (``to_tsvector`` gives no other),
``w = 0.1f``:

* the query's lexemes are sorted (byte order, as ``tsCompareString``) and de-duplicated;
* for each lexeme present in ``t`` with ``p`` positions, in that order (float32 ``res``):
  ``resj = sum_{j=1..p} w / j^2`` accumulated in float32, one rounding per step;
  ``inner = (w + resj) - w / 1`` in float32;
  ``res = (float) ((double) res + (double) inner / 1.64493406685)``;
* ``res = res / (float) n`` in float32;
* normalisation 1: ``res = (float) ((double) res / (log(length + 1) / log(2.0)))`` with
  ``length`` the number of positions of ``t``; that double is computed by the server itself
  when the index is built (``keyword_documents.norm``), so no libm of ours takes part.

Every rounding step above is reproduced with numpy float32 / float64 operations, which are
IEEE operations like the server's (x86-64 and aarch64 evaluate float in float). The
ranking is ts_rank descending, ties by document id ascending, as the search's ``ORDER BY``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eval_harness.datasets.keyword_index import IndexedDocuments

WEIGHT_D = np.float32(0.1)        # default_weights[0]: positions of weight D
PI_SQUARED_OVER_6 = 1.64493406685  # tsrank.c's divisor, a double literal
MAX_POSITIONS = 256               # MAXNUMPOS: a tsvector keeps at most 256 positions a lexeme


def _lexeme_terms() -> np.ndarray:
    """``(double) inner(p) / 1.64493406685`` for p = 0 .. 256 positions (index p)."""
    terms = np.zeros(MAX_POSITIONS + 1, dtype=np.float64)
    resj = np.float32(0.0)
    for j in range(MAX_POSITIONS):
        resj = np.float32(resj + np.float32(WEIGHT_D / np.float32((j + 1) * (j + 1))))
        inner = np.float32(np.float32(WEIGHT_D + resj) - WEIGHT_D)
        terms[j + 1] = np.float64(inner) / PI_SQUARED_OVER_6
    return terms


LEXEME_TERMS = _lexeme_terms()


def query_items(lexemes: list[str]) -> list[str]:
    """The query's operands as ``calc_rank_or`` walks them: distinct, in byte order."""
    return sorted(set(lexemes), key=lambda lexeme: lexeme.encode("utf-8"))


@dataclass(frozen=True)
class KeywordScores:
    """ts_rank of every document the query matches (ids ascending) as float32."""

    ids: np.ndarray     # int64, ascending
    scores: np.ndarray  # float32

    def top(self, depth: int) -> np.ndarray:
        """The ``depth`` best ids: rank descending, ties by id ascending."""
        order = np.lexsort((self.ids, -self.scores))[:depth]
        return self.ids[order]

    def score_of(self, doc_ids: np.ndarray) -> np.ndarray:
        """ts_rank of ``doc_ids`` as float64 (0 for a document the query does not match)."""
        doc_ids = np.asarray(doc_ids, dtype=np.int64)
        out = np.zeros(doc_ids.size, dtype=np.float64)
        if self.ids.size:
            pos = np.minimum(np.searchsorted(self.ids, doc_ids), self.ids.size - 1)
            found = self.ids[pos] == doc_ids
            out[found] = self.scores[pos[found]].astype(np.float64)
        return out


def rank_query(documents: IndexedDocuments, items: list[str],
               postings: dict[str, list[tuple[int, np.ndarray, np.ndarray]]]) -> KeywordScores:
    """ts_rank(…, 1) of every document matching the OR of ``items`` (:func:`query_items`)
    from their ``postings`` (per lexeme: segment, doc ids, position counts), counting a
    posting only when it is in its document's current segment."""
    acc = np.zeros(documents.ids.size, dtype=np.float32)
    matched = np.zeros(documents.ids.size, dtype=bool)
    for lexeme in items:
        for segment, doc_ids, counts in postings.get(lexeme, ()):
            if not documents.ids.size or not doc_ids.size:
                continue
            pos = np.minimum(np.searchsorted(documents.ids, doc_ids), documents.ids.size - 1)
            live = (documents.ids[pos] == doc_ids) & (documents.segments[pos] == segment)
            pos, counts = pos[live], counts[live]
            acc[pos] = (acc[pos].astype(np.float64) + LEXEME_TERMS[counts]).astype(np.float32)
            matched[pos] = True
    where = np.flatnonzero(matched)
    if not items or not where.size:
        return KeywordScores(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
    res = acc[where] / np.float32(len(items))
    res = (res.astype(np.float64) / documents.norms[where]).astype(np.float32)
    return KeywordScores(documents.ids[where], res)
