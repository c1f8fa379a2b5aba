"""The fake LLM server's HTTP side: a threading server on 127.0.0.1 and its request handler,
which routes both APIs' paths, answers chat requests (with the fault the server decides)
and the models list; the batch endpoints are ``fake_llm_batches``."""

from __future__ import annotations

import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from fake_llm_batches import BatchRoutes
from fake_llm_faults import Fault, Recorded
from fake_llm_replies import MALFORMED_REPLY
from fake_llm_wire import (
    ERROR_STATUS,
    QUOTA_FAULTS,
    anthropic_message,
    conversation,
    error_body,
    model_list,
    openai_completion,
    quota_refusal,
)

if TYPE_CHECKING:
    from fake_llm_server import FakeLLMServer


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default backlog of 5 drops connections under concurrency
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address) -> None:
        """A client that went away (a stopped second client, a timeout test) is no error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BatchRoutes, BaseHTTPRequestHandler):
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
        system, user, input_tokens = conversation(api, body)
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
        self._send(status, error_body(api, status, fault.kind, message), headers=headers)

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
        self._send(200, model_list(api))
