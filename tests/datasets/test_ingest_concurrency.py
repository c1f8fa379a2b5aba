"""Concurrent and killed ingests: one transaction per dataset, merged by external id.

Real OS processes against the real store; tests/support/colliding_processes.py says how two of them
are made to collide and why each test has a database of its own.
"""

from __future__ import annotations

import signal

from colliding_processes import (beir, child_env, finish, held, ingest, lock_step, lock_waiters,
                                 python, wait_until)
from scratch_databases import scratch_database
from eval_harness.store import migrate


def corpus_rows(location, dataset: str):
    with location.connection() as conn:
        docs = conn.execute("SELECT external_id, content, embedding::text FROM l2_insights "
                            "WHERE dataset = %s ORDER BY external_id", (dataset,)).fetchall()
        queries = conn.execute(
            "SELECT g.external_id, g.query, array(SELECT d.external_id FROM unnest("
            "g.expected_docs) e JOIN l2_insights d ON d.id = e ORDER BY 1) FROM ground_truth g "
            "WHERE g.dataset = %s ORDER BY g.external_id", (dataset,)).fetchall()
        datasets = conn.execute("SELECT count(*) FROM datasets WHERE name = %s",
                                (dataset,)).fetchone()[0]
    return docs, queries, datasets


def test_two_ingests_of_the_same_dataset_at_once_leave_one_copy(fresh, tmp_path):
    folder = beir(tmp_path / "data")
    env = child_env(fresh)
    runs = [ingest(folder, "same", env=env, cwd=tmp_path) for _ in range(2)]
    with lock_step(fresh, "l2_insights", runs):
        pass
    outcomes = [finish(run) for run in runs]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    reports = sorted(out.splitlines()[-1] for _, out, _ in outcomes)
    # one process loaded the folder, the other found every row already there
    assert "documents 0 new, 0 updated, 0 removed, 40 unchanged" in reports[0]
    assert "documents 40 new, 0 updated, 0 removed, 0 unchanged" in reports[1]
    docs, queries, datasets = corpus_rows(fresh, "same")
    assert (len(docs), len(queries), datasets) == (40, 8, 1)
    assert len({d[0] for d in docs}) == 40 and len({q[0] for q in queries}) == 8


def test_two_ingests_of_different_datasets_at_once_do_not_deadlock(fresh, tmp_path):
    """Both insert into l2_insights, then each builds its dataset's HNSW index, which needs a
    SHARE lock on the table the other one has uncommitted rows in: a deadlock, unless
    ingests take turns (they do, under one advisory lock)."""
    env = child_env(fresh)
    runs = [ingest(beir(tmp_path / name, tag=name, seed=i), name, env=env, cwd=tmp_path)
            for i, name in enumerate(("left", "right"))]
    with lock_step(fresh, "l2_insights", runs):
        pass
    outcomes = [finish(run) for run in runs]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    for name in ("left", "right"):
        docs, queries, datasets = corpus_rows(fresh, name)
        assert (len(docs), len(queries), datasets) == (40, 8, 1)


def test_an_ingest_killed_mid_transaction_leaves_nothing_and_the_rerun_loads_once(
        fresh, tmp_path, server_url):
    folder = beir(tmp_path / "data")
    env = child_env(fresh)
    # The documents are merged, the queries wait behind the lock: the process dies there.
    with held(fresh, "ground_truth"):
        victim = ingest(folder, "crash", env=env, cwd=tmp_path)
        wait_until(lambda: lock_waiters(fresh) >= 1, what="the ingest to reach ground_truth",
                   processes=[victim])
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
    rerun = finish(ingest(folder, "crash", env=env, cwd=tmp_path))
    assert rerun[0] == 0, rerun
    assert "documents 40 new" in rerun[1] and "queries 8 new" in rerun[1]
    # the same rows as one clean ingest into an untouched database
    with scratch_database(server_url, "eh_clean") as clean:
        with clean.connection() as conn:
            migrate(conn)
        assert finish(ingest(folder, "crash", env=child_env(clean), cwd=tmp_path))[0] == 0
        assert corpus_rows(fresh, "crash") == corpus_rows(clean, "crash")


EMBEDDING_INGEST = """
    import hashlib, os, sys
    import numpy as np
    from eval_harness.store import StoreLocation
    from eval_harness.datasets.ingest import ingest_beir

    class CountingEmbedder:  # stands in for a paid embedding API: logs every text it embeds
        model = "test-sha256-8"

        def embed(self, texts):
            with open(sys.argv[3], "a", encoding="utf-8") as log:
                log.writelines(" ".join(t.split()) + "\\n" for t in texts)
            return np.array([list(hashlib.sha256(t.encode()).digest()[:8]) for t in texts],
                            dtype=np.float32)

    with StoreLocation(os.environ["DATABASE_URL"]).connection() as conn:
        report = ingest_beir(conn, sys.argv[1], name=sys.argv[2],
                             embedder_factory=CountingEmbedder)
    print(report.embeddings)
"""


def test_computed_embeddings_are_paid_for_once_by_concurrent_and_repeated_ingests(
        fresh, tmp_path):
    folder = beir(tmp_path / "data")
    (folder / "embeddings.npz").unlink()  # the embedder has to compute every vector
    calls = tmp_path / "embedded.txt"
    env = child_env(fresh)
    runs = [python(EMBEDDING_INGEST, folder, "emb", calls, env=env, cwd=tmp_path)
            for _ in range(2)]
    with lock_step(fresh, "l2_insights", runs):
        pass
    outcomes = [finish(run) for run in runs]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    assert sorted(out.strip() for _, out, _ in outcomes) == [
        "computed by test-sha256-8 for 0 texts, 48 unchanged texts keep their stored vectors",
        "computed by test-sha256-8 for 48 texts"]
    embedded = calls.read_text(encoding="utf-8").splitlines()
    assert len(embedded) == len(set(embedded)) == 40 + 8  # every text once
    docs, queries, datasets = corpus_rows(fresh, "emb")
    assert (len(docs), len(queries), datasets) == (40, 8, 1)

    # one changed document: one text embedded, every other vector kept
    corpus = (folder / "corpus.jsonl").read_text(encoding="utf-8")
    (folder / "corpus.jsonl").write_text(corpus.replace("document 3 about", "document 3, now on"),
                                         encoding="utf-8")
    rerun = finish(python(EMBEDDING_INGEST, folder, "emb", calls, env=env, cwd=tmp_path))
    assert rerun[0] == 0 and "for 1 texts" in rerun[1], rerun
    assert calls.read_text(encoding="utf-8").splitlines()[48:] == ["document 3, now on topic 3"]
    after, _, _ = corpus_rows(fresh, "emb")
    assert [row for row in after if row[0] != "d3"] == [row for row in docs if row[0] != "d3"]
    assert dict((r[0], r[2]) for r in after)["d3"] != dict((r[0], r[2]) for r in docs)["d3"]
