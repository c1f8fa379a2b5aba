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
* ``today``: the server's clock (a ``datetime.date``; None: the real UTC date), read by
  :meth:`day`; a test moves it to show what changes "from a date" (a drifting judge of
  :mod:`fake_llm_judges` with ``from_date``, given ``today=server.day``).
* ``reject_key``: the key is not valid: every chat request gets a 401 in the API's error format
  (models are still listed).

What each part does lives in a module of its own, all re-exported here:
``fake_llm_wire`` (both APIs' wire formats), ``fake_llm_faults`` (fault injection, held
replies, the request records), ``fake_llm_http`` and ``fake_llm_batches`` (routes and
handlers), ``fake_llm_replies`` (the default responder) and ``fake_llm_client`` (judge
settings pointed at the server, a fake clock). This module is the server itself: its knobs,
lifecycle and inspection.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from datetime import UTC, date, datetime
from http.server import ThreadingHTTPServer

from fake_llm_client import FakeTime, judge_settings
from fake_llm_faults import Fault, FaultInjection, Recorded
from fake_llm_http import _Handler, _Server
from fake_llm_replies import MALFORMED_REPLY, Responder, default_reply, poor_verdicts_for
from fake_llm_wire import (
    ANTHROPIC_ERROR_TYPES,
    ERROR_STATUS,
    QUOTA_FAULTS,
    anthropic_message,
    openai_completion,
    quota_refusal,
)

__all__ = ["ANTHROPIC_ERROR_TYPES", "ERROR_STATUS", "MALFORMED_REPLY", "QUOTA_FAULTS",
           "FakeLLMServer", "FakeTime", "Fault", "Recorded", "Responder", "anthropic_message",
           "default_reply", "judge_settings", "openai_completion", "poor_verdicts_for",
           "quota_refusal"]


class FakeLLMServer(FaultInjection):
    def __init__(self, *, latency: float = 0.0, rpm_limit: float | None = None,
                 burst_seconds: float = 2.0, fault_rate: float = 0.0,
                 fault_kinds: tuple[str, ...] = ("429", "503"), seed: int = 0,
                 responder: Responder | None = None, hang_seconds: float = 1.0,
                 retry_after: float = 1.0, batch_polls: int = 1, batch_errors: int = 0,
                 echo_auth_on_error: bool = False, hold_seconds: float = 30.0,
                 fault_rule: Callable[[str, str], str | None] | None = None,
                 no_quota: bool = False, reject_key: bool = False,
                 rate_limit_headers: bool = False, today: date | None = None) -> None:
        # reset() restores these, so one server can be shared by many tests
        self._knobs = dict(latency=latency, rpm_limit=rpm_limit,
                           burst=(rpm_limit or 0) / 60.0 * burst_seconds, fault_rate=fault_rate,
                           fault_kinds=fault_kinds, responder=responder or default_reply,
                           hang_seconds=hang_seconds, retry_after=retry_after,
                           batch_polls=batch_polls, batch_errors=batch_errors,
                           echo_auth_on_error=echo_auth_on_error, fault_rule=fault_rule,
                           hold_seconds=hold_seconds, no_quota=no_quota,
                           reject_key=reject_key, rate_limit_headers=rate_limit_headers,
                           today=today)
        self._burst_seconds = burst_seconds
        self.__dict__.update(self._knobs)
        self.records: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._init_faults(seed)
        self._ids = itertools.count(1)
        self._anthropic_batches: dict[str, dict] = {}
        self._openai_batches: dict[str, dict] = {}
        self._files: dict[str, bytes] = {}
        self._server: ThreadingHTTPServer | None = None

    def day(self) -> date:
        """The server's date: ``today`` when a test set it (its clock), else the UTC date."""
        return self.today or datetime.now(UTC).date()

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> FakeLLMServer:
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

    def __enter__(self) -> FakeLLMServer:
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

    # -- inspection (scripting: FaultInjection) ----------------------------------------

    def chat_records(self, api: str | None = None) -> list[Recorded]:
        with self._lock:
            return [r for r in self.records if r.api in ("anthropic", "openai")
                    and (api is None or r.api == api)]

    @property
    def chat_requests(self) -> int:
        return len(self.chat_records())

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

    def reset(self) -> None:
        """Forget requests and queued faults; every knob back to its constructor value."""
        self.release_replies()
        with self._lock:
            self.records.clear()
            self._faults.clear()
            self.max_in_flight = 0
            self.__dict__.update(self._knobs)

    # -- bookkeeping (called from handler threads) --------------------------------------

    def _record(self, record: Recorded) -> None:
        with self._lock:
            self.records.append(record)

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):06d}"
