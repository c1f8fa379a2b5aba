"""A run the user stops stops: SIGINT / SIGTERM to `judge`, `gate`, `ingest`, `calibrate` and
`run`.

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

import signal
import time
from datetime import date

import pytest

from colliding_processes import (
    beir,
    child_env,
    cli,
    dagster_run_statuses,
    fake_keys,
    finish,
    held,
    ledger_counts,
    lock_waiters,
    scalar,
    wait_until,
)
from signal_runs import (
    EXIT_CODE,
    GATE_DAY,
    STOPPED_WITHIN,
    gate_config,
    insert_answers,
    interrupted_line,
    judge_config,
    kept_of,
    library_settings,
    stop_after_replies,
)

# ---------------------------------------------------------------------------------------
# judge: judgements kept


@pytest.mark.slow
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


@pytest.mark.slow
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

@pytest.mark.slow
@pytest.mark.parametrize("window, signum", [(["--since", GATE_DAY], signal.SIGTERM),
                                            (["--partition", GATE_DAY], signal.SIGINT)],
                         ids=["since-SIGTERM", "partition-SIGINT"])
def test_a_stopped_gate_run_stores_what_it_evaluated_and_the_rerun_does_the_rest(
        fresh, tmp_path, fake, window, signum):
    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.runner import run_quality_gates
    from eval_harness.gates.window import TimeWindow

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
    from eval_harness.datasets.ingest import ingest_beir

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


@pytest.mark.slow
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


@pytest.mark.slow
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
