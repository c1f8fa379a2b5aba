"""The review page as a person uses it: `eval-harness review serve` started as a user starts
it, its printed address opened in headless Chromium (tools/ui_check/browser.py, as the
Dagster UI test drives it: the Debian packages chromium and chromium-driver), five pairs
labelled and one skipped with the keyboard alone, Ctrl-C, and the verdicts found again by
`review export` and `review sample` through the command line.
"""

from __future__ import annotations

import re

import pytest

from colliding_processes import child_env, cli, ctrl_c, finish
from eval_harness.agreement.review_page import SAMPLE_SCORES_HIDDEN
from review_pages import QUEUED, SAMPLED, judged_with_sample_and_queue, stopped, url_line
from review_store import disagreeing_scores, read_csv, write_agreement_config
from tools.ui_check.browser import browser_missing

pytestmark = pytest.mark.project(config=write_agreement_config)

STOPPED_WITHIN = 5.0  # seconds from Ctrl-C to the exit, the interpreter's exit included
# Markup in every document: the page must show it as text, never run or render it.
HOSTILE = ('<img src=x onerror="document.title=\'ran\'"><b>bold</b> & <script>'
           'document.title="ran"</script> ')
KEYS = {"r": "relevant", "n": "not relevant", "s": None}


def judges_line(query: str, doc: str) -> str:
    ((_, s1, s2),) = [row for row in disagreeing_scores()[query] if row[0] == doc]
    return f"judge1 {s1:.3g} · judge2 {s2:.3g}"


def cli_run(*args, project, timeout=90) -> str:
    code, out, err = finish(cli("--config", project, *args, env=child_env(project.store),
                                cwd=project.folder), timeout=timeout)
    assert code == 0, err
    return out


@pytest.mark.slow
@pytest.mark.skipif(browser_missing() is not None, reason=browser_missing() or "")
def test_five_pairs_labelled_with_the_keyboard_are_stored_and_ctrl_c_stops_the_page(
        project, db, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tools.ui_check.browser import headless_chromium

    name = project.default_dataset
    judged_with_sample_and_queue(db, name, tmp_path)
    db.execute("UPDATE l2_insights SET content = %s || content WHERE dataset = %s",
               (HOSTILE, name))
    server = cli("--config", project, "review", "serve", "--port", "0", "--reviewer", "ana",
                 env=child_env(project.store), cwd=project.folder, start_new_session=True)
    try:
        line, port = url_line(server, timeout=60)
        assert line == (f"review page of '{name}' at http://127.0.0.1:{port}/: 0 of 8 labelled "
                        "· 8 left (human sample 0 of 4, review queue 0 of 4); keys r relevant, "
                        "n not relevant, s skip; each verdict is stored at once; Ctrl-C stops "
                        "it")
        with headless_chromium(tmp_path / "chromedriver.log", tmp_path / "scratch") as driver:
            driver.get(f"http://127.0.0.1:{port}/")
            wait = WebDriverWait(driver, 15)

            def text(element_id: str) -> str:
                return driver.find_element(By.ID, element_id).text

            wait.until(lambda _: text("progress").startswith("0 of 8 labelled"))
            body = driver.find_element(By.TAG_NAME, "body")
            # before any verdict: no score anywhere on the page
            assert "judge1" not in body.text and not driver.find_element(By.ID,
                                                                         "last").is_displayed()
            # the document's markup is text: nothing of it rendered or run
            assert text("document").startswith(HOSTILE.strip())
            assert driver.find_elements(By.CSS_SELECTOR, "#document *") == []
            assert driver.title == "eval-harness review"

            given = []
            for key, pair in zip("rnsrnr", [*SAMPLED, *QUEUED]):
                shown = f"query {pair[0]} · document {pair[1]}"
                assert text("ids") == shown
                assert "judge1" not in text("pair")  # this pair's scores: not yet
                before = text("progress")
                body.send_keys(key)
                wait.until(lambda _, before=before: text("progress") != before)
                if KEYS[key] is None:
                    assert text("last") == f"last pair ({shown}): skipped"
                else:
                    judges = judges_line(*pair) if pair in QUEUED else SAMPLE_SCORES_HIDDEN
                    assert text("last") == (f"last pair ({shown}): {KEYS[key]}, stored · "
                                            f"judges: {judges}")
                    given.append((*pair, KEYS[key]))
                if len(given) == 1:  # what a person sees after a verdict, kept with the test
                    assert driver.save_screenshot(str(tmp_path / "after-a-verdict.png"))
            assert text("progress") == ("5 of 8 labelled · 2 left · 1 skipped (human sample "
                                        "3 of 4, review queue 2 of 4)")
            assert text("error") == "" and driver.title == "eval-harness review"
        code, out, err, stopped_after = stopped(server, ctrl_c)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate(timeout=10)
    assert code == 130, err
    assert stopped_after < STOPPED_WITHIN
    assert out == ""  # nothing after the address line
    assert err.splitlines() == [
        "eval-harness: interrupted: every verdict given on the page is stored (5 this "
        "session: 3 in the human sample, 2 in the review queue; 1 pair(s) skipped or refused, "
        "still to label); run `eval-harness review serve` again to label the rest"]

    # the verdicts, read back the way a user reads them
    out = cli_run("review", "export", tmp_path / "queue.csv", project=project)
    assert re.search(r"exported 4 pair\(s\) \(2 pending, 2 adjudicated\)", out), out
    cli_run("review", "sample", tmp_path / "sample.csv", "--n", "2", project=project)
    found = [(row["query_external_id"], row["doc_external_id"], row["verdict"])
             for path in ("sample.csv", "queue.csv") for row in read_csv(tmp_path / path)
             if row["verdict"]]
    assert found == given
    assert {row["reviewer"] for path in ("sample.csv", "queue.csv")
            for row in read_csv(tmp_path / path) if row["verdict"]} == {"ana"}
