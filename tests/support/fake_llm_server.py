"""A local HTTP server speaking the Anthropic Messages and OpenAI Chat Completions wire formats.

The real SDKs (AsyncAnthropic, AsyncOpenAI) are pointed at it through their base URL, so the
judges' HTTP, retry, rate-limit, cost and batch paths are exercised end to end without any
network. It listens on 127.0.0.1 only.

Behaviour is configurable per test:

* ``latency``: seconds every chat request takes;
* ``enqueue(...)``: scripted faults for the next chat requests, in order: ``"429"`` (with
  ``Retry-After``), ``"500"``, ``"502"``, ``"503"``, ``"504"``, ``"529"``, ``"400"``,
  ``"401"``, ``"403"``, ``"404"``, ``"timeout"`` (the reply comes after ``hang_seconds``),
  ``"malformed"`` (200 with a reply that is not in the requested form), ``"bad_json"`` (200
  whose body is not JSON);
* ``fault_rule``: a function ``(api, user_text) -> fault kind or None`` applied to every chat
  request (e.g. always 503 for one document);
* ``fault_rate`` / ``fault_kinds`` / ``seed``: random faults on a share of chat requests (a
  kind listed twice comes twice as often: ``("429", "429", "503")`` at 0.15 is 10% 429 and
  5% 503);
* ``rpm_limit``: a server-side token bucket (requests per minute) answering 429 with a
  ``Retry-After`` when exceeded, like a provider's rate limiter. A request it lets through
  takes a token even when a random fault then refuses it (the provider's edge counted it
  before a replica or a proxy behind it failed); one it refuses takes none;
* ``rate_limit_headers``: with ``rpm_limit``, every chat reply (success, 429 or random fault)
  carries the rate-limit headers of its wire format, from the server's bucket as it was once
  the request arrived and was counted (a random 429 shows the bucket's real level): OpenAI's
  ``x-ratelimit-limit-requests`` / ``-remaining-requests`` / ``-reset-requests`` (a duration,
  ``"120ms"``, ``"1.5s"``), Anthropic's ``anthropic-ratelimit-requests-limit`` / ``-remaining``
  / ``-reset`` (an RFC 3339 moment); ``reset`` is when the bucket is full again. The limit can
  change mid-run with ``set_rpm_limit(rpm)`` (the bucket keeps what it holds, up to the new
  size). Off by default: no such headers;
* ``responder``: a function ``(api, system, first_user_text, body) -> reply text``; the default
  answers each of the judges' prompts plausibly and deterministically;
* batch endpoints of both APIs (create, poll, results), ``batch_polls`` polls before a batch
  ends and ``batch_errors`` requests of each batch reported as errored; an unknown batch id
  gets a 404 in the API's error format. ``end_batches()`` ends every batch at its next poll,
  ``forget_batches()`` makes the server forget them (a provider that no longer knows the
  id), ``batch_submissions()`` lists the batch creations and ``batch_polls_of(id)`` the polls
  of one batch (``batch_polls = 10**6`` keeps new batches in progress);
* ``hold_replies_after(n)``: the first ``n`` chat requests are answered, later ones are held
  (recorded with ``held=True``, unanswered) until ``release_replies()`` or ``hold_seconds``;
  a test can then kill the client at a known point: exactly ``n`` replies delivered.
* ``GET /v1/models`` of both APIs (the doctor's probe); scripted faults apply to it too.
* ``no_quota``: the account has no quota or credit left: every chat request and batch creation
  is refused the way each API says so (OpenAI: 429 ``insufficient_quota``; Anthropic: 400
  "Your credit balance is too low"); models are still listed. The same refusals can be
  scripted one at a time with ``enqueue("no_quota")``, and Anthropic's newer forms with
  ``enqueue("billing_402")`` (402 ``billing_error``) and ``enqueue("spend_limit")`` (429 with
  ``details.error_code`` ``enforced_spend_limit_reached``).
* ``reject_key``: the key is not valid: every chat request gets a 401 in the API's error format
  (models are still listed).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

ERROR_STATUS = {"429": 429, "500": 500, "502": 502, "503": 503, "504": 504, "529": 529,
                "400": 400, "401": 401, "403": 403, "404": 404}
ANTHROPIC_ERROR_TYPES = {429: "rate_limit_error", 500: "api_error", 502: "api_error",
                         503: "api_error", 504: "timeout_error", 529: "overloaded_error",
                         400: "invalid_request_error", 401: "authentication_error",
                         403: "permission_error", 404: "not_found_error"}
MALFORMED_REPLY = "I would say this is fairly relevant overall."
QUOTA_FAULTS = ("no_quota", "billing_402", "spend_limit")  # see quota_refusal()

Responder = Callable[[str, str, str, dict], str]


@dataclass(frozen=True)
class Fault:
    kind: str
    retry_after: float | None = None  # seconds, for "429" (and any other status, if given)
    over_limit: bool = False          # refused by the server's own rate limiter


@dataclass
class Recorded:
    api: str           # "anthropic" | "openai" | "anthropic-batch" | "openai-batch" | "files"
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    fault: str | None = None
    at: float = field(default_factory=time.monotonic)
    held: bool = False  # held by hold_replies_after(): not answered before release


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


def default_reply(api: str, system: str, user: str, body: dict) -> str:
    """Plausible, deterministic replies to the judges' four prompts."""
    if "Relevance score" in user:
        query = user.split("Query:", 1)[1].split("\n\nDocument:", 1)[0]
        document = user.split("\n\nDocument:", 1)[1]
        q = _words(query)
        share = len(q & _words(document)) / len(q) if q else 0.0
        return f"{min(1.0, round(share * 1.25, 1)):.1f}"
    if "quality of an AI-generated answer" in system:
        return json.dumps({"relevance": 0.9, "accuracy": 0.8, "completeness": 0.6,
                           "reasoning": "Addresses the query from the context.",
                           "issues": ["misses one aspect"],
                           "improvement_hint": "Cover every aspect of the question."})
    if "grounded in numbered source" in system:
        return json.dumps({"claims": [{"claim": "The answer's first claim.", "supported": True,
                                       "source": 1}]})
    if "Reflect on it" in system:
        return "Problem: The answer ignored the context.\nLesson: Answer from the sources."
    return "0.5"


def poor_verdicts_for(marker: str):
    """A responder: a poor answer evaluation (a reflexion and a regeneration entry follow)
    for answers containing ``marker``, :func:`default_reply` otherwise."""
    def responder(api: str, system: str, user: str, body: dict) -> str:
        if "quality of an AI-generated answer" in system and marker in user:
            return json.dumps({"relevance": 0.2, "accuracy": 0.1, "completeness": 0.1,
                               "reasoning": "Off topic.", "issues": ["ignores the question"],
                               "improvement_hint": "Answer the question asked."})
        return default_reply(api, system, user, body)

    return responder


class FakeLLMServer:
    def __init__(self, *, latency: float = 0.0, rpm_limit: float | None = None,
                 burst_seconds: float = 2.0, fault_rate: float = 0.0,
                 fault_kinds: tuple[str, ...] = ("429", "503"), seed: int = 0,
                 responder: Responder | None = None, hang_seconds: float = 1.0,
                 retry_after: float = 1.0, batch_polls: int = 1, batch_errors: int = 0,
                 echo_auth_on_error: bool = False, hold_seconds: float = 30.0,
                 fault_rule: Callable[[str, str], str | None] | None = None,
                 no_quota: bool = False, reject_key: bool = False,
                 rate_limit_headers: bool = False) -> None:
        # reset() restores these, so one server can be shared by many tests
        self._knobs = dict(latency=latency, rpm_limit=rpm_limit,
                           burst=(rpm_limit or 0) / 60.0 * burst_seconds, fault_rate=fault_rate,
                           fault_kinds=fault_kinds, responder=responder or default_reply,
                           hang_seconds=hang_seconds, retry_after=retry_after,
                           batch_polls=batch_polls, batch_errors=batch_errors,
                           echo_auth_on_error=echo_auth_on_error, fault_rule=fault_rule,
                           hold_seconds=hold_seconds, no_quota=no_quota,
                           reject_key=reject_key, rate_limit_headers=rate_limit_headers)
        self._burst_seconds = burst_seconds
        self.__dict__.update(self._knobs)
        self.records: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._faults: deque[Fault] = deque()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._bucket = self.burst
        self._bucket_at = time.monotonic()
        self._anthropic_batches: dict[str, dict] = {}
        self._openai_batches: dict[str, dict] = {}
        self._files: dict[str, bytes] = {}
        self._server: ThreadingHTTPServer | None = None
        self._hold_after: int | None = None  # see hold_replies_after()
        self._let_through = 0
        self._released = threading.Event()

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> "FakeLLMServer":
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "FakeLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the server first"
        return self._server.server_address[1]

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting and inspection -------------------------------------------------------

    def enqueue(self, *faults: str | Fault) -> None:
        with self._lock:
            self._faults.extend(f if isinstance(f, Fault) else Fault(f) for f in faults)

    def chat_records(self, api: str | None = None) -> list[Recorded]:
        with self._lock:
            return [r for r in self.records if r.api in ("anthropic", "openai")
                    and (api is None or r.api == api)]

    @property
    def chat_requests(self) -> int:
        return len(self.chat_records())

    def hold_replies_after(self, n: int) -> None:
        """Answer the next ``n`` chat requests; hold later ones until release_replies()."""
        with self._lock:
            self._hold_after, self._let_through = n, 0
            self._released.clear()

    def release_replies(self) -> None:
        with self._lock:
            self._hold_after = None
            self._released.set()

    def batch_submissions(self, api: str | None = None) -> list[Recorded]:
        """Batch creations (``api``: "anthropic-batch" or "openai-batch"), in order."""
        with self._lock:
            return [r for r in self.records if r.method == "POST"
                    and r.api in ("anthropic-batch", "openai-batch")
                    and (api is None or r.api == api)]

    def batch_polls_of(self, batch_id: str) -> list[Recorded]:
        """The state polls of one batch (retrieve requests), answered or 404."""
        with self._lock:
            return [r for r in self.records if r.method == "GET" and r.api.endswith("-batch")
                    and r.path.split("?", 1)[0].endswith(f"/{batch_id}")]

    def batch_custom_ids(self, batch_id: str) -> list[str]:
        """The custom ids a batch was created with."""
        with self._lock:
            if batch_id in self._anthropic_batches:
                return [r["custom_id"] for r in self._anthropic_batches[batch_id]["requests"]]
            return [line["custom_id"] for line in self._openai_batches[batch_id]["lines"]]

    def end_batches(self) -> None:
        """Every batch created so far ends at its next poll."""
        with self._lock:
            for batch in [*self._anthropic_batches.values(), *self._openai_batches.values()]:
                batch["polls_left"] = 0

    def forget_batches(self) -> None:
        """The provider no longer knows any batch created so far: their ids get 404."""
        with self._lock:
            self._anthropic_batches.clear()
            self._openai_batches.clear()

    def set_rpm_limit(self, rpm: float) -> None:
        """Enforce ``rpm`` requests per minute from now on (the bucket keeps what it holds,
        up to the new size); the rate-limit headers say the new limit."""
        with self._lock:
            self._refill_bucket(time.monotonic())
            self.rpm_limit = rpm
            self.burst = rpm / 60.0 * self._burst_seconds
            self._bucket = min(self._bucket, self.burst)

    def reset(self) -> None:
        """Forget requests and queued faults; every knob back to its constructor value."""
        self.release_replies()
        with self._lock:
            self.records.clear()
            self._faults.clear()
            self.max_in_flight = 0
            self.__dict__.update(self._knobs)

    # -- decisions (called from handler threads) ----------------------------------------

    def _record(self, record: Recorded) -> None:
        with self._lock:
            self.records.append(record)

    def _next_fault(self, api: str, user: str) -> Fault | None:
        if self.no_quota and api in ("anthropic", "openai"):
            return Fault("no_quota")
        if self.reject_key and api in ("anthropic", "openai"):
            return Fault("401")
        if self.fault_rule is not None and (kind := self.fault_rule(api, user)):
            return Fault(kind)
        with self._lock:
            if self._faults:
                return self._faults.popleft()
            if self.rpm_limit:
                rate = self.rpm_limit / 60.0
                self._refill_bucket(time.monotonic())
                if self._bucket < 1.0:
                    wait = max(1, int((1.0 - self._bucket) / rate + 0.999))
                    return Fault("429", retry_after=float(wait), over_limit=True)
                self._bucket -= 1.0
            if self.fault_rate and self._rng.random() < self.fault_rate:
                return Fault(self._rng.choice(self.fault_kinds))
        return None

    def _refill_bucket(self, now: float) -> None:
        """Called with the lock held."""
        if self.rpm_limit:
            self._bucket = min(self.burst, self._bucket
                               + (now - self._bucket_at) * self.rpm_limit / 60.0)
        self._bucket_at = now

    def _rate_headers(self, api: str) -> dict[str, str]:
        """The rate-limit headers of ``api``'s wire format (see ``rate_limit_headers``)."""
        if not (self.rate_limit_headers and self.rpm_limit):
            return {}
        with self._lock:
            self._refill_bucket(time.monotonic())
            limit, remaining = self.rpm_limit, max(0, int(self._bucket))
            reset = max(0.0, (self.burst - self._bucket) / (limit / 60.0))
        if api == "anthropic":
            moment = datetime.now(timezone.utc) + timedelta(seconds=reset)
            return {"anthropic-ratelimit-requests-limit": f"{limit:g}",
                    "anthropic-ratelimit-requests-remaining": str(remaining),
                    "anthropic-ratelimit-requests-reset":
                        moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")}
        duration = f"{round(reset * 1000)}ms" if reset < 1 else f"{reset:.3f}s"
        return {"x-ratelimit-limit-requests": f"{limit:g}",
                "x-ratelimit-remaining-requests": str(remaining),
                "x-ratelimit-reset-requests": duration}

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"

    def _should_hold(self) -> bool:
        with self._lock:
            if self._hold_after is None:
                return False
            if self._let_through < self._hold_after:
                self._let_through += 1
                return False
            return True


def _flatten(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _conversation(api: str, body: dict) -> tuple[str, str, int]:
    """System prompt, the first user message (the judge's question; a re-ask repeats it
    with a correction after it) and a token estimate of the whole input."""
    messages = body.get("messages") or []
    if api == "anthropic":
        system = _flatten(body.get("system", ""))
    else:
        system = "".join(_flatten(m.get("content")) for m in messages if m.get("role") == "system")
    users = [_flatten(m.get("content")) for m in messages if m.get("role") == "user"]
    total = len(system) + sum(len(_flatten(m.get("content"))) for m in messages)
    return system, (users[0] if users else ""), total // 4 + 1


def anthropic_message(model: str, reply: str, input_tokens: int, fake_id: str) -> dict:
    return {"id": fake_id, "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": len(reply) // 4 + 1}}


def openai_completion(model: str, reply: str, input_tokens: int, fake_id: str) -> dict:
    output = len(reply) // 4 + 1
    return {"id": fake_id, "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                         "message": {"role": "assistant", "content": reply}}],
            "usage": {"prompt_tokens": input_tokens, "completion_tokens": output,
                      "total_tokens": input_tokens + output}}


def quota_refusal(api: str, kind: str = "no_quota") -> tuple[int, dict]:
    """Status and body with which ``api`` says the account has no quota or credit left."""
    if api.startswith("openai"):
        return 429, {"error": {
            "message": "You exceeded your current quota, please check your plan and billing "
                       "details.", "type": "insufficient_quota", "param": None,
            "code": "insufficient_quota"}}
    if kind == "billing_402":
        return 402, {"type": "error", "error": {
            "type": "billing_error", "message": "There is an issue with your billing."}}
    if kind == "spend_limit":
        return 429, {"type": "error", "error": {
            "type": "rate_limit_error", "message": "You have reached your API usage limits.",
            "details": {"error_code": "enforced_spend_limit_reached"}}}
    return 400, {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "Your credit balance is too low to access the Anthropic API. Please go to "
                   "Plans & Billing to upgrade or purchase credits."}}


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default backlog of 5 drops connections under concurrency
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address) -> None:
        """A client that went away (a stopped second client, a timeout test) is no error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeLLMServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    # -- plumbing -----------------------------------------------------------------------

    def _body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, payload: Any, *, headers: dict[str, str] | None = None,
              content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    # -- routing ------------------------------------------------------------------------

    def do_POST(self) -> None:
        raw = self._body()
        path = self.path.split("?", 1)[0]
        if path == "/v1/files":
            return self._upload(raw)
        body = json.loads(raw or b"{}")
        if path == "/v1/messages":
            return self._chat("anthropic", body)
        if path == "/v1/chat/completions":
            return self._chat("openai", body)
        if path == "/v1/messages/batches":
            return self._anthropic_batch_create(body)
        if path == "/v1/batches":
            return self._openai_batch_create(body)
        self._send(404, {"error": {"type": "not_found_error", "message": f"no route {path}"}})

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if m := re.fullmatch(r"/v1/messages/batches/([^/]+)/results", path):
            return self._anthropic_batch_results(m.group(1))
        if m := re.fullmatch(r"/v1/messages/batches/([^/]+)", path):
            return self._anthropic_batch_retrieve(m.group(1))
        if m := re.fullmatch(r"/v1/batches/([^/]+)", path):
            return self._openai_batch_retrieve(m.group(1))
        if path == "/v1/models":
            return self._models()
        if m := re.fullmatch(r"/v1/files/([^/]+)/content", path):
            return self._send(200, self.fake._files[m.group(1)],
                              content_type="application/octet-stream")
        self._send(404, {"error": {"type": "not_found_error", "message": f"no route {path}"}})

    # -- chat ---------------------------------------------------------------------------

    def _chat(self, api: str, body: dict) -> None:
        fake = self.fake
        with fake._lock:
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            self._answer_chat(api, body)
        finally:
            with fake._lock:
                fake.in_flight -= 1

    def _answer_chat(self, api: str, body: dict) -> None:
        fake = self.fake
        record = Recorded(api, "POST", self.path, self._headers(), body)
        system, user, input_tokens = _conversation(api, body)
        fault = fake._next_fault(api, user)
        rate_headers = fake._rate_headers(api)  # as the server's limiter saw it on admission
        record.fault = None if fault is None else "over_limit" if fault.over_limit else fault.kind
        record.held = fake._should_hold()
        fake._record(record)
        if record.held:
            fake._released.wait(fake.hold_seconds)
        if fake.latency:
            time.sleep(fake.latency)
        model = body.get("model", "unknown")
        if fault is None or fault.kind in ("timeout", "malformed"):
            if fault is not None and fault.kind == "timeout":
                time.sleep(fake.hang_seconds)
            reply = (MALFORMED_REPLY if fault is not None and fault.kind == "malformed"
                     else fake.responder(api, system, user, body))
            make = anthropic_message if api == "anthropic" else openai_completion
            record.status = 200
            return self._send(200, make(model, reply, input_tokens, fake._new_id("msg_")),
                              headers=rate_headers)
        if fault.kind == "bad_json":
            record.status = 200
            return self._send(200, b"<html>upstream proxy error</html>")
        if fault.kind in QUOTA_FAULTS:
            record.status, payload = quota_refusal(api, fault.kind)
            return self._send(record.status, payload)
        record.status = ERROR_STATUS[fault.kind]
        self._send_fault(api, fault, rate_headers)

    def _send_fault(self, api: str, fault: Fault, rate_headers: dict[str, str]) -> None:
        fake = self.fake
        status = ERROR_STATUS[fault.kind]
        headers = dict(rate_headers)
        if status == 429 or fault.retry_after is not None:
            headers["retry-after"] = f"{fault.retry_after or fake.retry_after:g}"
        message = f"fake {fault.kind}"
        if fake.echo_auth_on_error:  # a misbehaving proxy that echoes credentials
            seen = f"{self.headers.get('authorization')} {self.headers.get('x-api-key')}"
            message += f" (seen: {seen})"
        if api == "anthropic":
            payload = {"type": "error",
                       "error": {"type": ANTHROPIC_ERROR_TYPES[status], "message": message}}
        else:
            payload = {"error": {"message": message, "type": "server_error" if status >= 500
                                 else "invalid_request_error", "code": fault.kind}}
        self._send(status, payload, headers=headers)

    # -- models list (the doctor's cheap reachability probe) -----------------------------

    def _models(self) -> None:
        """``GET /v1/models`` of either API (told apart by ``anthropic-version``); scripted
        status faults apply to it like to chat requests."""
        fake = self.fake
        api = "anthropic" if self.headers.get("anthropic-version") else "openai"
        record = Recorded("models", "GET", self.path, self._headers(), None)
        fault = fake._next_fault("models", "")
        record.fault = None if fault is None else fault.kind
        record.status = ERROR_STATUS.get(fault.kind, 200) if fault is not None else 200
        fake._record(record)
        if fault is not None and fault.kind in ERROR_STATUS:
            return self._send_fault(api, fault, {})
        if api == "anthropic":
            models = [{"type": "model", "id": m, "display_name": m,
                       "created_at": "2025-01-01T00:00:00Z"}
                      for m in ("claude-haiku-4-5", "claude-sonnet-4-5")]
            return self._send(200, {"data": models, "has_more": False,
                                    "first_id": models[0]["id"], "last_id": models[-1]["id"]})
        self._send(200, {"object": "list", "data": [
            {"id": m, "object": "model", "created": 0, "owned_by": "fake"}
            for m in ("gpt-4o", "gpt-4o-mini")]})

    # -- Anthropic Message Batches ------------------------------------------------------

    def _anthropic_batch_view(self, batch: dict) -> dict:
        ended = batch["polls_left"] <= 0
        n = len(batch["requests"])
        errored = min(self.fake.batch_errors, n) if ended else 0
        return {"id": batch["id"], "type": "message_batch",
                "processing_status": "ended" if ended else "in_progress",
                "request_counts": {"processing": 0 if ended else n, "succeeded":
                                   n - errored if ended else 0, "errored": errored,
                                   "canceled": 0, "expired": 0},
                "created_at": _iso(batch["created"]),
                "expires_at": _iso(batch["created"] + timedelta(hours=24)),
                "ended_at": _iso(datetime.now(timezone.utc)) if ended else None,
                "results_url": (f"{self.fake.anthropic_base_url}/v1/messages/batches/"
                                f"{batch['id']}/results") if ended else None}

    def _refused_for_quota(self, api: str, body: dict) -> bool:
        """With ``no_quota``, refuse a batch creation (recorded) as the API would; True then."""
        if not self.fake.no_quota:
            return False
        status, payload = quota_refusal(api, "no_quota")
        self.fake._record(Recorded(f"{api}-batch", "POST", self.path, self._headers(), body,
                                   status, fault="no_quota"))
        self._send(status, payload)
        return True

    def _anthropic_batch_create(self, body: dict) -> None:
        fake = self.fake
        if self._refused_for_quota("anthropic", body):
            return
        batch = {"id": fake._new_id("msgbatch_"), "requests": body["requests"],
                 "polls_left": fake.batch_polls, "created": datetime.now(timezone.utc)}
        fake._record(Recorded("anthropic-batch", "POST", self.path, self._headers(), body, 200))
        fake._anthropic_batches[batch["id"]] = batch
        self._send(200, self._anthropic_batch_view(batch))

    def _unknown_batch(self, api: str, batch_id: str) -> bool:
        """Record a batch poll or results request; answer 404 (True) if the id is unknown."""
        fake = self.fake
        batches = fake._anthropic_batches if api == "anthropic" else fake._openai_batches
        known = batch_id in batches
        fake._record(Recorded(f"{api}-batch", "GET", self.path, self._headers(), None,
                              200 if known else 404))
        if known:
            return False
        message = f"no batch with id {batch_id}"
        if api == "anthropic":
            payload = {"type": "error",
                       "error": {"type": "not_found_error", "message": message}}
        else:
            payload = {"error": {"message": message, "type": "invalid_request_error",
                                 "code": "not_found"}}
        self._send(404, payload)
        return True

    def _anthropic_batch_retrieve(self, batch_id: str) -> None:
        if self._unknown_batch("anthropic", batch_id):
            return
        batch = self.fake._anthropic_batches[batch_id]
        view = self._anthropic_batch_view(batch)
        batch["polls_left"] -= 1
        self._send(200, view)

    def _anthropic_batch_results(self, batch_id: str) -> None:
        fake = self.fake
        if self._unknown_batch("anthropic", batch_id):
            return
        lines = []
        for position, item in enumerate(fake._anthropic_batches[batch_id]["requests"]):
            params = item["params"]
            if position < fake.batch_errors:
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": "api_error", "message": "fake batch error"}}}
            else:
                system, user, input_tokens = _conversation("anthropic", params)
                reply = fake.responder("anthropic", system, user, params)
                result = {"type": "succeeded", "message": anthropic_message(
                    params["model"], reply, input_tokens, fake._new_id("msg_"))}
            lines.append(json.dumps({"custom_id": item["custom_id"], "result": result}))
        self._send(200, ("\n".join(lines) + "\n").encode(), content_type="application/binary")

    # -- OpenAI Files + Batch -----------------------------------------------------------

    def _upload(self, raw: bytes) -> None:
        fake = self.fake
        message = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + self.headers["content-type"].encode() + b"\r\n\r\n" + raw)
        parts = {part.get_param("name", header="content-disposition"):
                 part.get_payload(decode=True) for part in message.iter_parts()}
        file_id = fake._new_id("file-")
        fake._files[file_id] = parts["file"]
        fake._record(Recorded("files", "POST", self.path, self._headers(),
                              {"purpose": (parts.get("purpose") or b"").decode()}, 200))
        self._send(200, {"id": file_id, "object": "file", "bytes": len(parts["file"]),
                         "created_at": int(time.time()), "filename": "batch.jsonl",
                         "purpose": "batch", "status": "processed"})

    def _openai_batch_view(self, batch: dict) -> dict:
        done = batch["polls_left"] <= 0
        n = len(batch["lines"])
        errored = min(self.fake.batch_errors, n)
        view = {"id": batch["id"], "object": "batch", "endpoint": batch["endpoint"],
                "input_file_id": batch["input_file_id"], "completion_window": "24h",
                "status": "completed" if done else "in_progress",
                "created_at": int(batch["created"]),
                "request_counts": {"total": n, "completed": n - errored if done else 0,
                                   "failed": errored if done else 0}}
        if done:
            view.update(output_file_id=batch["output_file_id"],
                        error_file_id=batch["error_file_id"], completed_at=int(time.time()))
        return view

    def _openai_batch_create(self, body: dict) -> None:
        fake = self.fake
        if self._refused_for_quota("openai", body):
            return
        lines = [json.loads(line) for line in
                 fake._files[body["input_file_id"]].decode().splitlines() if line.strip()]
        batch = {"id": fake._new_id("batch_"), "endpoint": body["endpoint"], "lines": lines,
                 "input_file_id": body["input_file_id"], "polls_left": fake.batch_polls,
                 "created": time.time()}
        outputs, errors = [], []
        for position, line in enumerate(lines):
            if position < fake.batch_errors:
                errors.append({"id": fake._new_id("batch_req_"), "custom_id": line["custom_id"],
                               "response": None,
                               "error": {"code": "server_error", "message": "fake error"}})
                continue
            system, user, input_tokens = _conversation("openai", line["body"])
            reply = fake.responder("openai", system, user, line["body"])
            outputs.append({"id": fake._new_id("batch_req_"), "custom_id": line["custom_id"],
                            "response": {"status_code": 200, "request_id": "req",
                                         "body": openai_completion(line["body"]["model"], reply,
                                                                   input_tokens, "chatcmpl")},
                            "error": None})
        batch["output_file_id"] = fake._new_id("file-")
        fake._files[batch["output_file_id"]] = "".join(json.dumps(o) + "\n"
                                                       for o in outputs).encode()
        batch["error_file_id"] = fake._new_id("file-") if errors else None
        if errors:
            fake._files[batch["error_file_id"]] = "".join(json.dumps(e) + "\n"
                                                          for e in errors).encode()
        fake._openai_batches[batch["id"]] = batch
        fake._record(Recorded("openai-batch", "POST", self.path, self._headers(), body, 200))
        self._send(200, self._openai_batch_view(batch))

    def _openai_batch_retrieve(self, batch_id: str) -> None:
        if self._unknown_batch("openai", batch_id):
            return
        batch = self.fake._openai_batches[batch_id]
        view = self._openai_batch_view(batch)
        batch["polls_left"] -= 1
        self._send(200, view)


class FakeTime:
    """An injectable clock and sleep for the judge pipeline: sleeping advances the clock
    instantly and records the wait, so retry schedules are checked without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        import asyncio

        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)

    def options(self, **more) -> dict:
        return {"sleep": self.sleep, "clock": self.clock, **more}


def judge_settings(base, server: FakeLLMServer | None, **judges):
    """``base`` settings pointed at ``server`` (keys set) with ``judges`` fields replaced.

    Generous client rate limits unless given, so tests only wait where they mean to.
    """
    from dataclasses import replace

    from eval_harness.settings.judges import RateLimit

    judges.setdefault("rate_limits", {"openai": RateLimit(1e6, None),
                                      "anthropic": RateLimit(1e6, None)})
    judges.setdefault("timeout_seconds", 5.0)
    keys = {}
    if server is not None:
        keys = {"openai_api_key": "sk-test-openai-0123456789", "openai_base_url":
                server.openai_base_url, "anthropic_api_key": "sk-ant-test-0123456789",
                "anthropic_base_url": server.anthropic_base_url}
    return replace(base, judges=replace(base.judges, **judges), **keys)
