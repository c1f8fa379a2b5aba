"""The review page's tests (tests/agreement/test_review_page*.py): the review dataset with a
human sample and a review queue, a page served in the test's process, an HTTP client that
sends exactly the headers a test names, and the first line of a ``review serve`` process.
"""

from __future__ import annotations

import http.client
import json
import re
import selectors
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from eval_harness.agreement.review import queue_disagreements
from eval_harness.agreement.review_page import TOKEN_HEADER, ReviewServer, ReviewSession
from eval_harness.agreement.sample import export_sample_csv
from review_store import disagreeing_scores, set_scores

SAMPLED_QUERIES = 2  # seed 0 draws q4 and q6: pairs q4/d7, q4/d8, q6/d11, q6/d12
# The queue: judge 2 flips the relevant document of q1, q3, q5 and q7 (0.9 against 0.1).
QUEUED = [("q1", "d1"), ("q3", "d5"), ("q5", "d9"), ("q7", "d13")]
SAMPLED = [("q4", "d7"), ("q4", "d8"), ("q6", "d11"), ("q6", "d12")]
URL_LINE = re.compile(r"http://127\.0\.0\.1:(\d+)/")


def judged_with_sample_and_queue(db, name: str, folder: Path) -> None:
    """The review dataset ``name`` judged (:func:`review_store.disagreeing_scores`), its
    review queue refreshed and a human sample of :data:`SAMPLED_QUERIES` queries drawn."""
    set_scores(db, name, disagreeing_scores())
    queue_disagreements(db, name, threshold=0.4)
    export_sample_csv(db, name, folder / "drawn-sample.csv", n=SAMPLED_QUERIES, seed=0)


@contextmanager
def served_page(conn, dataset: str, *, reviewer: str | None = "ana", lists=None):
    """A :class:`ReviewServer` on a free port serving ``dataset`` from ``conn``, in a thread
    of this process; shut down when the block ends."""
    options = {} if lists is None else {"lists": lists}
    session = ReviewSession(conn, dataset, reviewer=reviewer, **options)
    with ReviewServer(session, port=0) as server:
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                  daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.shutdown()
            thread.join(timeout=10)


class PageClient:
    """Requests to a page on 127.0.0.1:``port`` as a browser on this machine sends them: Host
    ``127.0.0.1:PORT``, the page's token (read from the page, as its script does) and its
    Origin on POSTs; each can be changed or left out per request."""

    def __init__(self, port: int):
        self.port = port
        self.origin = f"http://127.0.0.1:{port}"
        self.headers: dict[str, str] = {}  # of the last reply
        status, page = self.request("GET", "/", token=None)
        assert status == 200, page
        self.token = re.search(r'<meta name="review-token" content="([^"]+)">', page).group(1)

    def request(self, method: str, path: str, body=None, *, host: str | None = "",
                token: str | None = "", origin: str | None = "", raw: bytes | None = None):
        """(status, parsed JSON or the text of an HTML reply). ``host``/``token``/``origin``
        "" means the page's own, None leaves the header out."""
        headers = {}
        if host is not None:
            headers["Host"] = host or f"127.0.0.1:{self.port}"
        if token is not None:
            headers[TOKEN_HEADER] = token or self.token
        if origin is not None and method == "POST":
            headers["Origin"] = origin or self.origin
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if data is not None:
            headers["Content-Type"] = "application/json"
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            if host is None:  # http.client adds one unless told not to
                connection.putrequest(method, path, skip_host=True)
                for name, value in headers.items():
                    connection.putheader(name, value)
                connection.putheader("Content-Length", str(len(data or b"")))
                connection.endheaders(data)
            else:
                connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            self.headers = dict(response.getheaders())
            text = response.read().decode("utf-8")
            kind = response.getheader("Content-Type", "")
            return response.status, json.loads(text) if kind.startswith("application/json") \
                else text
        finally:
            connection.close()

    def next(self) -> dict:
        status, reply = self.request("GET", "/api/next")
        assert status == 200, reply
        return reply

    def verdict(self, pair: dict, verdict: str, **options):
        return self.request("POST", "/api/verdict", {
            "list": pair["list"], "query_id": pair["query_id"], "doc_id": pair["doc_id"],
            "verdict": verdict}, **options)


def url_line(process, timeout: float) -> tuple[str, int]:
    """The first line ``process`` prints on stdout, and the port of the URL in it; fails with
    what it printed when no such line comes within ``timeout`` seconds."""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if selector.select(timeout=0.1):
                line = process.stdout.readline()
                if not line:
                    break
                found = URL_LINE.search(line)
                assert found, line
                return line.rstrip("\n"), int(found.group(1))
            if process.poll() is not None:
                break
    finally:
        selector.close()
    process.kill()
    out, err = process.communicate(timeout=10)
    raise AssertionError(f"no URL line within {timeout} s (exit {process.returncode}):\n"
                         f"{out}\n{err}")


def stopped(server, stop) -> tuple[int, str, str, float]:
    """Stop a served page with ``stop(server)`` (Ctrl-C to its group, or SIGTERM): its exit
    code, stdout, stderr and the seconds from the signal to its end."""
    from colliding_processes import finish

    stop(server)
    signalled = time.monotonic()
    code, out, err = finish(server, timeout=30)
    return code, out, err, time.monotonic() - signalled
