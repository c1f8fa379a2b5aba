"""Concurrent review exports and verdict imports, under a per-dataset advisory lock.

Real OS processes against the real store; tests/support/colliding_processes.py says how two of them
are made to collide and why each test has a database of its own.
"""

from __future__ import annotations

from colliding_processes import beir, child_env, finish, ingest, lock_step, python, scalar

REVIEW = """
    import os, sys
    from eval_harness.agreement.review import (export_review_csv, import_review_csv,
                                               queue_disagreements)
    from eval_harness.store import StoreLocation
    with StoreLocation(os.environ["DATABASE_URL"]).connection() as conn:
        if sys.argv[1] == "export":
            print(queue_disagreements(conn, "jd", threshold=0.4))
            export_review_csv(conn, "jd", sys.argv[2])
        else:
            print(import_review_csv(conn, "jd", sys.argv[2]))
"""


def test_two_review_exports_and_two_imports_at_once_queue_and_adjudicate_each_pair_once(
        fresh, tmp_path):
    import csv

    folder = beir(tmp_path / "data", n_docs=20, n_queries=6)
    assert finish(ingest(folder, "jd", env=child_env(fresh), cwd=tmp_path))[0] == 0
    with fresh.connection() as conn:  # every expected pair disagrees: 0.9 vs 0.1
        conn.execute("UPDATE ground_truth SET judged_docs = expected_docs, "
                     "judge1_score = array_fill(0.9::float8, ARRAY[cardinality(expected_docs)]), "
                     "judge2_score = array_fill(0.1::float8, ARRAY[cardinality(expected_docs)]), "
                     "judge1_model = 'a', judge2_model = 'b'")
        conn.commit()
    env = child_env(fresh)
    exports = [python(REVIEW, "export", tmp_path / f"queue{i}.csv", env=env, cwd=tmp_path)
               for i in range(2)]
    with lock_step(fresh, "judge_review", exports):
        pass
    outcomes = [finish(run) for run in exports]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    assert sorted(out.split(";")[0] for _, out, _ in outcomes) == [
        "0 new, 0 re-queued, 12 unchanged, 0 removed",
        "12 new, 0 re-queued, 0 unchanged, 0 removed"]
    assert scalar(fresh, "SELECT count(*) FROM judge_review") == 12
    assert scalar(fresh, "SELECT max(score_revision) FROM judge_review") == 1

    with (tmp_path / "queue0.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["verdict"] = "relevant"
    with (tmp_path / "verdicts.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    imports = [python(REVIEW, "import", tmp_path / "verdicts.csv", env=env, cwd=tmp_path)
               for _ in range(2)]
    with lock_step(fresh, "judge_review", imports):
        pass
    outcomes = [finish(run) for run in imports]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    assert sorted(out.split(",")[0] for _, out, _ in outcomes) == [
        "0 verdict(s) stored", "12 verdict(s) stored"]
    assert scalar(fresh, "SELECT count(*) FROM judge_review WHERE status = 'adjudicated' "
                         "AND verdict = 'relevant'") == 12
