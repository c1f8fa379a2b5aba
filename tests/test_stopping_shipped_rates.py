"""At the shipped rate limits (config.yaml's own), 25 s into the run, a signal ends `judge`,
`gate`, `run` and `calibrate` within 3 s: every wait (the rate limiter's slots,
the history file another process holds) gives up at the signal instead of sleeping it out
(70-180 s at anthropic's 50/min before). Apart from tests/test_stopping_signals.py, whose
commands run at rates that let them finish in seconds, so the two files run side by side
on the suite's two workers."""

from __future__ import annotations

import signal
import time
from datetime import date
from pathlib import Path

import pytest

from colliding_processes import (
    CLI,
    beir,
    child_env,
    cli,
    dagster_run_statuses,
    fake_keys,
    finish,
    ledger_counts,
    python,
    scalar,
    shipped_judge_limits,
    spawn,
    two_judges_config,
    wait_until,
)
from signal_runs import (
    EXIT_CODE,
    GATE_DAY,
    gate_config,
    interrupted_line,
    judge_config,
    kept_of,
    library_settings,
)

pytestmark = pytest.mark.slow


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
# At the shipped rate limits, 25 s in: the calls queued at the rate limiter
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
    from eval_harness.gates.registry import configured_gates
    from eval_harness.gates.runner import run_quality_gates
    from eval_harness.gates.window import TimeWindow
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

    from eval_harness.datasets.ingest import ingest_beir

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


def test_ground_truth_generate_at_the_shipped_rates_stops_within_3_s_and_the_rerun_finishes(
        fresh, tmp_path, fake):
    """`ground-truth generate` with the LLM writer and critic at the shipped rates (the critic
    at anthropic's 50/min), Ctrl-C once queries are stored: exit 130 within 3 s with one line,
    the stored queries kept, and the rerun stores only the rest, sending again at most the
    requests that were on their way."""
    import json as json_lib

    from colliding_processes import ctrl_c, judges_yaml
    from corpus_only import corpus_only_folder
    from eval_harness.datasets.ingest import ingest_beir
    from eval_harness.query_sources.generate import generate_queries

    folder = corpus_only_folder(tmp_path / "corpus", n_docs=150)
    with fresh.connection() as conn:
        ingest_beir(conn, folder, name="jd")
    rates, concurrency = shipped_judge_limits()
    datasets = f"default_dataset: jd\ndatasets:\n  jd: {{path: {folder}}}\n"
    shipped = tmp_path / "shipped-rates.yaml"
    shipped.write_text(datasets + judges_yaml(concurrency, rates), encoding="utf-8")
    fast = tmp_path / "fast.yaml"
    fast.write_text(datasets + judges_yaml(concurrency), encoding="utf-8")
    count = "SELECT count(*) FROM ground_truth WHERE dataset = 'jd' AND origin = 'generated'"
    run = cli("--config", shipped, "ground-truth", "generate", "--queries", "40",
              env=child_env(fresh, **fake_keys(fake)), cwd=tmp_path, start_new_session=True)
    try:
        wait_until(lambda: scalar(fresh, count) > 0, what="a batch of queries stored",
                   timeout=90, processes=[run])
        ctrl_c(run)
        signalled = time.monotonic()
        code, out, err = finish(run, timeout=30)
    finally:
        run.kill()
    took = time.monotonic() - signalled
    assert code == 130, err
    line = interrupted_line(err)
    assert "generated queries of 'jd' stored before the stop are kept" in line, line
    assert took < 3.0, took
    kept = scalar(fresh, count)
    assert 0 < kept < 40
    before = [json_lib.dumps(r.body, sort_keys=True) for r in fake.chat_records()]
    with fresh.connection() as conn:
        rerun = generate_queries(conn, library_settings(fast, fresh, fake), "jd", n=40)
    assert rerun.already == kept and rerun.new == 40 - kept
    assert scalar(fresh, count) == 40
    after = [json_lib.dumps(r.body, sort_keys=True) for r in fake.chat_records()][len(before):]
    assert len(set(after) & set(before)) <= 2 * concurrency  # only those on their way
