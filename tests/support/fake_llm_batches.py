"""The batch endpoints of the fake LLM server: Anthropic Message Batches (create, poll,
results) and OpenAI Files + Batch (upload, create, poll; results are files).

``BatchRoutes`` is a part of the server's request handler (``fake_llm_http._Handler``): it
answers with the handler's ``_send`` and keeps batches in the server (``self.fake``).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from email.parser import BytesParser
from email.policy import HTTP
from typing import TYPE_CHECKING

from fake_llm_faults import Recorded
from fake_llm_wire import (
    anthropic_batch,
    anthropic_message,
    conversation,
    openai_batch,
    openai_completion,
    quota_refusal,
    unknown_batch_body,
)

if TYPE_CHECKING:
    from fake_llm_server import FakeLLMServer


class BatchRoutes:
    fake: FakeLLMServer

    def _refused_for_quota(self, api: str, body: dict) -> bool:
        """With ``no_quota``, refuse a batch creation (recorded) as the API would; True then."""
        if not self.fake.no_quota:
            return False
        status, payload = quota_refusal(api, "no_quota")
        self.fake._record(Recorded(f"{api}-batch", "POST", self.path, self._headers(), body,
                                   status, fault="no_quota"))
        self._send(status, payload)
        return True

    def _unknown_batch(self, api: str, batch_id: str) -> bool:
        """Record a batch poll or results request; answer 404 (True) if the id is unknown."""
        fake = self.fake
        batches = fake._anthropic_batches if api == "anthropic" else fake._openai_batches
        known = batch_id in batches
        fake._record(Recorded(f"{api}-batch", "GET", self.path, self._headers(), None,
                              200 if known else 404))
        if known:
            return False
        self._send(404, unknown_batch_body(api, batch_id))
        return True

    # -- Anthropic Message Batches ------------------------------------------------------

    def _anthropic_batch_view(self, batch: dict) -> dict:
        return anthropic_batch(batch, self.fake.batch_errors, self.fake.anthropic_base_url)

    def _anthropic_batch_create(self, body: dict) -> None:
        fake = self.fake
        if self._refused_for_quota("anthropic", body):
            return
        batch = {"id": fake._new_id("msgbatch_"), "requests": body["requests"],
                 "polls_left": fake.batch_polls, "created": datetime.now(UTC)}
        fake._record(Recorded("anthropic-batch", "POST", self.path, self._headers(), body, 200))
        fake._anthropic_batches[batch["id"]] = batch
        self._send(200, self._anthropic_batch_view(batch))

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
                system, user, input_tokens = conversation("anthropic", params)
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
        return openai_batch(batch, self.fake.batch_errors)

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
            system, user, input_tokens = conversation("openai", line["body"])
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
