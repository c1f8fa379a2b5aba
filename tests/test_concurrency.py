"""Idempotent reruns and concurrent runs, with real OS processes against the real store.

Every writer is exercised the way it fails in production: (a) a process is killed in the
middle and the same work is run again; (b) two processes do the same work at the same moment.
Each test gets its own freshly migrated database, so counts and the judge cache start empty.

Two processes are made to collide deterministically rather than by luck: the test holds an
ACCESS EXCLUSIVE lock on a table both of them write, waits until both are queued behind it
(``pg_stat_activity`` shows two backends waiting on a lock, be it that table or an advisory
lock of the code under test), then lets go. Without the library's own serialisation both
would then run their writes side by side.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from beir_factory import write_beir
from conftest import scratch_database
from eval_harness.store import migrate

REPO = Path(__file__).resolve().parents[1]
CLI = Path(sys.executable).with_name("eval-harness")
_SCRUBBED = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL",
             "DATABASE_URL", "DAGSTER_HOME")


# ---------------------------------------------------------------------------------------
# Processes, databases and lock-step




def child_env(location, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in _SCRUBBED and not k.startswith("EVAL_HARNESS_")}
    env.update(DATABASE_URL=location.url, PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'tests'}",
               PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def spawn(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([str(a) for a in argv], env=env, cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def cli(*args, env, cwd) -> subprocess.Popen:
    return spawn([CLI, *args], env, cwd)


def python(code: str, *args, env, cwd) -> subprocess.Popen:
    """``python -c code args...``: for library entry points, which start in a fraction of the
    CLI's time (the CLI imports both provider SDKs)."""
    return spawn([sys.executable, "-c", textwrap.dedent(code), *args], env, cwd)


def finish(process: subprocess.Popen, timeout: float = 60) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def wait_until(condition, *, what: str, timeout: float = 30, processes=()) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for process in processes:
            if process.poll() is not None:
                out, err = process.communicate()
                pytest.fail(f"a process ended (exit {process.returncode}) while waiting for "
                            f"{what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def lock_waiters(location) -> int:
    with location.connection(autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                            "current_database() AND wait_event_type = 'Lock'").fetchone()[0]


@contextmanager
def held(location, table: str, mode: str = "ACCESS EXCLUSIVE"):
    """A lock on ``table`` until the block ends: whoever needs a conflicting one waits."""
    holder = location.connect()
    holder.execute(f"LOCK TABLE {table} IN {mode} MODE")
    try:
        yield
    finally:
        holder.commit()
        holder.close()


@contextmanager
def lock_step(location, table: str, processes: list[subprocess.Popen]):
    """Queue ``processes`` behind an exclusive lock on ``table``; release them together."""
    with held(location, table):
        yield
        wait_until(lambda: lock_waiters(location) >= len(processes),
                   what=f"{len(processes)} processes queued on a lock", processes=processes)


def scalar(location, query: str, params=()):
    with location.connection() as conn:
        return conn.execute(query, params).fetchone()[0]


# ---------------------------------------------------------------------------------------
# Ingest: one transaction per dataset, merged by external id


INGEST = """
    import os, sys
    from eval_harness.store import StoreLocation
    from eval_harness.store.ingest import ingest_beir
    with StoreLocation(os.environ["DATABASE_URL"]).connection() as conn:
        report = ingest_beir(conn, sys.argv[1], name=sys.argv[2])
    print(f"documents {report.documents}; queries {report.queries}")
"""


def ingest(folder: Path, name: str, *, env, cwd) -> subprocess.Popen:
    return python(INGEST, folder, name, env=env, cwd=cwd)


def beir(folder: Path, n_docs: int = 40, n_queries: int = 8, seed: int = 0,
         tag: str = "") -> Path:
    docs = {f"d{i}": f"document {i} about topic {i % 7} {tag}" for i in range(n_docs)}
    queries = {f"q{i}": f"question {i} on topic {i % 7} {tag}" for i in range(n_queries)}
    qrels = [(f"q{i}", f"d{(3 * i + j) % n_docs}", 1) for i in range(n_queries) for j in (0, 1)]
    return write_beir(folder, docs, queries, qrels, seed=seed)


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
    from eval_harness.store.ingest import ingest_beir

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


# ---------------------------------------------------------------------------------------
# Dual judges: reply cache, cost log, ground_truth judge columns


@pytest.fixture
def fake(server):
    from fake_llm_server import default_reply

    server.reset()
    server.latency, server.fault_rate, server.responder = 0.0, 0.0, default_reply
    yield server
    server.reset()
    server.latency, server.responder = 0.0, default_reply


def judge_project(location, tmp_path: Path, *, n_queries: int = 6) -> dict:
    """A small dataset (texts unique to this test) in ``location`` and a config for it."""
    tag = tmp_path.name[-12:]
    folder = beir(tmp_path / "judged", n_docs=30, n_queries=n_queries, tag=tag)
    run = finish(ingest(folder, "jd", env=child_env(location), cwd=tmp_path))
    assert run[0] == 0, run
    config = tmp_path / "config.yaml"
    config.write_text(textwrap.dedent(f"""
        default_dataset: jd
        datasets:
          jd: {{path: {folder}}}
        hybrid_search: {{semantic: 0.7, keyword: 0.3, candidate_depth: 5}}
        history: {{duckdb_path: {tmp_path / 'history.duckdb'}}}
        judges:
          judge1: openai:gpt-4o
          judge2: anthropic:claude-haiku-4-5
          budget_usd: 5.0
          concurrency: 8
          hybrid_top_k: 2
          rate_limits:
            openai: {{requests_per_minute: 100000, tokens_per_minute: null}}
            anthropic: {{requests_per_minute: 100000, tokens_per_minute: null}}
    """))
    return {"config": config, "folder": folder, "tag": tag}


def fake_keys(fake) -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-test-concurrency-0000", "OPENAI_BASE_URL": fake.openai_base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-concurrency-0000",
            "ANTHROPIC_BASE_URL": fake.anthropic_base_url}


def judged_rows(location, dataset: str = "jd"):
    """The judge columns of every query, with documents named by their external ids."""
    with location.connection() as conn:
        return conn.execute("""
            SELECT g.external_id,
                   array(SELECT d.external_id FROM unnest(g.judged_docs) WITH ORDINALITY j(id, n)
                         JOIN l2_insights d ON d.id = j.id ORDER BY j.n),
                   g.judge1_score, g.judge2_score, g.judge1_model, g.judge2_model, g.kappa,
                   g.judge1_status, g.judge2_status, g.judge_prompt_versions
            FROM ground_truth g WHERE g.dataset = %s ORDER BY g.external_id""",
                            (dataset,)).fetchall()


def ledger_counts(location) -> tuple[int, int]:
    """(judge_cache rows, api_cost_log rows)."""
    with location.connection() as conn:
        return conn.execute("SELECT (SELECT count(*) FROM judge_cache), "
                            "(SELECT count(*) FROM api_cost_log)").fetchone()


def clean_judge_run(server_url, project, fake) -> list:
    """The judge columns after one undisturbed run (in this process) in a database of its own."""
    from eval_harness.judges.dual import judge_dataset
    from eval_harness.settings import load_settings
    from eval_harness.store.ingest import ingest_beir

    with scratch_database(server_url, "eh_clean") as clean:
        settings = load_settings(project["config"],
                                 environ={"DATABASE_URL": clean.url, **fake_keys(fake)})
        with clean.connection() as conn:
            migrate(conn)
            ingest_beir(conn, project["folder"], name="jd")
            assert judge_dataset(conn, settings, "jd").complete
        return judged_rows(clean)


def test_a_killed_judge_run_finished_by_two_reruns_at_once_pays_for_each_pair_once(
        fresh, tmp_path, fake, server_url):
    """(a) The run is killed after it wrote some queries; (b) then two reruns start together.
    One rerun asks the provider exactly for the judgements without a stored reply, none of
    them for a query already written; the other waits for it and pays for nothing."""
    project = judge_project(fresh, tmp_path, n_queries=10)
    slow = tmp_path / "one-at-a-time.yaml"  # 4 queries in flight: they are written in waves
    slow.write_text(project["config"].read_text().replace("concurrency: 8", "concurrency: 1"))
    fake.latency = 0.02
    env = child_env(fresh, **fake_keys(fake))
    victim = cli("--config", slow, "judge", "--json", env=env, cwd=tmp_path)
    written = "SELECT count(*) FROM ground_truth WHERE judged_docs IS NOT NULL"
    wait_until(lambda: scalar(fresh, written) >= 1, what="a first query to be written",
               processes=[victim], timeout=60)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    with fresh.connection() as conn:
        done = [r[0] for r in conn.execute(
            "SELECT query FROM ground_truth WHERE judged_docs IS NOT NULL")]
    cached, _ = ledger_counts(fresh)
    sent_before = fake.chat_requests
    assert 1 <= len(done) < 10, "the run should have been killed half-way"

    fake.latency = 0.0
    reruns = [cli("--config", project["config"], "judge", "--json", env=env, cwd=tmp_path)
              for _ in range(2)]
    with lock_step(fresh, "ground_truth", reruns):
        pass
    outcomes = [finish(run) for run in reruns]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    summaries = [json.loads(out) for _, out, _ in outcomes]
    pairs = summaries[0]["pairs"]
    assert summaries[1]["pairs"] == pairs >= 2 * 10
    missing = 2 * pairs - cached  # judgements (pair x judge) without a stored reply
    asked = [json.dumps(r.body) for r in fake.chat_records()[sent_before:]]
    assert len(asked) == missing
    assert sorted(s["provider_calls"] for s in summaries) == [0, missing]
    assert [("judge run of dataset 'jd' is in progress; waiting" in err)
            for _, _, err in outcomes].count(True) == 1  # the second one said why it waited
    assert not [q for q in done if any(json.dumps(q)[1:-1] in body for body in asked)]
    # one cache row and one cost row per judgement; the same labels as an undisturbed run
    assert ledger_counts(fresh) == (2 * pairs, 2 * pairs)
    assert judged_rows(fresh) == clean_judge_run(server_url, project, fake)


def test_a_query_reingested_while_it_is_judged_does_not_get_scores_for_its_old_text(
        fresh, tmp_path, fake):
    """The judge run plans and judges q0; before it writes, an ingest changes q0's text (and
    clears its scores). The run must not then store the old text's scores on the new query."""
    project = judge_project(fresh, tmp_path, n_queries=3)
    env = child_env(fresh, **fake_keys(fake))
    # Inserting into judge_cache is the run's first write (its replies go before its scores),
    # so holding that table parks the run after judging and before writing anything.
    with held(fresh, "judge_cache", "EXCLUSIVE"):  # reads still pass
        run = cli("--config", project["config"], "judge", "--json", env=env, cwd=tmp_path)
        wait_until(lambda: lock_waiters(fresh) >= 1, what="the judge run to want to write",
                   processes=[run], timeout=60)
        queries = project["folder"] / "queries.jsonl"
        queries.write_text(queries.read_text().replace("question 0 on", "question 0, reworded, on"))
        changed = finish(ingest(project["folder"], "jd", env=child_env(fresh), cwd=tmp_path))
        assert changed[0] == 0 and "queries 0 new, 1 updated" in changed[1], changed
    code, out, err = finish(run)
    summary = json.loads(out)
    assert code == 1 and summary["changed_meanwhile"] == 1, err  # incomplete: run again
    assert summary["queries_written"] == 2
    with fresh.connection() as conn:
        rows = dict(conn.execute("SELECT external_id, judged_docs IS NOT NULL FROM ground_truth"
                                 ).fetchall())
    assert rows == {"q0": False, "q1": True, "q2": True}


# ---------------------------------------------------------------------------------------
# Quality gates: gate_results, evaluation_log, episode_memory, regeneration_queue

GATE_DAY = "2025-01-15"
POOR = "POOR-ANSWER"
GATES = ("format_compliance", "citation_coverage", "grounding", "answer_reward")


@pytest.fixture
def gate_fake(fake):
    """The fake provider, judging answers marked POOR poorly (a reflexion and a queue entry)."""
    from fake_llm_server import poor_verdicts_for

    fake.responder = poor_verdicts_for(POOR)
    return fake


def gate_project(location, tmp_path: Path, n_answers: int, n_poor: int) -> dict:
    """``n_answers`` answers on GATE_DAY (the first ``n_poor`` poor ones) and a config with the
    two rule gates and the two LLM gates, judge 1 on the fake provider."""
    from psycopg.types.json import Jsonb

    tag = tmp_path.name[-12:]
    with location.connection() as conn:
        for i in range(n_answers):
            text = f"{POOR} Bananas are yellow" if i < n_poor else "Aspirin lowers heart risk"
            conn.execute("INSERT INTO answers (id, query, answer, sources, created_at) "
                         "VALUES (%s, %s, %s, %s, %s)",
                         (f"a{i:02d}", f"Does aspirin help, case {i}? {tag}",
                          f"{text} in case {i} {tag} [1].",
                          Jsonb([{"id": "d1", "text": f"Aspirin reduces heart risk. {tag}"}]),
                          f"{GATE_DAY}T{8 + i % 10:02d}:00:00Z"))
        conn.commit()
    config = tmp_path / "config.yaml"
    config.write_text(textwrap.dedent(f"""
        judges:
          judge1: openai:gpt-4o
          judge2: local:lexical
          budget_usd: 5.0
          rate_limits:
            openai: {{requests_per_minute: 100000, tokens_per_minute: null}}
            anthropic: {{requests_per_minute: 100000, tokens_per_minute: null}}
        quality_gates:
          partition_start: 2024-01-01
          gates:
            format_compliance: {{enabled: true}}
            citation_coverage: {{enabled: true}}
            grounding: {{enabled: true, threshold: 0.8, min_pass_rate: 0.5}}
            answer_reward: {{enabled: true, threshold: 0.3, blocking: false}}
    """))
    return {"config": config, "answers": n_answers, "poor": n_poor,
            "requests": 2 * n_answers + n_poor}  # grounding + evaluation each, reflexion if poor


def gate_rows(location) -> dict[str, list]:
    with location.connection() as conn:
        return {
            "results": conn.execute("SELECT answer_id, gate, score, passed, gate_version "
                                    "FROM gate_results ORDER BY 1, 2").fetchall(),
            "evaluation_log": conn.execute("SELECT answer_id, reward FROM evaluation_log "
                                           "ORDER BY 1").fetchall(),
            "episode_memory": conn.execute("SELECT answer_id, problem, lesson FROM "
                                           "episode_memory ORDER BY 1").fetchall(),
            "regeneration_queue": conn.execute("SELECT answer_id, reward, improvement_hint "
                                               "FROM regeneration_queue ORDER BY 1").fetchall()}


def clean_gate_run(server_url, source, project, fake) -> dict[str, list]:
    """The gate tables after one undisturbed run (in this process) over the answers of
    ``source``, in a database of its own."""
    from datetime import datetime, timezone

    from eval_harness.gates.answers import TimeWindow
    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.runner import run_quality_gates
    from eval_harness.settings import load_settings

    with source.connection() as conn:
        answers = conn.execute("SELECT id, query, answer, sources, created_at FROM answers"
                               ).fetchall()
    with scratch_database(server_url, "eh_clean") as clean:
        with clean.connection() as conn:
            migrate(conn)
            with conn.cursor() as cursor:
                cursor.executemany("INSERT INTO answers VALUES (%s, %s, %s, %s, %s)",
                                   [(*row[:3], json.dumps(row[3]), row[4]) for row in answers])
            conn.commit()
        settings = load_settings(project["config"],
                                 environ={"DATABASE_URL": clean.url, **fake_keys(fake)})
        since = datetime.fromisoformat(GATE_DAY).replace(tzinfo=timezone.utc)
        run_quality_gates(clean, TimeWindow.since(since), configured_gates(settings))
        return gate_rows(clean)


GATE_RUN = """
    import os, sys
    from datetime import datetime, timezone
    from eval_harness.gates.answers import TimeWindow
    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.runner import run_quality_gates
    from eval_harness.settings import load_settings
    from eval_harness.store import StoreLocation

    settings = load_settings(sys.argv[1])
    since = datetime.fromisoformat(sys.argv[2]).replace(tzinfo=timezone.utc)
    run_quality_gates(StoreLocation(os.environ["DATABASE_URL"]), TimeWindow.since(since),
                      configured_gates(settings), batch_size=int(sys.argv[3]))
"""


def test_a_killed_gate_run_finished_by_two_reruns_at_once_evaluates_each_answer_once(
        fresh, tmp_path, gate_fake, server_url):
    """(a) The run (batches of 2 answers) is killed after its first batches; (b) then two gate
    commands for the same day start together. Finished batches are kept whole; one rerun
    evaluates the rest, asking only for judgements without a stored reply; the other waits and
    evaluates nothing. One result, one log row, one reflexion and one queue entry per answer."""
    project = gate_project(fresh, tmp_path, n_answers=8, n_poor=3)
    gate_fake.latency = 0.1
    env = child_env(fresh, **fake_keys(gate_fake))
    victim = python(GATE_RUN, project["config"], GATE_DAY, "2", env=env, cwd=tmp_path)
    stored = "SELECT count(DISTINCT answer_id) FROM gate_results"
    wait_until(lambda: scalar(fresh, stored) >= 2, what="a first batch of results",
               processes=[victim], timeout=60)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    kept = scalar(fresh, stored)
    cached = ledger_counts(fresh)[0]
    sent_before = gate_fake.chat_requests
    assert 2 <= kept < 8, "the run should have been killed half-way"
    # a batch is stored with its log rows in one transaction: nothing half-written
    assert scalar(fresh, "SELECT count(*) FROM gate_results") == kept * len(GATES)
    assert scalar(fresh, "SELECT count(*) FROM evaluation_log") == kept

    gate_fake.latency = 0.0
    reruns = [cli("--config", project["config"], "gate", "--since", GATE_DAY, "--json",
                  env=env, cwd=tmp_path) for _ in range(2)]
    with lock_step(fresh, "answers", reruns):
        pass
    outcomes = [finish(run) for run in reruns]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    reports = [json.loads(out) for _, out, _ in outcomes]
    evaluated = sorted(tuple(c["evaluated_now"] for c in r["checks"]) for r in reports)
    assert evaluated == [(0,) * len(GATES), (8 - kept,) * len(GATES)]
    assert [("quality-gate run of answers since" in err and "waiting" in err)
            for _, _, err in outcomes].count(True) == 1
    # what this run evaluated, and the time it spent on it, differ; every other figure agrees
    same = [[{**c, "evaluated_now": 0, "seconds": 0.0} for c in r["checks"]] for r in reports]
    assert same[0] == same[1]
    assert gate_fake.chat_requests - sent_before == project["requests"] - cached
    rows = gate_rows(fresh)
    assert len(rows["results"]) == 8 * len(GATES)
    assert len(rows["evaluation_log"]) == 8
    assert [r[0] for r in rows["episode_memory"]] == ["a00", "a01", "a02"]
    assert [r[0] for r in rows["regeneration_queue"]] == ["a00", "a01", "a02"]
    assert rows == clean_gate_run(server_url, fresh, project, gate_fake)


def test_overlapping_gate_windows_at_once_keep_one_result_and_one_log_row_per_answer(
        fresh, tmp_path, gate_fake):
    """``--since`` the day before and ``--since`` the day cover the same answers but are other
    windows, so they do not wait for each other: both judge the answers, and the first result
    stored for an answer is the one kept, with its log, reflexion and queue rows only."""
    project = gate_project(fresh, tmp_path, n_answers=6, n_poor=2)
    env = child_env(fresh, **fake_keys(gate_fake))
    runs = [python(GATE_RUN, project["config"], since, "1000", env=env, cwd=tmp_path)
            for since in ("2025-01-14", GATE_DAY)]
    with lock_step(fresh, "answers", runs):
        pass
    outcomes = [finish(run) for run in runs]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    rows = gate_rows(fresh)
    assert len(rows["results"]) == 6 * len(GATES)
    assert len(rows["evaluation_log"]) == 6
    assert [r[0] for r in rows["episode_memory"]] == ["a00", "a01"]
    assert [r[0] for r in rows["regeneration_queue"]] == ["a00", "a01"]
    with fresh.connection() as conn:  # each answer's log row comes from the run kept for it
        assert conn.execute("""
            SELECT count(*) FROM gate_results r JOIN evaluation_log e
              ON e.answer_id = r.answer_id AND e.run_id = r.run_id
            WHERE r.gate = 'answer_reward'""").fetchone()[0] == 6


# ---------------------------------------------------------------------------------------
# Answers import: one transaction, merged by id under an advisory lock on the relation

IMPORT_ANSWERS = """
    import os, sys
    from eval_harness.gates.answers import import_answers
    from eval_harness.store import StoreLocation
    with StoreLocation(os.environ["DATABASE_URL"]).connection() as conn:
        print(import_answers(conn, sys.argv[1]))
"""


def answers_file(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({
        "id": f"imp-{i}", "query": f"question {i}", "answer": f"Answer {i} [1].",
        "sources": [{"id": "s1", "text": "a source"}],
        "created_at": "2025-02-01T10:00:00Z"}) + "\n" for i in range(n)))
    return path


def test_two_imports_of_the_same_answers_at_once_store_each_answer_once(fresh, tmp_path):
    path = answers_file(tmp_path / "answers.jsonl", 50)
    env = child_env(fresh)
    runs = [python(IMPORT_ANSWERS, path, env=env, cwd=tmp_path) for _ in range(2)]
    with lock_step(fresh, "answers", runs):
        pass
    outcomes = [finish(run) for run in runs]
    assert [code for code, _, _ in outcomes] == [0, 0], outcomes
    assert sorted(out.strip() for _, out, _ in outcomes) == [
        "0 new, 0 updated, 50 unchanged", "50 new, 0 updated, 0 unchanged"]
    assert scalar(fresh, "SELECT count(*) FROM answers") == 50


def test_an_import_killed_mid_transaction_leaves_nothing_and_the_rerun_imports_once(
        fresh, tmp_path):
    path = answers_file(tmp_path / "answers.jsonl", 50)
    env = child_env(fresh)
    with held(fresh, "answers"):  # the answers are staged; the merge waits: it dies there
        victim = python(IMPORT_ANSWERS, path, env=env, cwd=tmp_path)
        wait_until(lambda: lock_waiters(fresh) >= 1, what="the import to reach the answers",
                   processes=[victim])
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
    rerun = finish(python(IMPORT_ANSWERS, path, env=env, cwd=tmp_path))
    assert rerun[0] == 0 and rerun[1].strip() == "50 new, 0 updated, 0 unchanged", rerun
    assert scalar(fresh, "SELECT count(*) FROM answers") == 50


# ---------------------------------------------------------------------------------------
# Review queue: queue + export, and import of verdicts, under a per-dataset advisory lock

REVIEW = """
    import os, sys
    from eval_harness.agreement.review import export_review_csv, import_review_csv, queue_disagreements
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


# ---------------------------------------------------------------------------------------
# config.yaml: rewritten through a temporary file and a rename, under a file lock

WRITE_WEIGHTS = """
    import sys, time
    from eval_harness.calibration.weights import write_calibrated_weights
    start = float(sys.argv[2])
    while time.time() < start:  # all writers begin together
        time.sleep(0.001)
    for i in range(int(sys.argv[3])):
        write_calibrated_weights(sys.argv[1], (0.5, 0.6, 0.7, 0.8)[i % 4])
"""


def test_concurrent_config_writes_all_succeed_and_keep_the_file_whole(tmp_path):
    import yaml

    config = tmp_path / "config.yaml"
    config.write_text("# calibrated by eval-harness\nhybrid_search:\n  semantic: 0.7  # weight\n"
                      "  keyword: 0.3\n  candidate_depth: 50\ndefault_dataset: scifact\n")
    start = str(time.time() + 1.0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_HARNESS_")}
    env["PYTHONPATH"] = str(REPO)
    writers = [python(WRITE_WEIGHTS, config, start, "20", env=env, cwd=tmp_path)
               for _ in range(4)]
    outcomes = [finish(writer) for writer in writers]
    assert [code for code, _, _ in outcomes] == [0] * 4, outcomes  # no "changed meanwhile"
    text = config.read_text()
    parsed = yaml.safe_load(text)
    assert parsed["hybrid_search"]["semantic"] in (0.5, 0.6, 0.7, 0.8)
    assert parsed["hybrid_search"]["keyword"] == round(1 - parsed["hybrid_search"]["semantic"], 10)
    assert parsed["default_dataset"] == "scifact" and "# calibrated by eval-harness" in text
    assert "# weight" in text
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


# ---------------------------------------------------------------------------------------
# DuckDB calibration history: one writer at a time, each grid one transaction

APPEND_GRID = """
    import sys
    import pandas as pd
    from eval_harness.calibration.history import GRID_COLUMNS, append_grid_history
    for run in range(int(sys.argv[3])):
        frame = pd.DataFrame([{"run_at": pd.Timestamp.now(tz="UTC"), "dataset": sys.argv[2],
                               "semantic_weight": w / 10, "keyword_weight": 1 - w / 10,
                               "p_at_5": 0.1, "recall_at_5": 0.2, "ndcg_at_10": 0.3,
                               "mrr_at_10": 0.4, "p_at_5_ceiling": 0.5, "is_best": w == 7,
                               "is_default": w == 7, "n_queries": run, "candidate_depth": 50,
                               "verdict": "failure"} for w in range(5, 10)],
                             columns=list(GRID_COLUMNS))
        append_grid_history(sys.argv[1], frame.astype({"n_queries": "int32",
                                                       "candidate_depth": "int32"}))
"""

HALF_WRITTEN_GRID = """
    import os, sys, time, duckdb
    con = duckdb.connect(sys.argv[1])
    con.execute("BEGIN TRANSACTION")
    con.execute("INSERT INTO calibration_grid_history (dataset, semantic_weight) "
                "VALUES ('crashed', 0.5), ('crashed', 0.6)")
    print("inserted", flush=True)
    time.sleep(60)
"""


def test_history_writers_take_turns_and_a_killed_writer_leaves_no_partial_grid(tmp_path):
    from eval_harness.calibration.history import read_grid_history

    database = tmp_path / "history.duckdb"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_HARNESS_")}
    env["PYTHONPATH"] = str(REPO)
    writers = [python(APPEND_GRID, database, name, "4", env=env, cwd=tmp_path)
               for name in ("a", "b", "c")]
    outcomes = [finish(writer) for writer in writers]
    assert [code for code, _, _ in outcomes] == [0, 0, 0], outcomes
    history = read_grid_history(database)
    assert len(history) == 3 * 4 * 5
    assert history.groupby(["dataset", "n_queries"]).size().tolist() == [5] * 12

    victim = python(HALF_WRITTEN_GRID, database, env=env, cwd=tmp_path)
    assert victim.stdout.readline().strip() == "inserted"
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=10)
    started = time.monotonic()
    assert finish(python(APPEND_GRID, database, "after", "1", env=env, cwd=tmp_path))[0] == 0
    assert time.monotonic() - started < 10  # the dead writer's lock went with it
    history = read_grid_history(database)
    assert "crashed" not in set(history["dataset"]) and len(history) == 3 * 4 * 5 + 5
