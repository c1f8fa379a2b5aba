"""The review page (eval_harness.agreement.review_page) served in the test's process against the
real store: what /api/next shows (no judge scores), a verdict stored at once where `review
import` stores it and with its checks (bad verdict, unknown pair, stale pair: the import's
words, nothing stored), skips, progress, and who may talk to it (127.0.0.1 only, the Host
header, the page's token and Origin).

The page's connection is not the one the test reads with, and is not in autocommit: a verdict
counts as stored only once the page has committed it.
"""

from __future__ import annotations

import json
import re
import socket

import pytest

from eval_harness.agreement.review import export_review_csv, import_review_csv
from eval_harness.agreement.review_file import ReviewFileError
from eval_harness.agreement.review_page import (
    CONTENT_SECURITY_POLICY,
    QUEUE,
    SAMPLE,
    SAMPLE_SCORES_HIDDEN,
    ReviewServer,
    ReviewSession,
    page_html,
)
from eval_harness.agreement.sample import export_sample_csv, import_sample_csv
from eval_harness.errors import InvalidInput
from review_pages import (
    QUEUED,
    SAMPLED,
    SAMPLED_QUERIES,
    PageClient,
    judged_with_sample_and_queue,
    served_page,
)
from review_store import disagreeing_scores, read_csv, review_rows, set_scores, write_csv


@pytest.fixture
def judged(db, dataset, tmp_path):
    judged_with_sample_and_queue(db, dataset["name"], tmp_path)
    return dataset["name"]


@pytest.fixture
def page_conn(store):
    with store.connection() as conn:  # not autocommit: the page must commit by itself
        yield conn


def sample_rows(db, name):
    return db.execute("""SELECT g.external_id, d.external_id, h.verdict, h.reviewer, h.note,
                                h.labelled_at IS NOT NULL
                         FROM human_sample h JOIN ground_truth g ON g.id = h.ground_truth_id
                         JOIN l2_insights d ON d.id = h.doc_id
                         WHERE h.dataset = %s ORDER BY 1, 2""", (name,)).fetchall()


def queue_row(db, name, query, doc):
    return db.execute("""SELECT r.status, r.verdict, r.reviewer, r.note,
                                r.adjudicated_at IS NOT NULL
                         FROM judge_review r JOIN ground_truth g ON g.id = r.ground_truth_id
                         JOIN l2_insights d ON d.id = r.doc_id
                         WHERE g.dataset = %s AND g.external_id = %s AND d.external_id = %s""",
                      (name, query, doc)).fetchone()


def ids(pair):
    return pair["query_external_id"], pair["doc_external_id"]


def import_problem(tmp_path, export, importer, db, name, edit) -> str:
    """The problem `review import` names for an exported file with ``edit`` made to its first
    row: what the page must say for the same verdict."""
    rows = read_csv(export(tmp_path / "exported.csv"))
    edit(rows[0])
    with pytest.raises(ReviewFileError) as caught:
        importer(db, name, write_csv(tmp_path / "edited.csv", rows))
    ((_, problem),) = caught.value.problems
    return problem


# ---------------------------------------------------------------------------------------
# What the page shows


def test_the_pairs_come_one_at_a_time_sample_first_without_the_judges_scores(
        db, judged, page_conn):
    with served_page(page_conn, judged) as server:
        client = PageClient(server.port)
        shown = client.next()
        assert shown["dataset"] == judged
        assert shown["progress"]["text"] == ("0 of 8 labelled · 8 left (human sample 0 of 4, "
                                             "review queue 0 of 4)")
        assert ids(shown["pair"]) == SAMPLED[0] and shown["pair"]["where"] == "human sample"
        assert shown["pair"]["query"] == "question 4 | about topic 0"
        assert shown["pair"]["document"] == "Document 7 on topic 3"
        # the queue after the sample; its scores (0.9 and 0.1) and models are not sent
        for pair in SAMPLED:
            sampled = client.next()["pair"]
            assert ids(sampled) == pair
            assert client.verdict(sampled, "skip")[0] == 200
        status, raw = client.request("GET", "/api/next")
        text = json.dumps(raw)
        assert status == 200 and ids(raw["pair"]) == QUEUED[0]
        assert raw["pair"]["where"] == "review queue"
        assert set(raw["pair"]) == {"list", "where", "query_id", "doc_id", "query_external_id",
                                    "doc_external_id", "query", "document"}
        assert "0.9" not in text and "0.1" not in text and "judge-" not in text
        assert "score" not in text
        # the scores come with the reply to the verdict, once it is stored
        status, reply = client.verdict(raw["pair"], "not relevant")
        assert (status, reply) == (200, {"stored": True, "verdict": "not relevant",
                                         "judges": "judge1 0.9 · judge2 0.1"})
        assert client.next()["progress"]["text"] == (
            "1 of 8 labelled · 3 left · 4 skipped (human sample 0 of 4, review queue 1 of 4)")


def test_the_page_is_static_html_whose_script_sets_text_only():
    page = page_html("TOKEN")
    assert '<meta name="review-token" content="TOKEN">' in page
    assert "innerHTML" not in page and "outerHTML" not in page and "insertAdjacent" not in page
    assert "http" not in page.replace("http-equiv", "")  # no external asset of any kind
    assert "script-src 'sha256-" in CONTENT_SECURITY_POLICY
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY


def test_the_page_carries_no_data_and_its_headers_forbid_framing_and_sniffing(
        db, judged, page_conn):
    with served_page(page_conn, judged) as server:
        client = PageClient(server.port)
        status, page = client.request("GET", "/", token=None)
        headers = client.headers
    assert status == 200 and judged not in page and "question" not in page
    assert client.token in page
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Cache-Control"] == "no-store"
    assert "Access-Control-Allow-Origin" not in headers  # no other site may read a reply


# ---------------------------------------------------------------------------------------
# A verdict is stored at once, where import stores it


def test_a_sample_verdict_is_stored_at_once_as_importing_the_sample_file_stores_it(
        db, judged, page_conn, tmp_path):
    with served_page(page_conn, judged, lists=(SAMPLE,)) as server:
        client = PageClient(server.port)
        pair = client.next()["pair"]
        status, reply = client.verdict(pair, "Relevant")
        # a sampled pair's scores never reach the page: PPI needs labels independent of them
        assert status == 200 and reply["judges"] == SAMPLE_SCORES_HIDDEN
        assert "0." not in json.dumps(reply)
        # committed before the reply: another connection reads it
        assert sample_rows(db, judged)[0] == (*SAMPLED[0], "relevant", "ana", None, True)
        assert ids(client.next()["pair"]) == SAMPLED[1]
    # the same verdict through the file lands the same way
    rows = read_csv(export_sample_csv(db, judged, tmp_path / "s.csv", n=SAMPLED_QUERIES).path)
    assert rows[0]["verdict"] == "relevant" and rows[0]["reviewer"] == "ana"
    rows[1].update(verdict="not relevant", reviewer="ana")
    import_sample_csv(db, judged, write_csv(tmp_path / "s.csv", rows))
    assert sample_rows(db, judged)[1] == (*SAMPLED[1], "not relevant", "ana", None, True)
    assert [queue_row(db, judged, *pair)[0] for pair in QUEUED] == ["pending"] * 4


def test_a_queue_verdict_is_stored_at_once_and_review_export_shows_it(
        db, judged, page_conn, tmp_path):
    with served_page(page_conn, judged, lists=(QUEUE,), reviewer="bo") as server:
        client = PageClient(server.port)
        pair = client.next()["pair"]
        assert ids(pair) == QUEUED[0]
        assert client.verdict(pair, "relevant")[0] == 200
        assert queue_row(db, judged, *QUEUED[0]) == ("adjudicated", "relevant", "bo", None,
                                                     True)
        assert queue_row(db, judged, *QUEUED[1])[:2] == ("pending", None)
        exported = read_csv(export_review_csv(db, judged, tmp_path / "r.csv").path)
    assert [(r["query_external_id"], r["verdict"], r["reviewer"]) for r in exported] == [
        ("q1", "relevant", "bo"), ("q3", "", ""), ("q5", "", ""), ("q7", "", "")]
    assert sample_rows(db, judged)[0][2] is None  # the sample is the sample's


def test_a_page_without_a_reviewer_leaves_the_column_blank(db, judged, page_conn):
    with served_page(page_conn, judged, lists=(QUEUE,), reviewer=None) as server:
        client = PageClient(server.port)
        assert client.verdict(client.next()["pair"], "not relevant")[0] == 200
    assert queue_row(db, judged, *QUEUED[0])[:3] == ("adjudicated", "not relevant", None)


def test_a_skip_stores_nothing_and_the_page_moves_on(db, judged, page_conn):
    with served_page(page_conn, judged) as server:
        client = PageClient(server.port)
        first = client.next()["pair"]
        assert client.verdict(first, "skip") == (200, {"stored": False, "skipped": True})
        shown = client.next()
        assert ids(shown["pair"]) == SAMPLED[1]
        assert shown["progress"]["skipped"] == 1 and shown["progress"]["left"] == 7
        assert server.session.kept() == (
            "every verdict given on the page is stored (0 this session: 0 in the human "
            "sample, 0 in the review queue; 1 pair(s) skipped or refused, still to label)")
    assert [row[2] for row in sample_rows(db, judged)] == [None] * 4


# ---------------------------------------------------------------------------------------
# Refused with the import's words, nothing stored


@pytest.mark.parametrize("list_name", [SAMPLE, QUEUE])
def test_a_bad_verdict_is_refused_in_the_words_of_import_and_stores_nothing(
        db, judged, page_conn, tmp_path, list_name):
    if list_name == SAMPLE:
        expected = import_problem(
            tmp_path, lambda path: export_sample_csv(db, judged, path, n=2).path,
            import_sample_csv, db, judged, lambda row: row.update(verdict="maybe"))
    else:
        expected = import_problem(
            tmp_path, lambda path: export_review_csv(db, judged, path).path,
            import_review_csv, db, judged, lambda row: row.update(verdict="maybe"))
    before = (sample_rows(db, judged), review_rows(db, judged))
    with served_page(page_conn, judged, lists=(list_name,)) as server:
        client = PageClient(server.port)
        status, reply = client.verdict(client.next()["pair"], "maybe")
    assert status == 422
    assert expected.startswith("verdict 'maybe' is not 'relevant' or 'not relevant'")
    assert reply["error"].startswith(f"not stored: {expected}; this page leaves the pair out")
    assert (sample_rows(db, judged), review_rows(db, judged)) == before


@pytest.mark.parametrize("list_name, where", [(SAMPLE, "the human sample"),
                                               (QUEUE, "the review queue")])
def test_an_unknown_pair_is_refused_in_the_words_of_import_and_stores_nothing(
        db, judged, page_conn, tmp_path, list_name, where):
    export = ((lambda path: export_sample_csv(db, judged, path, n=2).path) if list_name == SAMPLE
              else (lambda path: export_review_csv(db, judged, path).path))
    importer = import_sample_csv if list_name == SAMPLE else import_review_csv
    expected = import_problem(tmp_path, export, importer, db, judged,
                              lambda row: row.update(doc_id="999999999", verdict="relevant"))
    assert expected.endswith(f"is not in {where} of dataset '{judged}'")
    before = (sample_rows(db, judged), review_rows(db, judged))
    with served_page(page_conn, judged, lists=(list_name,)) as server:
        client = PageClient(server.port)
        pair = dict(client.next()["pair"], doc_id=999999999)
        status, reply = client.verdict(pair, "relevant")
        assert status == 422 and reply["error"].startswith(f"not stored: {expected};")
        status, reply = client.verdict(dict(pair, query_id="q1"), "relevant")
        assert status == 422 and "query_id 'q1' is not a whole number" in reply["error"]
        status, reply = client.verdict(dict(pair, list="people"), "relevant")
        assert status == 422 and reply["error"].startswith(
            f"not stored: list must be one of ['{list_name}']")
    assert (sample_rows(db, judged), review_rows(db, judged)) == before


def test_a_pair_the_judges_rescored_after_the_page_showed_it_is_refused_as_stale(
        db, judged, page_conn, tmp_path):
    # what import says of a row exported before the judges re-scored its pair
    rows = read_csv(export_review_csv(db, judged, tmp_path / "r.csv").path)
    rows[0]["verdict"] = "relevant"
    old_file = write_csv(tmp_path / "old.csv", rows)
    with served_page(page_conn, judged, lists=(QUEUE,)) as server:
        client = PageClient(server.port)
        pair = client.next()["pair"]
        assert ids(pair) == QUEUED[0]
        scores = disagreeing_scores()
        scores["q1"][0] = ("d1", 0.95, 0.05)
        set_scores(db, judged, scores)
        with pytest.raises(ReviewFileError) as caught:
            import_review_csv(db, judged, old_file)
        ((_, stale),) = caught.value.problems
        assert stale.startswith("the row is stale")
        before = review_rows(db, judged)
        status, reply = client.verdict(pair, "relevant")
        assert status == 422 and reply["error"].startswith(f"not stored: {stale};")
        assert review_rows(db, judged) == before
        # the page does not offer it again (it would stay stale until the queue is refreshed)
        assert ids(client.next()["pair"]) == QUEUED[1]


def test_a_malformed_request_stores_nothing(db, judged, page_conn):
    with served_page(page_conn, judged) as server:
        client = PageClient(server.port)
        for raw, status, start in [
                (b"{not json", 400, "not stored: the request body is not JSON."),
                (b"[1, 2]", 422, "not stored: the request is not a JSON object"),
                (b'{"list": "sample", "query_id": 1, "doc_id": 2, "verdict": 1}', 422,
                 "not stored: verdict must be text"),
                (b'{"list": "sample", "query_id": 1, "doc_id": 2, "verdict": " "}', 422,
                 "not stored: the verdict is blank"),
                (b"x" * (64 * 1024 + 1), 400, "not stored: a verdict is a JSON body of at most")]:
            code, reply = client.request("POST", "/api/verdict", raw=raw)
            assert (code, reply["error"][:len(start)]) == (status, start)
    assert [row[2] for row in sample_rows(db, judged)] == [None] * 4


# ---------------------------------------------------------------------------------------
# Who may talk to it


def test_it_listens_on_127_0_0_1_only_and_port_0_picks_a_free_port(db, judged, page_conn):
    with served_page(page_conn, judged) as server:
        assert server.server_address[0] == "127.0.0.1" and server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}/"
        for family, address in [(socket.AF_INET, "127.0.0.2"), (socket.AF_INET6, "::1")]:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.settimeout(2)
                with pytest.raises(OSError):  # refused: nothing listens there
                    probe.connect((address, server.port))


def test_a_port_in_use_is_refused_in_one_sentence(db, judged, page_conn):
    session = ReviewSession(page_conn, judged, reviewer="ana")
    with ReviewServer(session, port=0) as taken, pytest.raises(InvalidInput) as refused:
        ReviewServer(session, port=taken.port)
    assert re.fullmatch(rf"port {taken.port} of 127\.0\.0\.1 is in use .*--port 0 for a free "
                        r"one\.", str(refused.value))
    with pytest.raises(InvalidInput, match=r"^--port must be between 0 and 65535"):
        ReviewServer(session, port=70000)


@pytest.mark.parametrize("host", ["evil.example:{port}", "127.0.0.1:{other}", "127.0.0.1",
                                  "[::1]:{port}", None])
def test_a_request_for_another_host_is_refused_whatever_it_carries(db, judged, page_conn,
                                                                    host):
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends its
    own host name; it gets neither the page (nor its token) nor a verdict stored."""
    with served_page(page_conn, judged) as server:
        client = PageClient(server.port)
        pair = client.next()["pair"]
        named = None if host is None else host.format(port=server.port, other=server.port + 1)
        status, page = client.request("GET", "/", host=named, token=None)
        assert status == 403 and client.token not in json.dumps(page)
        assert page["error"].startswith(f"refused: this page answers only at {server.url}")
        assert client.request("GET", "/api/next", host=named)[0] == 403
        assert client.verdict(pair, "relevant", host=named)[0] == 403
        assert client.request("GET", "/", host=f"localhost:{server.port}", token=None)[0] == 200
    assert [row[2] for row in sample_rows(db, judged)] == [None] * 4


@pytest.mark.parametrize("headers", [{"token": None}, {"token": "guessed"},
                                     {"origin": "http://evil.example"},
                                     {"origin": "http://127.0.0.1:1"}])
def test_a_verdict_without_the_pages_token_or_from_another_origin_is_refused(
        db, judged, page_conn, headers):
    with served_page(page_conn, judged) as server:
        client = PageClient(server.port)
        pair = client.next()["pair"]
        status, reply = client.verdict(pair, "relevant", **headers)
        assert status == 403 and reply["error"].startswith("refused: ")
        assert reply["error"].endswith("nothing was stored.")
        if "token" in headers:  # what the page shows needs the token too
            assert client.request("GET", "/api/next", **headers)[0] == 403
        # the page's own request, without an Origin (not a browser), is taken
        assert client.verdict(pair, "relevant", origin=None)[0] == 200
    assert [row[2] for row in sample_rows(db, judged)] == ["relevant", None, None, None]


def test_a_stopped_page_refuses_what_comes_after(db, judged, page_conn):
    with served_page(page_conn, judged) as server:
        client = PageClient(server.port)
        pair = client.next()["pair"]
        server.session.close()
        status, reply = client.verdict(pair, "relevant")
    assert (status, reply) == (503, {"error": "the review page was stopped; nothing was "
                                              "stored."})
    assert [row[2] for row in sample_rows(db, judged)] == [None] * 4
