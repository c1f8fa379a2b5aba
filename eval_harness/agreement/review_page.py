"""The review page (``eval-harness review serve``): the human sample and the review queue of
a dataset, labelled one pair at a time in a local web page instead of a spreadsheet.

What a person sees: the query and the document of one pair, which list it is from (human
sample or review queue), the progress ("3 of 12 labelled · 9 left"), and three buttons with
their keys: ``r`` relevant, ``n`` not relevant, ``s`` skip (left for another time; this page
does not show it again). The judges' scores are not sent to the page before the verdict:
a person who sees them is anchored by them. For a review-queue pair the reply to a verdict
carries them, and the next screen says them under "last pair" (``judge1 0.9 · judge2 0.1``),
once the verdict is stored; a human-sample pair's never reach the page (PPI needs the sample's
labels independent of the judges, and scores seen after one verdict anchor the next).

**Every verdict is stored at once, with the import's checks.** A verdict becomes the one row
of a review file that the pair had when the page showed it (:func:`review.queue_row_cells`,
:func:`sample.sample_row_cells`: what export writes), with the verdict and the reviewer
filled in, and goes through the very function ``review import`` stores a file's rows with
(:func:`review.store_queue_rows` for a queue pair, :func:`sample.store_sample_rows` for a
sampled one): the same row checks, the same staleness rules (a queue pair the judges
re-scored since the page showed it is refused, as a stale row of an exported file is), the
same columns written, committed before the reply. A refused verdict stores nothing; the page
shows the problem in the words import uses, and leaves the pair out of this page (a stale
pair would be refused again until the queue is refreshed, which starting the page does).

**Only this machine's browser.** The server listens on 127.0.0.1 only. A request whose
``Host`` header is not ``127.0.0.1:PORT`` or ``localhost:PORT`` is refused, so a web page
whose own host name was made to resolve to 127.0.0.1 (DNS rebinding) cannot read or write
through it. The JSON endpoints need the session's token, which only the page itself carries
(a ``<meta>`` of the HTML, which another site's page cannot read), and a POST whose ``Origin``
is not the page's own is refused too. The page is one HTML document with an inline script
and style allowed by their hashes (Content-Security-Policy) and nothing else: no external
asset, no framing. Data from the store never enters the HTML: the script puts it in the page
with ``textContent``, so a document holding markup shows that markup as text.

Requests are served one at a time on the one connection the page was given (a lock): one
person labels, and storing a verdict takes milliseconds. :func:`serve_until_stopped` serves
until SIGINT or SIGTERM, waits for a verdict being stored, and raises
:class:`~eval_harness.stopping.Interrupted` saying what was kept (everything: each verdict
was stored when given).
"""

from __future__ import annotations

import base64
import errno
import hashlib
import hmac
import json
import math
import secrets
import signal
import socketserver
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import psycopg

from eval_harness import stopping
from eval_harness.agreement.review import queue_row_cells, queue_rows, store_queue_rows
from eval_harness.agreement.review_file import CSV_COLUMNS, ReviewFileError
from eval_harness.agreement.sample import (
    SAMPLE_STATUS,
    sample_row_cells,
    sample_rows,
    store_sample_rows,
)
from eval_harness.errors import InvalidInput
from eval_harness.retrieval.hybrid import dataset_info

SAMPLE, QUEUE = "sample", "queue"
LIST_NAMES = {SAMPLE: "human sample", QUEUE: "review queue"}
SKIP = "skip"
HOST = "127.0.0.1"
DEFAULT_PORT = 8765
TOKEN_HEADER = "X-Review-Token"
# What a refusal names where import names the file (the sentence itself is not shown: the
# page shows the problems, see VerdictRefused).
PAGE_SOURCE = "the review page"
MAX_BODY_BYTES = 64 * 1024  # a verdict is a hundred bytes
RESUME = "run `eval-harness review serve` again to label the rest"
SAMPLE_SCORES_HIDDEN = "not shown for the human sample (its labels must not follow the judges)"


class VerdictRefused(InvalidInput):
    """A verdict the page did not store; the message is the one sentence the page shows."""


class PageStopped(InvalidInput):
    """A request that arrived after the page was stopped."""


# ---------------------------------------------------------------------------------------
# The session: what the page shows and stores


class ReviewSession:
    """The pairs one page serves and the verdicts it stores, on ``conn``.

    ``lists``: which pairs, in this order: the human sample's unlabelled pairs
    (:data:`SAMPLE`) and the review queue's pending ones (:data:`QUEUE`). ``reviewer`` goes
    into the ``reviewer`` column of every verdict, as a file's column would. Every read and
    write is its own transaction, under :attr:`lock`.
    """

    def __init__(self, conn: psycopg.Connection, dataset: str, *, reviewer: str | None,
                 lists: Sequence[str] = (SAMPLE, QUEUE)) -> None:
        unknown = [name for name in lists if name not in LIST_NAMES]
        if unknown or not lists:
            raise ValueError(f"lists must be among {sorted(LIST_NAMES)}, got {list(lists)}")
        with conn.transaction():
            dataset_info(conn, dataset, with_counts=False)  # UnknownDataset: said by the CLI
        self.conn, self.dataset, self.reviewer = conn, dataset, reviewer or None
        self.lists = tuple(lists)
        self.lock = threading.Lock()
        self.closed = False
        self.stored: Counter[str] = Counter()   # verdicts stored by this page, per list
        self._shown: dict[tuple[str, int, int], dict[str, str]] = {}  # the row as shown
        self._passed: set[tuple[str, int, int]] = set()  # skipped or refused: not again

    # -- what the endpoints call

    def next_pair(self) -> dict:
        """The ``/api/next`` reply: the first pair left to label (None when none is left),
        without the judges' scores or models, and the progress."""
        with self._open():
            pending, counts = self._pending_pairs()
            payload: dict = {"dataset": self.dataset, "reviewer": self.reviewer,
                             "pair": None, "progress": self._progress(pending, counts)}
            if pending:
                name, row, cells = pending[0]
                key = (name, int(cells["query_id"]), int(cells["doc_id"]))
                self._shown[key] = cells
                payload["pair"] = {
                    "list": name, "where": LIST_NAMES[name], "query_id": key[1],
                    "doc_id": key[2], "query_external_id": cells["query_external_id"],
                    "doc_external_id": cells["doc_external_id"], "query": row[3],
                    "document": row[6]}
            return payload

    def give_verdict(self, body: object) -> dict:
        """Store (or skip) the verdict of ``body`` (``{"list", "query_id", "doc_id",
        "verdict"}``, a verdict as a review file holds it, or ``"skip"``); the
        ``/api/verdict`` reply. Raises :class:`VerdictRefused` (stored nothing)."""
        with self._open():
            if not isinstance(body, Mapping):
                raise VerdictRefused("not stored: the request is not a JSON object with "
                                     "list, query_id, doc_id and verdict.")
            name, verdict = body.get("list"), body.get("verdict")
            if name not in self.lists:
                raise VerdictRefused(f"not stored: list must be one of {list(self.lists)} "
                                     f"(this page serves those), not {_quoted(name)}.")
            if not isinstance(verdict, str):
                raise VerdictRefused(f"not stored: verdict must be text ('relevant', "
                                     f"'not relevant' or '{SKIP}'), not {_quoted(verdict)}.")
            cells, key = self._row_of(name, body.get("query_id"), body.get("doc_id"))
            if verdict.strip().lower() == SKIP:
                if key is not None:
                    self._passed.add(key)
                return {"stored": False, "skipped": True}
            if not verdict.strip():
                raise VerdictRefused(f"not stored: the verdict is blank; give 'relevant' or "
                                     f"'not relevant', or '{SKIP}' the pair.")
            cells.update(verdict=verdict, reviewer=self.reviewer or "")
            store = store_sample_rows if name == SAMPLE else store_queue_rows
            try:
                store(self.conn, self.dataset, [(2, cells)], source=PAGE_SOURCE)
            except ReviewFileError as exc:
                if key is not None:
                    self._passed.add(key)
                raise VerdictRefused(_refusal(exc)) from None
            self.stored[name] += 1
            if key is not None:
                self._shown.pop(key, None)
            return {"stored": True, "verdict": " ".join(verdict.lower().split()),
                    "judges": self._judges_line(name, cells)}

    def close(self) -> None:
        """Stop serving: waits for a verdict being stored; later requests are refused."""
        with self.lock:
            self.closed = True

    def kept(self) -> str:
        """What the stopped page kept, for the interrupted line."""
        given = sum(self.stored.values())
        parts = ", ".join(f"{self.stored[name]} in the {LIST_NAMES[name]}" for name in self.lists)
        skipped = len(self._passed)
        return (f"every verdict given on the page is stored ({given} this session: {parts}"
                + (f"; {skipped} pair(s) skipped or refused, still to label" if skipped else "")
                + ")")

    def summary(self) -> str:
        """How many pairs are left to label, per list (for the line the command prints)."""
        with self._open():
            pending, counts = self._pending_pairs()
        return self._progress(pending, counts)["text"]

    # -- internals

    @contextmanager
    def _open(self) -> Iterator[None]:
        with self.lock:
            if self.closed:
                raise PageStopped("the review page was stopped; nothing was stored.")
            yield

    def _pending_pairs(self):
        """([(list, export row, review-file cells)] left to label in page order, {list:
        (labelled, pairs)})."""
        pending, counts = [], {}
        for name in self.lists:
            if name == SAMPLE:
                rows = sample_rows(self.conn, self.dataset)
                cells_of, labelled = sample_row_cells, [row[7] is not None for row in rows]
            else:
                rows = queue_rows(self.conn, self.dataset)
                cells_of, labelled = queue_row_cells, [row[13] != "pending" for row in rows]
            counts[name] = (sum(labelled), len(rows))
            for row, done in zip(rows, labelled):
                if not done and (name, row[1], row[4]) not in self._passed:
                    pending.append((name, row, cells_of(row)))
        return pending, counts

    def _progress(self, pending: list, counts: Mapping[str, tuple[int, int]]) -> dict:
        labelled = sum(done for done, _ in counts.values())
        pairs = sum(total for _, total in counts.values())
        passed = len(self._passed)
        lists = ", ".join(f"{LIST_NAMES[name]} {done} of {total}"
                          for name, (done, total) in counts.items())
        text = (f"{labelled} of {pairs} labelled · {len(pending)} left"
                + (f" · {passed} skipped" if passed else "") + f" ({lists})")
        return {"labelled": labelled, "pairs": pairs, "left": len(pending),
                "skipped": passed, "text": text}

    def _row_of(self, name: str, query_id: object, doc_id: object):
        """(the review-file row a verdict is checked as, the pair's key or None when its ids
        are not whole numbers): the row as the page showed it, or one holding only the ids
        (which the import's checks refuse: unknown pair, or columns not as exported)."""
        try:
            key = (name, _whole(query_id), _whole(doc_id))
        except ValueError:
            key = None
        shown = self._shown.get(key) if key is not None else None
        if shown is not None:
            return dict(shown), key
        cells = {column: "" for column in CSV_COLUMNS}
        cells.update(dataset=self.dataset, query_id=_text(query_id), doc_id=_text(doc_id),
                     status=SAMPLE_STATUS if name == SAMPLE else "pending")
        return cells, key

    def _judges_line(self, name: str, cells: Mapping[str, str]) -> str:
        """``judge1 0.9 · judge2 0.1``: for a queue pair the scores the verdict was given on;
        for a sampled pair none (the sample's labels correct the judges by PPI, so they must
        not follow them: a person shown the scores of the pairs labelled so far is anchored
        on the next ones, as the sample file leaves them blank for)."""
        if name != QUEUE:
            return SAMPLE_SCORES_HIDDEN
        scores = (_number(cells["judge1_score"]), _number(cells["judge2_score"]))
        return " · ".join(f"judge{n} {_score(s)}" for n, s in enumerate(scores, start=1))


def _refusal(exc: ReviewFileError) -> str:
    """The page's sentence for a refused verdict: the import's problems, in its words."""
    if not exc.problems:
        return str(exc)
    problems = "; ".join(dict.fromkeys(text for _, text in exc.problems))
    return (f"not stored: {problems}; this page leaves the pair out now (start `eval-harness "
            "review serve` again to see it as the store then has it).")


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _whole(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(value)
    return int(value)


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _quoted(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def _score(score: float | None) -> str:
    return "unscored" if score is None or math.isnan(score) else f"{score:.3g}"


# ---------------------------------------------------------------------------------------
# The page

_STYLE = """
body { font: 16px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; color: #222; }
h1 { font-size: 1.3rem; } #progress { color: #555; }
.box { border: 1px solid #ccc; border-radius: 6px; padding: .75rem 1rem; margin: .75rem 0;
       white-space: pre-wrap; overflow-wrap: anywhere; }
#where, #ids { color: #555; font-size: .9rem; }
button { font-size: 1rem; padding: .4rem 1rem; margin-right: .5rem; }
#error { color: #a00; } #last { color: #333; background: #f4f4f4; padding: .25rem .5rem; }
kbd { border: 1px solid #999; border-radius: 3px; padding: 0 .3rem; }
"""

_SCRIPT = """
"use strict";
const token = document.querySelector('meta[name="review-token"]').content;
const $ = (id) => document.getElementById(id);
const keys = {r: "relevant", n: "not relevant", s: "skip"};
let current = null;
let busy = true;

async function call(method, path, body) {
  const response = await fetch(path, {
    method, cache: "no-store",
    headers: {"X-Review-Token": token, "Content-Type": "application/json"},
    body: body === undefined ? undefined : JSON.stringify(body)});
  let data;
  try { data = await response.json(); } catch (e) { data = {}; }
  if (!response.ok) {
    throw new Error(data.error || ("the page's server answered " + response.status));
  }
  return data;
}

function show(data) {
  $("dataset").textContent = data.dataset;
  $("progress").textContent = data.progress.text;
  current = data.pair;
  $("pair").hidden = current === null;
  $("done").hidden = current !== null;
  if (current !== null) {
    $("where").textContent = current.where;
    $("ids").textContent = "query " + current.query_external_id + " · document "
      + current.doc_external_id;
    $("query").textContent = current.query;
    $("document").textContent = current.document;
  }
}

async function load() {
  busy = true;
  try {
    show(await call("GET", "/api/next"));
    busy = false;
  } catch (e) {
    $("error").textContent = e.message;
  }
}

async function answer(verdict) {
  if (busy || current === null) { return; }
  busy = true;
  const pair = current;
  const named = "query " + pair.query_external_id + " · document " + pair.doc_external_id;
  try {
    const reply = await call("POST", "/api/verdict", {
      list: pair.list, query_id: pair.query_id, doc_id: pair.doc_id, verdict});
    $("error").textContent = "";
    $("last").textContent = reply.stored
      ? "last pair (" + named + "): " + reply.verdict + ", stored · judges: " + reply.judges
      : "last pair (" + named + "): skipped";
  } catch (e) {
    $("error").textContent = e.message;
    $("last").textContent = "";
  }
  $("last").hidden = $("last").textContent === "";
  await load();
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey || event.repeat) { return; }
  const verdict = keys[event.key.toLowerCase()];
  if (verdict !== undefined) {
    event.preventDefault();
    answer(verdict);
  }
});
for (const button of document.querySelectorAll("button[data-verdict]")) {
  button.addEventListener("click", () => answer(button.dataset.verdict));
}
load();
"""


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; script-src {_csp_hash(_SCRIPT)}; style-src {_csp_hash(_STYLE)}; "
    "connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'")


def page_html(token: str) -> str:
    """The page: static HTML, the session's token (URL-safe base64) its only variable part."""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="review-token" content="{token}">
<title>eval-harness review</title>
<style>{_STYLE}</style>
</head>
<body>
<h1>Review: <span id="dataset"></span></h1>
<p id="progress">loading…</p>
<p id="last" hidden></p>
<p id="error" role="alert"></p>
<section id="pair" hidden>
<p id="where"></p><p id="ids"></p>
<h2>Query</h2><div class="box" id="query"></div>
<h2>Document</h2><div class="box" id="document"></div>
<p>
<button type="button" data-verdict="relevant">Relevant <kbd>r</kbd></button>
<button type="button" data-verdict="not relevant">Not relevant <kbd>n</kbd></button>
<button type="button" data-verdict="skip">Skip <kbd>s</kbd></button>
</p>
<p>A review-queue pair's judge scores are shown after your verdict is stored; a human-sample
pair's never are (its labels must not follow the judges).</p>
</section>
<p id="done" hidden>Nothing left to label on this page. Stop it with Ctrl-C.</p>
<script>{_SCRIPT}</script>
</body>
</html>
"""


# ---------------------------------------------------------------------------------------
# The server


class ReviewServer(ThreadingHTTPServer):
    """The page's HTTP server on 127.0.0.1:``port`` (0: a free one), for ``session``.

    ``url`` is the address to open; ``token`` the session's, embedded in the page. Use it as
    a context manager (the socket is closed at the end), serve with
    :func:`serve_until_stopped` (or ``serve_forever`` in a thread, then ``shutdown``).
    """

    daemon_threads = True  # a stop does not wait for idle browser connections

    def __init__(self, session: ReviewSession, *, port: int = DEFAULT_PORT) -> None:
        if not 0 <= port <= 65535:
            raise InvalidInput(f"--port must be between 0 and 65535, got {port}.")
        self.session = session
        self.token = secrets.token_urlsafe(32)
        try:
            super().__init__((HOST, port), _PageHandler)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise InvalidInput(f"port {port} of {HOST} is in use (another review page, or "
                                   "another program); pass another --port, or --port 0 for a "
                                   "free one.") from None
            raise InvalidInput(f"cannot listen on {HOST}:{port} ({exc.strerror or exc}); pass "
                               "another --port, or --port 0 for a free one.") from None
        self.port = int(self.server_address[1])
        self.url = f"http://{HOST}:{self.port}/"
        self.hosts = {f"{HOST}:{self.port}", f"localhost:{self.port}"}
        self.origins = {f"http://{host}" for host in self.hosts}

    def server_bind(self) -> None:
        # HTTPServer's would look up the host's fully qualified name: nothing here uses it
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = HOST, self.server_address[1]


def serve_until_stopped(server: ReviewServer) -> None:
    """Serve ``server`` until SIGINT or SIGTERM; then wait for a verdict being stored, stop
    serving and raise :class:`~eval_harness.stopping.Interrupted` saying what was kept."""
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt as exc:
        stop = exc if isinstance(exc, stopping.Interrupted) else stopping.Interrupted(
            signal.SIGINT)
        server.session.close()
        stop.kept, stop.next_step = server.session.kept(), RESUME
        raise stop from None


class _PageHandler(BaseHTTPRequestHandler):
    server: ReviewServer
    timeout = 10  # a connection that sends nothing gives its thread back
    server_version = "eval-harness-review"
    sys_version = ""

    def log_message(self, format: str, *args) -> None:
        pass  # the terminal shows the command's own lines, not a line per request

    def do_GET(self) -> None:
        if not self._host_allowed():
            return
        path = urlsplit(self.path).path
        if path == "/":
            self._send(HTTPStatus.OK, page_html(self.server.token).encode(),
                       "text/html; charset=utf-8")
        elif path == "/api/next":
            if self._token_allowed():
                self._answer(self.server.session.next_pair)
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no page at {path}; open /."})

    def do_POST(self) -> None:
        if not (self._host_allowed() and self._origin_allowed() and self._token_allowed()):
            return
        if urlsplit(self.path).path != "/api/verdict":
            self._json(HTTPStatus.NOT_FOUND, {"error": "verdicts go to /api/verdict."})
            return
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY_BYTES:
            self.close_connection = True
            self._json(HTTPStatus.BAD_REQUEST, {"error": "not stored: a verdict is a JSON "
                       f"body of at most {MAX_BODY_BYTES} bytes with its Content-Length."})
            return
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except (ValueError, UnicodeDecodeError):
            self._json(HTTPStatus.BAD_REQUEST,
                       {"error": "not stored: the request body is not JSON."})
            return
        self._answer(lambda: self.server.session.give_verdict(body))

    # -- checks

    def _host_allowed(self) -> bool:
        host = (self.headers.get("Host") or "").strip().lower()
        if host in self.server.hosts:
            return True
        self._json(HTTPStatus.FORBIDDEN, {
            "error": f"refused: this page answers only at {self.server.url} (the request "
                     f"was for host '{host[:80]}'); open that address."})
        return False

    def _origin_allowed(self) -> bool:
        origin = self.headers.get("Origin")
        if origin is None or origin.strip().lower() in self.server.origins:
            return True
        self._json(HTTPStatus.FORBIDDEN, {
            "error": f"refused: a verdict is taken only from the page at {self.server.url}, "
                     f"not from '{origin[:80]}'; nothing was stored."})
        return False

    def _token_allowed(self) -> bool:
        given = self.headers.get(TOKEN_HEADER) or ""
        if hmac.compare_digest(given.encode(), self.server.token.encode()):
            return True
        self._json(HTTPStatus.FORBIDDEN, {
            "error": "refused: the request does not carry this page's token (the page was "
                     f"opened before the server restarted?); reload {self.server.url}; "
                     "nothing was stored."})
        return False

    # -- replies

    def _answer(self, work) -> None:
        try:
            reply = work()
        except PageStopped as exc:
            self._json(HTTPStatus.SERVICE_UNAVAILABLE, {"error": str(exc)})
        except VerdictRefused as exc:
            self._json(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": str(exc)})
        except (InvalidInput, LookupError) as exc:  # the dataset went away, say
            self._json(HTTPStatus.CONFLICT, {"error": f"not stored: {exc}"})
        except psycopg.Error as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            self._json(HTTPStatus.SERVICE_UNAVAILABLE,
                       {"error": f"the store reported: {first}; nothing was stored."})
        except Exception as exc:  # a bug: said on the page and on the terminal, in one line
            line = f"internal error of the review page ({type(exc).__name__}: {exc})"
            print(f"eval-harness: {line}", file=sys.stderr, flush=True)
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": line})
        else:
            self._json(HTTPStatus.OK, reply)

    def _json(self, status: HTTPStatus, payload: object) -> None:
        self._send(status, json.dumps(payload, ensure_ascii=False, allow_nan=False).encode(),
                   "application/json; charset=utf-8")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        self.end_headers()
        self.wfile.write(body)
