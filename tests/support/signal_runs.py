"""What the signal tests share (tests/test_stopping_signals.py and
tests/test_stopping_shipped_rates.py): the small judged dataset and gated answers they start
commands on, and how they read the command's one interrupted line."""

from __future__ import annotations

import os
import signal
import textwrap
import time
from pathlib import Path

from colliding_processes import (beir, fake_keys, rate_limits_yaml, scalar, two_judges_config,
                                 wait_until)
from eval_harness.settings import load_settings

STOPPED_WITHIN = 8.0  # seconds from the signal to the exit (interpreter exit included)
EXIT_CODE = {signal.SIGINT: 130, signal.SIGTERM: 143}


def judge_config(location, tmp_path: Path, *, n_queries: int = 6, concurrency: int = 4,
                 rate_limits=None) -> Path:
    """A small dataset (texts unique to this test) ingested into ``location``, and a config
    judging it with both judges on the fake provider, ``concurrency`` requests at a time
    each, at ``rate_limits`` (default: none to speak of)."""
    from eval_harness.datasets.ingest import ingest_beir

    folder = beir(tmp_path / "judged", n_docs=max(30, 2 * n_queries), n_queries=n_queries,
                  tag=tmp_path.name[-12:])
    with location.connection() as conn:
        ingest_beir(conn, folder, name="jd")
    return two_judges_config(folder, tmp_path, concurrency=concurrency,
                             rate_limits=rate_limits)


def library_settings(config: Path, location, fake):
    """What the command loads from ``config`` with the child's environment."""
    return load_settings(config, environ={"DATABASE_URL": location.url, **fake_keys(fake)})


def stop_after_replies(process, fake, location, replies: int, in_flight: int,
                       signum: int, *, group: bool = False) -> tuple[float, int]:
    """Once ``replies`` replies are stored and ``in_flight`` requests (every slot the judges
    have) wait at the provider, send ``signum``, then let the held replies arrive. Returns
    when the signal was sent and how many requests had been sent by then."""
    wait_until(lambda: scalar(location, "SELECT count(*) FROM api_cost_log") >= replies
               and sum(r.held for r in fake.chat_records()) == in_flight,
               what=f"{replies} replies stored while {in_flight} requests wait",
               processes=[process], timeout=60)
    if group:  # a terminal's Ctrl-C: the command's helper processes get it too
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    signalled, sent = time.monotonic(), fake.chat_requests
    time.sleep(0.3)
    fake.release_replies()  # the replies on their way arrive after the signal: stored
    return signalled, sent


def interrupted_line(err: str) -> str:
    """The command's interrupted line: its last stderr line, the only one after its start-up
    lines, with no traceback or psycopg warning anywhere."""
    assert "Traceback" not in err and "error ignored" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("eval-harness: interrupted: "), err
    assert [line for line in lines if not line.startswith(("store: ", "eval-harness: "))] == [], err
    return lines[-1]


def kept_of(line: str) -> tuple[int, int]:
    """(N, M) of "interrupted: N of M ..."."""
    kept, _, rest = line.split("interrupted: ", 1)[1].partition(" of ")
    return int(kept.replace(",", "")), int(rest.split(" ", 1)[0].replace(",", ""))


GATE_DAY = "2025-01-15"


def insert_answers(location, tmp_path: Path, numbers: range) -> None:
    """Answers ``a<i>`` for each ``i`` of ``numbers`` on GATE_DAY."""
    from psycopg.types.json import Jsonb

    tag = tmp_path.name[-12:]
    with location.connection() as conn:
        for i in numbers:
            conn.execute("INSERT INTO answers (id, query, answer, sources, created_at) "
                         "VALUES (%s, %s, %s, %s, %s)",
                         (f"a{i:02d}", f"Does aspirin help, case {i}? {tag}",
                          f"Aspirin lowers heart risk in case {i} {tag} [1].",
                          Jsonb([{"id": "d1", "text": f"Aspirin reduces heart risk. {tag}"}]),
                          f"{GATE_DAY}T{8 + i % 10:02d}:00:00Z"))
        conn.commit()


def gate_config(location, tmp_path: Path, n_answers: int, *, concurrency: int = 4,
                rate_limits=None) -> Path:
    """``n_answers`` answers on GATE_DAY and a config gating them with the rule gates and the
    two LLM gates (judge 1 on the fake provider, ``concurrency`` requests at a time, at
    ``rate_limits``, default none to speak of): two judgements per answer."""
    insert_answers(location, tmp_path, range(n_answers))
    config = tmp_path / "config.yaml"
    config.write_text(textwrap.dedent(f"""
        judges:
          judge1: openai:gpt-4o
          judge2: local:lexical
          budget_usd: 5.0
          concurrency: {concurrency}
          rate_limits:
    """) + rate_limits_yaml(rate_limits) + textwrap.dedent("""
        quality_gates:
          partition_start: 2024-01-01
          gates:
            format_compliance: {enabled: true}
            citation_coverage: {enabled: true}
            grounding: {enabled: true, threshold: 0.8, min_pass_rate: 0.5}
            answer_reward: {enabled: true, threshold: 0.3, blocking: false}
    """))
    return config
