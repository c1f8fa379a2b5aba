"""Query shards (``judges.shards``; ``judge --shard i/n``): a dataset's queries split across
processes.

Query ``q`` belongs to shard ``sha256(external_id) mod n`` (:func:`shard_of`), which does not
depend on the process, the Python hash seed, the query's row id or the other queries, so
every process agrees and every query is in exactly one shard. A real run
(:mod:`eval_harness.judges.dual.run`) and its dry run (:mod:`eval_harness.judges.dual.dry_run`) keep
the same queries (:func:`queries_of_shard`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from eval_harness.judges.dual.plan import PlannedQuery


def shard_of(external_id: str, shards: int) -> int:
    """The shard (0 .. shards-1) of the query with this external id: the first 8 bytes of
    its SHA-256 as an unsigned integer, mod ``shards``."""
    digest = hashlib.sha256(str(external_id).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shards


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/n"`` as ``(i, n)`` with ``0 <= i < n``; ValueError in one sentence otherwise."""
    index, _, count = str(text).partition("/")
    try:
        shard, shards = int(index), int(count)
    except ValueError:
        shard, shards = -1, 0
    if shards < 1 or not 0 <= shard < shards:
        raise ValueError(f"a shard is i/n with 0 <= i < n (e.g. 0/4), got {text!r}")
    return shard, shards


def queries_of_shard(planned: Sequence[PlannedQuery],
                     shard: tuple[int, int] | None) -> list[PlannedQuery]:
    """The planned queries that belong to ``shard`` (``(i, n)``; None: all of them)."""
    if shard is None:
        return list(planned)
    index, count = shard
    return [p for p in planned if shard_of(p.external_id, count) == index]
