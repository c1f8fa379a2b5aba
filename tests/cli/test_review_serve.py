"""`eval-harness review serve` (eval_harness.cli.review) as a user runs it: the one address
line, a verdict stored through the page, SIGTERM's exit 143 with its one line, the reviewer
the page stores by default, and the one-sentence refusals (a port in use, an unknown dataset).
The page in a browser: tests/agreement/test_review_page_browser.py."""

from __future__ import annotations

import getpass
import signal

import pytest

from cli_runs import run_cli
from colliding_processes import child_env, cli, finish
from eval_harness.agreement.review_page import ReviewServer, ReviewSession
from review_pages import QUEUED, PageClient, judged_with_sample_and_queue, stopped, url_line
from review_store import read_csv, write_agreement_config

pytestmark = pytest.mark.project(config=write_agreement_config)


def test_sigterm_stops_the_page_with_143_and_says_the_verdicts_are_kept(project, db,
                                                                        tmp_path):
    name = project.default_dataset
    judged_with_sample_and_queue(db, name, tmp_path)
    server = cli("--config", project, "review", "serve", "--port", "0", "--queue-only",
                 env=child_env(project.store), cwd=project.folder)
    try:
        line, port = url_line(server, timeout=60)
        assert "0 of 4 labelled · 4 left (review queue 0 of 4)" in line
        client = PageClient(port)
        pair = client.next()["pair"]
        assert (pair["query_external_id"], pair["doc_external_id"]) == QUEUED[0]
        assert client.verdict(pair, "not relevant")[0] == 200
        code, out, err, stopped_after = stopped(
            server, lambda process: process.send_signal(signal.SIGTERM))
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate(timeout=10)
    assert code == 143, err
    assert stopped_after < 5.0, stopped_after
    assert out == "" and err.splitlines() == [
        "eval-harness: interrupted: every verdict given on the page is stored (1 this "
        "session: 1 in the review queue); run `eval-harness review serve` again to label the "
        "rest"]
    code, _, err = finish(cli("--config", project, "review", "export", tmp_path / "queue.csv",
                              env=child_env(project.store), cwd=project.folder), timeout=90)
    assert code == 0, err
    rows = read_csv(tmp_path / "queue.csv")
    assert [(r["query_external_id"], r["verdict"], r["reviewer"]) for r in rows][0] == (
        "q1", "not relevant", getpass.getuser())  # the OS user, as --reviewer was not given


def test_a_port_in_use_or_an_unknown_dataset_is_one_sentence_and_exit_2(project, db, capsys,
                                                                       tmp_path, store):
    name = project.default_dataset
    judged_with_sample_and_queue(db, name, tmp_path)
    with store.connection(autocommit=True) as conn, ReviewServer(
            ReviewSession(conn, name, reviewer=None), port=0) as taken:
        code, out, err = run_cli(capsys, "--config", project, "review", "serve", "--port",
                                 taken.port)
    assert (code, out) == (2, "")
    assert err == (f"eval-harness: error: port {taken.port} of 127.0.0.1 is in use (another "
                   "review page, or another program); pass another --port, or --port 0 for a "
                   "free one.\n")
    code, _, err = run_cli(capsys, "--config", project, "review", "serve", "--dataset", "nope")
    assert code == 2 and err.count("\n") == 1 and "'nope'" in err
    with pytest.raises(SystemExit) as stopped:
        run_cli(capsys, "--config", project, "review", "serve", "--sample-only", "--queue-only")
    assert stopped.value.code == 2
    assert "argument --queue-only: not allowed with argument --sample-only" in \
        capsys.readouterr().err
