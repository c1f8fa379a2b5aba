"""``eval-harness ground-truth from-answers``: ground truth from the queries a RAG system's
users actually asked, read from the answers the harness reads (the answers table with its
imported traces, or the RAG system's own answers relation mapped in place).

1. **Personal data out**: a query that looks like personal data by the rules of
   :mod:`.personal_data` (e-mail addresses, phone numbers, long digit runs) is skipped and
   counted, never stored.
2. **Distinct queries**: queries are normalised (Unicode NFKC, lower case, punctuation and
   extra spaces dropped); equal normalised texts are one query, and so are near-duplicates,
   whose word sets overlap at least ``ground_truth.near_duplicate_similarity`` (Jaccard).
   A merged query keeps every answer id it was asked in, and its most frequent wording
   (ties: the earliest).
3. **Stratified by day**: each query belongs to the UTC day it was first asked; the ``N``
   queries asked for are shared out over the days in proportion to their distinct queries
   (largest remainders), and drawn within a day in a seeded order, so the sample follows
   the traffic rather than its busiest day.
4. **Stored once**: each query's id is ``users-`` and a hash of its normalised text; a rerun
   inserts none of the queries already stored.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

import psycopg

from eval_harness.datasets import ground_truth
from eval_harness.errors import InvalidInput
from eval_harness.gates.answers import stream_answers
from eval_harness.gates.answers_mapping import MappedAnswers, answers_relation
from eval_harness.gates.window import TimeWindow
from eval_harness.query_sources.embedding import embed_new_queries
from eval_harness.query_sources.personal_data import personal_data
from eval_harness.retrieval.hybrid import dataset_info
from eval_harness.settings import Settings

_PUNCTUATION = re.compile(r"[^\w\s'-]+|(?<!\w)['-]|['-](?!\w)")
ID_PREFIX = "users-"


def normalised(text: str) -> str:
    """``text`` as queries are compared: NFKC, lower case, no punctuation, single spaces.

    >>> normalised("  What IS   P@5?? ")
    'what is p 5'
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_PUNCTUATION.sub(" ", text).split())


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|a ∩ b| / |a ∪ b|; 1.0 for two empty sets.

    >>> jaccard(frozenset("abc"), frozenset("abd"))
    0.5
    """
    union = len(a | b)
    return len(a & b) / union if union else 1.0


@dataclass
class UsersQuery:
    """One distinct query: its wording, the answers it was asked in, the day first asked."""

    key: str                       # normalised text of its first wording
    words: frozenset[str]
    first_asked: datetime
    wordings: Counter = field(default_factory=Counter)
    first_seen: dict[str, datetime] = field(default_factory=dict)
    answer_ids: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The most frequent wording (ties: the earliest asked)."""
        return min(self.wordings, key=lambda w: (-self.wordings[w], self.first_seen[w], w))

    @property
    def day(self) -> date:
        return self.first_asked.astimezone(UTC).date()

    @property
    def external_id(self) -> str:
        return ID_PREFIX + hashlib.md5(self.key.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class DistinctQueries:
    queries: list[UsersQuery]
    answers: int            # answers read
    skipped_personal: int   # answers whose query looks like personal data
    skipped_reasons: dict[str, int]


def distinct_queries(answers: Iterable[tuple[str, str, datetime]], *,
                     similarity: float) -> DistinctQueries:
    """The distinct queries of ``answers`` ``(answer id, query, created_at)``, near-duplicates
    (word-set Jaccard >= ``similarity``) merged, personal data skipped (module docstring).
    Answers are taken in time order, so a query's first wording and day are its earliest.

    Near-duplicates are found with the prefix filter of all-pairs similarity search (Bayardo,
    Ma and Srikant, WWW 2007): with words ordered rarest first, two sets of Jaccard >= t
    share a word among the first ``|x| - ceil(t |x|) + 1`` of each, so a query is compared
    only with the queries indexed under those words, not with every query that says "what".
    """
    ordered = sorted(answers, key=lambda a: (a[2], a[0]))
    reasons: Counter = Counter()
    kept = []
    for answer_id, text, created_at in ordered:
        reason = personal_data(text)
        if reason is not None:
            reasons[reason] += 1
            continue
        key = normalised(text)
        if key:
            kept.append((answer_id, text, created_at, key))
    rarity = Counter(word for key in {k for *_, k in kept} for word in set(key.split()))
    found: list[UsersQuery] = []
    by_key: dict[str, UsersQuery] = {}
    by_word: dict[str, list[UsersQuery]] = {}
    for answer_id, text, created_at, key in kept:
        query = by_key.get(key)
        if query is None:
            words = frozenset(key.split())
            prefix = _prefix(words, rarity, similarity)
            query = _near_duplicate(words, prefix, by_word, similarity)
            if query is None:
                query = UsersQuery(key, words, created_at)
                found.append(query)
                for word in prefix:
                    by_word.setdefault(word, []).append(query)
            by_key[key] = query
        wording = " ".join(text.split())
        query.wordings[wording] += 1
        query.first_seen.setdefault(wording, created_at)
        query.answer_ids.append(answer_id)
    return DistinctQueries(found, len(ordered), sum(reasons.values()), dict(reasons))


def _prefix(words: frozenset[str], rarity: Counter, similarity: float) -> list[str]:
    """The rarest ``|x| - ceil(t |x|) + 1`` words of ``words`` (the prefix filter)."""
    length = len(words) - math.ceil(similarity * len(words) - 1e-9) + 1
    return sorted(words, key=lambda w: (rarity[w], w))[:max(1, length)]


def _near_duplicate(words: frozenset[str], prefix: Sequence[str],
                    by_word: dict[str, list[UsersQuery]],
                    similarity: float) -> UsersQuery | None:
    """The earliest asked query indexed under a word of ``prefix`` whose words overlap
    ``words`` at least ``similarity``; None when none does."""
    candidates = {id(q): q for word in prefix for q in by_word.get(word, ())}
    matches = [q for q in candidates.values() if jaccard(words, q.words) >= similarity]
    return min(matches, key=lambda q: (q.first_asked, q.key)) if matches else None


def day_shares(counts: dict[date, int], n: int) -> dict[date, int]:
    """``n`` shared out over the days in proportion to ``counts`` (largest remainders, ties
    by the earlier day), never more than a day has.

    >>> day_shares({date(2026, 1, 1): 30, date(2026, 1, 2): 10}, 4)
    {datetime.date(2026, 1, 1): 3, datetime.date(2026, 1, 2): 1}
    """
    total = sum(counts.values())
    n = min(n, total)
    if n <= 0:
        return {day: 0 for day in counts}
    exact = {day: n * c / total for day, c in counts.items()}
    shares = {day: int(e) for day, e in exact.items()}
    left = n - sum(shares.values())
    for day in sorted(counts, key=lambda d: (-(exact[d] - shares[d]), d)):
        if left == 0:
            break
        if shares[day] < counts[day]:
            shares[day] += 1
            left -= 1
    return shares


def seeded_rank(seed: int, key: str) -> str:
    return hashlib.md5(f"{seed}:{key}".encode()).hexdigest()


def stratified_sample(queries: Sequence[UsersQuery], n: int, *, seed: int) -> list[UsersQuery]:
    """``n`` of ``queries`` shared out over their days (:func:`day_shares`), each day's drawn
    in the seeded order; in day order, then that order."""
    by_day: dict[date, list[UsersQuery]] = {}
    for query in queries:
        by_day.setdefault(query.day, []).append(query)
    shares = day_shares({day: len(qs) for day, qs in by_day.items()}, n)
    chosen: list[UsersQuery] = []
    for day in sorted(by_day):
        ordered = sorted(by_day[day], key=lambda q: seeded_rank(seed, q.key))
        chosen.extend(ordered[:shares[day]])
    return chosen


# ------------------------------------------------------------------------------ the command

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class FromAnswersReport:
    dataset: str
    asked: int
    answers: int
    distinct: int
    skipped_personal: int
    skipped_reasons: dict[str, int]
    sampled: list[UsersQuery]
    new: int
    days: int
    relation: str
    notices: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"dataset": self.dataset, "answers": self.answers, "distinct": self.distinct,
                "skipped_personal_data": self.skipped_personal,
                "skipped_reasons": self.skipped_reasons, "days": self.days,
                "relation": self.relation, "new": self.new,
                "queries": [{"id": q.external_id, "text": q.text, "day": q.day.isoformat(),
                             "answer_ids": q.answer_ids} for q in self.sampled]}

    def line(self) -> str:
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(self.skipped_reasons.items()))
        skipped = (f"; {self.skipped_personal} answers skipped whose query looks like personal "
                   f"data ({reasons})" if self.skipped_personal else "")
        return (f"users' queries of '{self.dataset}': {self.answers} answers read from "
                f"{self.relation}, {self.distinct} distinct queries over {self.days} days"
                f"{skipped}; {len(self.sampled)} sampled (stratified by day), {self.new} new "
                f"stored as ground truth (origin: users' queries), "
                f"{len(self.sampled) - self.new} already stored")


def queries_from_answers(conn: psycopg.Connection, settings: Settings, dataset: str, *,
                         n: int, seed: int = 0) -> FromAnswersReport:
    """Sample ``n`` distinct users' queries from the answers the harness reads and store the
    new ones in ``dataset``'s ground truth (module docstring)."""
    if n < 1:
        raise InvalidInput(f"--queries must be a positive number, got {n}.")
    info = dataset_info(conn, dataset)
    relation = answers_relation(conn, settings)
    read = [(a.id, a.query, a.created_at)
            for a in stream_answers(conn, TimeWindow.since(EPOCH), relation=relation)]
    found = distinct_queries(read, similarity=settings.ground_truth.near_duplicate_similarity)
    if not found.queries:
        raise InvalidInput(
            f"No users' queries to sample for '{dataset}': {describe_relation(relation)} holds "
            f"{found.answers} answers" + (f", {found.skipped_personal} of them skipped as "
                                         "personal data" if found.skipped_personal else "")
            + "; import answers with `eval-harness answers import FILE` or `answers "
            "import-traces`, or map yours with quality_gates.answers.")
    sampled = stratified_sample(found.queries, n, seed=seed)
    new = ground_truth.insert_users_queries(conn, dataset, [
        (q.external_id, q.text, q.answer_ids) for q in sampled])
    conn.commit()
    report = FromAnswersReport(dataset, n, found.answers, len(found.queries),
                               found.skipped_personal, found.skipped_reasons, sampled, new,
                               len({q.day for q in found.queries}), describe_relation(relation))
    if len(sampled) < n:
        report.notices.append(f"only {len(sampled)} distinct queries exist, fewer than the "
                              f"{n} asked for: all of them were taken")
    notice = embed_new_queries(conn, settings, info)
    conn.commit()
    if notice:
        report.notices.append(notice)
    return report


def describe_relation(relation: str | MappedAnswers) -> str:
    """The answers relation as the user named it."""
    if isinstance(relation, MappedAnswers):
        return f"{relation} (quality_gates.answers)"
    return f"the answers relation '{relation}'"
