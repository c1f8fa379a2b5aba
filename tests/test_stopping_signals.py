"""A run the user stops stops: SIGINT / SIGTERM to `judge`, `gate`, `ingest`, `calibrate` and
`run` (issue #20).

Each test starts the real command in its own process against the real store and the fake
LLM provider, waits until a known number of replies were delivered while every slot the
judges have waits at the provider (``hold_replies_after``), sends a real signal, lets the
held replies arrive, and checks what the user sees (exit 130 or 143, one line saying what
was kept, no traceback, within a few seconds) and what was kept: every reply that arrived
is stored and no request is sent after the signal. The rerun (through the library, which is
what the command runs) asks the provider only for what is missing, so over both runs the
provider answers each distinct judgement once.
"""

from __future__ import annotations

import os
import signal
import textwrap
import time
from datetime import date
from pathlib import Path

import pytest

from colliding_processes import (CLI, beir, child_env, cli,  # noqa: F401 (fake)
                                 dagster_run_statuses, fake, fake_keys, finish, held,
                                 ledger_counts, lock_waiters, python, rate_limits_yaml, scalar,
                                 shipped_judge_limits, spawn, two_judges_config, wait_until)
from eval_harness.settings import load_settings

STOPPED_WITHIN = 8.0  # seconds from the signal to the exit (interpreter exit included)
EXIT_CODE = {signal.SIGINT: 130, signal.SIGTERM: 143}


def judge_config(location, tmp_path: Path, *, n_queries: int = 6, concurrency: int = 4,
                 rate_limits=None) -> Path:
    """A small dataset (texts unique to this test) ingested into ``location``, and a config
    judging it with both judges on the fake provider, ``concurrency`` requests at a time
    each, at ``rate_limits`` (default: none to speak of)."""
    from eval_harness.store.ingest import ingest_beir

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


# ---------------------------------------------------------------------------------------
# judge: judgements kept


def test_a_stopped_judge_run_keeps_what_it_paid_for_and_the_rerun_pays_only_the_rest(
        fresh, tmp_path, fake):
    from eval_harness.judges.dual.run import judge_dataset

    config = judge_config(fresh, tmp_path)
    fake.hold_replies_after(10)
    run = cli("--config", config, "judge", "--json", env=child_env(fresh, **fake_keys(fake)),
              cwd=tmp_path)
    signalled, sent = stop_after_replies(run, fake, fresh, 10, 2 * 4, signal.SIGINT)
    code, out, err = finish(run, timeout=30)
    assert code == 130, err
    assert time.monotonic() - signalled < STOPPED_WITHIN
    line = interrupted_line(err)
    assert line.endswith(" judgements stored; run the same command again to finish"), line
    assert out == ""
    assert fake.chat_requests == sent  # no request was sent after the signal
    assert ledger_counts(fresh) == (sent, sent)  # each reply that arrived is stored
    kept, judgements = kept_of(line)
    assert kept == sent

    with fresh.connection() as conn:
        rerun = judge_dataset(conn, library_settings(config, fresh, fake), "jd")
    assert rerun.complete and judgements == 2 * rerun.pairs
    assert fake.chat_requests - sent == rerun.provider_calls == judgements - kept
    assert ledger_counts(fresh) == (judgements, judgements)  # each paid for once


def test_a_second_signal_while_stopping_exits_at_once(fresh, tmp_path, fake):
    """The first SIGINT waits a few seconds for the replies on their way (which never come
    here); a second one ends the process at once, still with exit code 130."""
    config = judge_config(fresh, tmp_path)
    fake.hold_replies_after(4)
    run = cli("--config", config, "judge", env=child_env(fresh, **fake_keys(fake)), cwd=tmp_path)
    wait_until(lambda: sum(r.held for r in fake.chat_records()) == 2 * 4,
               what="every slot waiting at the provider", processes=[run], timeout=60)
    run.send_signal(signal.SIGINT)
    time.sleep(0.5)
    run.send_signal(signal.SIGINT)
    signalled = time.monotonic()
    code, out, err = finish(run, timeout=30)
    fake.release_replies()
    assert code == 130, err
    assert time.monotonic() - signalled < STOPPED_WITHIN
    assert "Traceback" not in err
    assert err.splitlines()[-1] == ("eval-harness: interrupted again: stopped at once; what "
                                    "was stored is kept; run the same command again to finish")
    assert ledger_counts(fresh) == (4, 4)


def test_a_judge_run_waiting_for_another_runs_lock_stops_at_once(fresh, tmp_path, fake):
    """Another run of the dataset holds its judge lock (here): SIGINT ends the wait."""
    config = judge_config(fresh, tmp_path, n_queries=2)
    with fresh.connection(autocommit=True) as other_run:
        other_run.execute("SELECT pg_advisory_lock(hashtext('eval_harness.judge:jd'))")
        run = cli("--config", config, "judge", env=child_env(fresh, **fake_keys(fake)),
                  cwd=tmp_path)
        wait_until(lambda: lock_waiters(fresh) >= 1, what="the run to wait for the lock",
                   processes=[run], timeout=60)
        run.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        code, out, err = finish(run, timeout=30)
    assert code == 130, err
    assert time.monotonic() - signalled < STOPPED_WITHIN
    assert "Traceback" not in err and "waiting for it to end" in err, err
    assert err.splitlines()[-1] == ("eval-harness: interrupted: 0 judgements of dataset 'jd' "
                                    "stored (the stop came before any pair was judged); run "
                                    "the same command again to finish")
    assert fake.chat_requests == 0


# ---------------------------------------------------------------------------------------
# gate: answers gated (--since through the library, --partition through Dagster)

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


@pytest.mark.parametrize("window, signum", [(["--since", GATE_DAY], signal.SIGTERM),
                                            (["--partition", GATE_DAY], signal.SIGINT)],
                         ids=["since-SIGTERM", "partition-SIGINT"])
def test_a_stopped_gate_run_stores_what_it_evaluated_and_the_rerun_does_the_rest(
        fresh, tmp_path, fake, window, signum):
    from eval_harness.gates.answers import TimeWindow
    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.runner import run_quality_gates

    answers, before = 20, 5  # `before` answers were gated by an earlier run
    config = gate_config(fresh, tmp_path, before)
    settings = library_settings(config, fresh, fake)
    run_quality_gates(fresh, TimeWindow.day(date.fromisoformat(GATE_DAY)),
                      configured_gates(settings))
    earlier = fake.chat_requests  # two judgements per answer
    insert_answers(fresh, tmp_path, range(before, before + answers))
    env = child_env(fresh, DAGSTER_HOME=str(tmp_path / "dagster"), **fake_keys(fake))
    fake.hold_replies_after(6)
    gate = cli("--config", config, "gate", *window, "--json", "--junit-xml",
               tmp_path / "junit.xml", env=env, cwd=tmp_path)
    signalled, sent = stop_after_replies(gate, fake, fresh, earlier + 6, 4, signum)
    code, out, err = finish(gate, timeout=60)
    assert code == EXIT_CODE[signum], err
    assert time.monotonic() - signalled < STOPPED_WITHIN
    line = interrupted_line(err)
    assert earlier == 2 * before
    assert fake.chat_requests == sent  # nothing was sent after the signal
    assert ledger_counts(fresh) == (sent, sent)  # every reply that arrived is stored
    # grounding goes first for every answer, so none of this run's has all its gates yet;
    # each grounding result whose reply arrived is stored, with both rule gates' results of
    # every answer; the line counts what is stored, the earlier run's answers included
    results = scalar(fresh, "SELECT count(*) FROM gate_results")
    assert results == 4 * before + 2 * answers + (sent - earlier)
    assert line == (f"eval-harness: interrupted: {before} of {before + answers} answers gated "
                    f"({results} gate results stored); run the same command again to finish")
    assert f"interrupted: {before} of" in (tmp_path / "junit.xml").read_text()

    rerun = run_quality_gates(fresh, TimeWindow.day(date.fromisoformat(GATE_DAY)),
                              configured_gates(settings))
    assert {s.gate: s.evaluated_now for s in rerun.summaries} == {
        "format_compliance": 0, "citation_coverage": 0,
        "grounding": answers - (sent - earlier), "answer_reward": answers}
    judgements = 2 * (before + answers)  # grounding and answer_reward, one request each
    assert fake.chat_requests == judgements  # each paid for once, over the three runs
    assert ledger_counts(fresh) == (judgements, judgements)


# ---------------------------------------------------------------------------------------
# ingest and calibrate: no LLM; one transaction, or writes only at the end


def signalled_while_waiting(location, table: str, argv, sig, *, env, cwd):
    """Run ``eval-harness argv`` while ``table`` is held, so that it waits on the lock; send
    ``sig`` once it waits. Returns (exit code, stdout, stderr, seconds from the signal to
    the exit)."""
    with held(location, table):
        run = cli(*argv, env=env, cwd=cwd)
        wait_until(lambda: lock_waiters(location) >= 1, what=f"{argv} to wait on {table}",
                   processes=[run], timeout=60)
        run.send_signal(sig)
        signalled = time.monotonic()
        code, out, err = finish(run, timeout=30)
        return code, out, err, time.monotonic() - signalled


def test_a_stopped_ingest_stores_nothing_and_the_rerun_ingests(fresh, tmp_path):
    """The ingest waits for a lock (held here) when SIGTERM comes: psycopg cancels the
    statement, the transaction is rolled back, and the same command then ingests."""
    folder = beir(tmp_path / "folder", n_docs=10, n_queries=3, tag=tmp_path.name[-12:])
    env = child_env(fresh)
    # the ingest's first write waits on the held table
    code, out, err, took = signalled_while_waiting(
        fresh, "l2_insights", ("ingest", folder, "--name", "stopped"), signal.SIGTERM,
        env=env, cwd=tmp_path)
    assert code == 143, err
    assert took < STOPPED_WITHIN
    assert interrupted_line(err) == (
        "eval-harness: interrupted: nothing of dataset 'stopped' was stored (an ingest stores "
        "the whole folder at once, or nothing); run the same command again to finish")
    assert scalar(fresh, "SELECT count(*) FROM l2_insights WHERE dataset = 'stopped'") == 0
    code, out, err = finish(cli("ingest", folder, "--name", "stopped", env=env, cwd=tmp_path))
    assert code == 0, err
    assert scalar(fresh, "SELECT count(*) FROM l2_insights WHERE dataset = 'stopped'") == 10


def test_a_stopped_calibration_writes_nothing(fresh, tmp_path):
    """Calibration reads the ground truth (held here) when SIGINT comes: nothing is written,
    neither the calibrated_weights table nor config.yaml."""
    from eval_harness.store.ingest import ingest_beir

    folder = beir(tmp_path / "folder", n_docs=20, n_queries=4, tag=tmp_path.name[-12:])
    with fresh.connection() as conn:
        ingest_beir(conn, folder, name="cal")
    config = tmp_path / "config.yaml"
    config.write_text(f"default_dataset: cal\ndatasets:\n  cal: {{path: {folder}}}\n"
                      f"history: {{duckdb_path: {tmp_path / 'history.duckdb'}}}\n")
    before = config.read_text()
    code, out, err, took = signalled_while_waiting(
        fresh, "ground_truth", ("--config", config, "calibrate"), signal.SIGINT,
        env=child_env(fresh), cwd=tmp_path)
    assert code == 130, err
    assert took < STOPPED_WITHIN
    assert interrupted_line(err) == (
        "eval-harness: interrupted: nothing was written (calibration writes its weights, "
        "history and report only once the grid is done); run the same command again to "
        "finish")
    assert config.read_text() == before
    assert scalar(fresh, "SELECT count(*) FROM calibrated_weights") == 0
    assert not (tmp_path / "history.duckdb").exists()


# ---------------------------------------------------------------------------------------
# run: the Dagster jobs in-process


def test_a_run_stopped_while_judging_ends_its_dagster_run_and_starts_no_later_step(
        fresh, tmp_path, fake):
    """Ctrl-C in the terminal (SIGINT to the whole process group, Dagster's log-mirroring
    helpers included: they printed two `watch_orphans` KeyboardInterrupt tracebacks): one
    line, and the Dagster run ends canceled (it ended as a failure "interrupted
    unexpectedly")."""
    config = judge_config(fresh, tmp_path)
    home = tmp_path / "dagster"
    env = child_env(fresh, DAGSTER_HOME=str(home), **fake_keys(fake))
    fake.hold_replies_after(10)
    run = cli("--config", config, "run", env=env, cwd=tmp_path, start_new_session=True)
    signalled, sent = stop_after_replies(run, fake, fresh, 10, 2 * 4, signal.SIGINT,
                                         group=True)
    code, out, err = finish(run, timeout=60)
    assert code == 130, err
    assert time.monotonic() - signalled < STOPPED_WITHIN
    assert "Traceback" not in out
    line = interrupted_line(err)
    assert line.startswith("eval-harness: interrupted: stopped during [1/3] nightly pipeline "
                           f"(step dual_judge_scores): {sent} of "), line
    assert line.endswith(" judgements stored; the later steps did not run; run the same "
                         "command again to finish"), line
    assert "[1/3]" in out and "[2/3]" not in out and "[3/3]" not in out, out
    assert fake.chat_requests == sent
    assert ledger_counts(fresh) == (sent, sent)
    assert list(dagster_run_statuses(home).values()) == ["CANCELED"]


def test_a_run_stopped_in_a_step_dagster_interrupts_starts_no_later_step(fresh, tmp_path):
    """SIGTERM while the ingest step waits for a lock (held here): Dagster's own handler
    interrupts that op; the command still ends at once with exit 143 and one line."""
    folder = beir(tmp_path / "folder", n_docs=10, n_queries=3, tag=tmp_path.name[-12:])
    config = tmp_path / "config.yaml"
    config.write_text(f"default_dataset: ing\ndatasets:\n  ing: {{path: {folder}}}\n"
                      f"history: {{duckdb_path: {tmp_path / 'history.duckdb'}}}\n"
                      "judges: {judge1: local:lexical, judge2: local:embedding}\n")
    home = tmp_path / "dagster"
    env = child_env(fresh, DAGSTER_HOME=str(home))
    with held(fresh, "l2_insights"):
        run = cli("--config", config, "run", env=env, cwd=tmp_path)
        wait_until(lambda: lock_waiters(fresh) >= 1, what="the ingest step to wait on the lock",
                   processes=[run], timeout=120)
        run.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        code, out, err = finish(run, timeout=60)
    assert code == 143, err
    assert time.monotonic() - signalled < STOPPED_WITHIN
    assert "Traceback" not in out
    assert interrupted_line(err) == (
        "eval-harness: interrupted: stopped during [1/3] nightly pipeline (step corpus): what "
        "finished is kept; the later steps did not run; run the same command again to finish")
    assert "[2/3]" not in out and "[3/3]" not in out, out
    assert scalar(fresh, "SELECT count(*) FROM l2_insights WHERE dataset = 'ing'") == 0
    # canceled, as Dagster's own termination ends a run (not "interrupted unexpectedly")
    assert list(dagster_run_statuses(home).values()) == ["CANCELED"]


def test_a_stopped_batch_judge_run_stops_waiting_and_the_rerun_resumes_its_batches(
        fresh, tmp_path, fake):
    """`judge --batch` polls its batches every 30 s; SIGINT ends the wait at once. The
    batches go on at the provider, and the next batch run collects them: nothing is
    submitted (or paid) twice."""
    from eval_harness.judges.dual.run import judge_dataset

    config = judge_config(fresh, tmp_path, n_queries=3)
    config.write_text(config.read_text() + "  batch: {poll_interval_seconds: 30, "
                                           "max_wait_seconds: 600}\n")
    fake.batch_polls = 10 ** 6  # the batches run until end_batches()
    run = cli("--config", config, "judge", "--batch", env=child_env(fresh, **fake_keys(fake)),
              cwd=tmp_path)
    wait_until(lambda: scalar(fresh, "SELECT count(*) FROM judge_batches") == 2,
               what="both batches to be registered", processes=[run], timeout=60)
    time.sleep(0.5)  # the first polls are done: the run waits out its poll interval
    run.send_signal(signal.SIGINT)
    signalled = time.monotonic()
    code, out, err = finish(run, timeout=30)
    assert code == 130, err
    assert time.monotonic() - signalled < STOPPED_WITHIN
    line = interrupted_line(err)
    assert line.endswith(" more wait in provider batches still running: the next batch run "
                         "collects them without paying again); run the same command again to "
                         "finish"), line
    assert fake.chat_requests == 0 and len(fake.batch_submissions()) == 2

    fake.end_batches()
    with fresh.connection() as conn:
        rerun = judge_dataset(conn, library_settings(config, fresh, fake), "jd", batch=True)
    assert rerun.complete and rerun.batch.resumed_batches == 2 and rerun.batch.batches == 0
    assert len(fake.batch_submissions()) == 2 and fake.chat_requests == 0


def test_a_run_with_llm_judges_at_the_shipped_rates_stops_within_3_s_25_s_in(
        fresh, tmp_path, fake):
    """LLM judges on the fake provider at the shipped rates, SIGTERM 25 s in: exit 143 within
    3 s, one line naming what is stored, no run left unfinished; the rerun asks for the rest."""
    from eval_harness.judges.dual.run import judge_dataset
    fast, home = judge_config(fresh, tmp_path, n_queries=40), tmp_path / "dagster"
    rates, concurrency = shipped_judge_limits()
    shipped = two_judges_config(tmp_path / "judged", tmp_path, concurrency=concurrency,
                                rate_limits=rates, name="shipped-rates.yaml")
    run = cli("--config", shipped, "run", env=child_env(fresh, DAGSTER_HOME=str(home),
                                                        **fake_keys(fake)), cwd=tmp_path)
    time.sleep(25)
    assert run.poll() is None, run.communicate()
    run.send_signal(signal.SIGTERM)
    signalled, sent = time.monotonic(), fake.chat_requests
    try:
        code, out, err = finish(run, timeout=30)
    finally:
        run.kill()  # a run that did not stop does not outlive the test
    took = time.monotonic() - signalled
    assert code == 143 and "Traceback" not in out, err
    line = interrupted_line(err)
    assert " judgements stored; the later steps did not run; " in line, line
    stored, judgements = kept_of("interrupted: " + line.split("judge_scores): ", 1)[1])
    assert not {"NOT_STARTED", "STARTING", "STARTED"} & set(dagster_run_statuses(home).values())
    assert took < 3.0, took  # the bound; the limiter's waits decide it
    assert fake.chat_requests <= sent + 2 * concurrency  # at most those on their way
    with fresh.connection() as conn:
        rerun = judge_dataset(conn, library_settings(fast, fresh, fake), "jd")
    assert rerun.complete and judgements == 2 * rerun.pairs
    assert rerun.provider_calls == judgements - stored  # only the rest


# ---------------------------------------------------------------------------------------
# At the shipped rate limits, 25 s in (issue #31): the calls queued at the rate limiter
# give up at the signal instead of sleeping out their slots one by one (70-180 s at
# anthropic's 50/min before)

SHIPPED_STOP_WITHIN = 3.0  # seconds from the signal to the exit, as the issue asks
SIGNAL_AFTER = 25.0        # seconds into the run


def signalled_at(process, seconds: float, signum: int, fake) -> tuple[float, int]:
    """Send ``signum`` ``seconds`` after ``process`` started (it must still run then).
    Returns when it was sent and how many requests the provider had received by then."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"the command ended (exit {process.returncode}) before the signal:"
                        f"\n{out}\n{err}")
        time.sleep(0.05)
    process.send_signal(signum)
    return time.monotonic(), fake.chat_requests


def fast_settings(config: Path, location, fake):
    """The settings of ``config`` with rate limits that let a library rerun finish in
    seconds (the rate limits change how fast, not what is asked)."""
    from dataclasses import replace

    from eval_harness.settings.judges import RateLimit

    settings = library_settings(config, location, fake)
    fast = {name: RateLimit(100000, None) for name in settings.judges.rate_limits}
    return replace(settings, judges=replace(settings.judges, rate_limits=fast))


@pytest.mark.parametrize("command, signum", [("judge", signal.SIGTERM), ("gate", signal.SIGINT)],
                         ids=["judge-SIGTERM", "gate-SIGINT"])
def test_at_the_shipped_rates_a_signal_25_s_in_ends_the_command_within_3_s(
        fresh, tmp_path, fake, command, signum):
    """Both judges (judge) or judge 1's two LLM gates (gate) at config.yaml's own rate limits
    and concurrency, with far more work than 25 s allow at those rates. The signal 25 s in
    ends the command within 3 s with its one line, and the rerun asks only for the rest."""
    from eval_harness.gates.answers import TimeWindow
    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.runner import run_quality_gates
    from eval_harness.judges.dual.run import judge_dataset

    rate_limits, concurrency = shipped_judge_limits()
    env = child_env(fresh, DAGSTER_HOME=str(tmp_path / "dagster"), **fake_keys(fake))
    if command == "judge":
        config = judge_config(fresh, tmp_path, n_queries=60, concurrency=concurrency,
                              rate_limits=rate_limits)
        argv = ("--config", config, "judge")
    else:
        answers = 60
        config = gate_config(fresh, tmp_path, answers, concurrency=concurrency,
                             rate_limits=rate_limits)
        argv = ("--config", config, "gate", "--since", GATE_DAY)
    run = cli(*argv, env=env, cwd=tmp_path)
    signalled, sent = signalled_at(run, SIGNAL_AFTER, signum, fake)
    code, _, err = finish(run, timeout=300)
    took = time.monotonic() - signalled
    assert code == EXIT_CODE[signum], err
    assert took < SHIPPED_STOP_WITHIN, f"{took:.1f} s after the signal\n{err}"
    line = interrupted_line(err)
    # a request already past the limiter when the signal came may still go (one per provider)
    assert fake.chat_requests - sent <= 2
    sent = fake.chat_requests
    assert sent > 10  # the run was well under way
    assert ledger_counts(fresh) == (sent, sent)  # every reply that arrived is stored

    settings = fast_settings(config, fresh, fake)
    if command == "judge":
        kept, judgements = kept_of(line)
        assert kept == sent
        assert line.endswith(" judgements stored; run the same command again to finish"), line
        with fresh.connection() as conn:
            rerun = judge_dataset(conn, settings, "jd")
        assert rerun.complete and judgements == 2 * rerun.pairs
        assert rerun.provider_calls == judgements - kept
    else:
        results = scalar(fresh, "SELECT count(*) FROM gate_results")
        assert results == 2 * answers + sent  # the rule gates' and every judged one stored
        assert line == (f"eval-harness: interrupted: 0 of {answers} answers gated ({results} "
                        "gate results stored); run the same command again to finish")
        rerun = run_quality_gates(fresh, TimeWindow.day(date.fromisoformat(GATE_DAY)),
                                  configured_gates(settings))
        assert {s.gate: s.evaluated_now for s in rerun.summaries} == {
            "format_compliance": 0, "citation_coverage": 0, "grounding": answers - sent,
            "answer_reward": answers}
        judgements = 2 * answers
    assert fake.chat_requests == judgements  # each asked once over both runs
    assert ledger_counts(fresh) == (judgements, judgements)


HOLD_HISTORY = """
    import sys, time
    import duckdb
    con = duckdb.connect(sys.argv[1])
    print("held", flush=True)
    time.sleep(600)  # until the test kills it
"""


def test_a_calibration_waiting_for_the_history_file_stops_at_once_and_writes_nothing(
        fresh, tmp_path):
    """`calibrate` at the shipped settings is done in seconds (SciFact: about 4 s), so its
    longest wait is for the DuckDB history file another process holds (`dagster dev`, a
    notebook): up to 15 s, inside the block that writes every output. The history is now
    opened before anything is written, and a signal ends that wait: nothing is written, and
    the rerun writes it all."""
    import threading

    from eval_harness.store.ingest import ingest_beir

    folder = beir(tmp_path / "folder", n_docs=20, n_queries=4, tag=tmp_path.name[-12:])
    with fresh.connection() as conn:
        ingest_beir(conn, folder, name="cal")
    history = tmp_path / "history.duckdb"
    config = tmp_path / "config.yaml"
    config.write_text(f"default_dataset: cal\ndatasets:\n  cal: {{path: {folder}}}\n"
                      f"history: {{duckdb_path: {history}}}\n")
    before = config.read_text()
    env = child_env(fresh)
    holder = python(HOLD_HISTORY, history, env=env, cwd=tmp_path)
    try:
        assert holder.stdout.readline().strip() == "held"
        run = spawn([CLI, "--config", config, "calibrate"], env, tmp_path)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(run.stderr.readline, "")))
        reader.start()
        wait_until(lambda: any("waiting for it" in line for line in lines),
                   what="calibrate to wait for the history file", processes=[run], timeout=60)
        time.sleep(1.0)  # well into the wait
        run.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        code = run.wait(timeout=30)
        took = time.monotonic() - signalled
        reader.join()
        run.stdout.read()
        err = "".join(lines)
    finally:
        holder.kill()
        holder.wait()
    assert code == 143, err
    assert took < SHIPPED_STOP_WITHIN, f"{took:.1f} s after the signal\n{err}"
    assert interrupted_line(err) == (
        "eval-harness: interrupted: nothing was written (the stop came before the outputs); "
        "run the same command again to finish")
    assert config.read_text() == before
    assert scalar(fresh, "SELECT count(*) FROM calibrated_weights") == 0

    code, _, err = finish(cli("--config", config, "calibrate", env=env, cwd=tmp_path))
    assert code in (0, 1), err  # 1: the verdict on this tiny dataset is "failure"
    assert scalar(fresh, "SELECT count(*) FROM calibrated_weights") == 1
    import duckdb

    with duckdb.connect(str(history)) as con:
        assert con.execute("SELECT count(*) FROM calibration_grid_history").fetchone()[0] > 0
