"""The wire formats of the Anthropic Messages and OpenAI Chat Completions APIs, as the fake
LLM server speaks them: replies, error bodies, rate-limit headers, model lists and the
batch objects of both APIs."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

ERROR_STATUS = {"429": 429, "500": 500, "502": 502, "503": 503, "504": 504, "529": 529,
                "400": 400, "401": 401, "403": 403, "404": 404}
ANTHROPIC_ERROR_TYPES = {429: "rate_limit_error", 500: "api_error", 502: "api_error",
                         503: "api_error", 504: "timeout_error", 529: "overloaded_error",
                         400: "invalid_request_error", 401: "authentication_error",
                         403: "permission_error", 404: "not_found_error"}
QUOTA_FAULTS = ("no_quota", "billing_402", "spend_limit")  # see quota_refusal()


def _flatten(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def conversation(api: str, body: dict) -> tuple[str, str, int]:
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


def error_body(api: str, status: int, kind: str, message: str) -> dict:
    """The error body of ``api`` for a fault of ``kind`` answered with ``status``."""
    if api == "anthropic":
        return {"type": "error",
                "error": {"type": ANTHROPIC_ERROR_TYPES[status], "message": message}}
    return {"error": {"message": message, "type": "server_error" if status >= 500
                      else "invalid_request_error", "code": kind}}


def unknown_batch_body(api: str, batch_id: str) -> dict:
    """The 404 body of ``api`` for a batch id it does not know."""
    message = f"no batch with id {batch_id}"
    if api == "anthropic":
        return {"type": "error", "error": {"type": "not_found_error", "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "code": "not_found"}}


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


def rate_limit_headers(api: str, limit: float, remaining: int, reset: float) -> dict[str, str]:
    """``api``'s request rate-limit headers; ``reset``: seconds until the bucket is full."""
    if api == "anthropic":
        moment = datetime.now(UTC) + timedelta(seconds=reset)
        return {"anthropic-ratelimit-requests-limit": f"{limit:g}",
                "anthropic-ratelimit-requests-remaining": str(remaining),
                "anthropic-ratelimit-requests-reset":
                    moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")}
    duration = f"{round(reset * 1000)}ms" if reset < 1 else f"{reset:.3f}s"
    return {"x-ratelimit-limit-requests": f"{limit:g}",
            "x-ratelimit-remaining-requests": str(remaining),
            "x-ratelimit-reset-requests": duration}


def model_list(api: str) -> dict:
    """``GET /v1/models`` of ``api``."""
    if api == "anthropic":
        models = [{"type": "model", "id": m, "display_name": m,
                   "created_at": "2025-01-01T00:00:00Z"}
                  for m in ("claude-haiku-4-5", "claude-sonnet-4-5")]
        return {"data": models, "has_more": False,
                "first_id": models[0]["id"], "last_id": models[-1]["id"]}
    return {"object": "list", "data": [
        {"id": m, "object": "model", "created": 0, "owned_by": "fake"}
        for m in ("gpt-4o", "gpt-4o-mini")]}


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def anthropic_batch(batch: dict, batch_errors: int, base_url: str) -> dict:
    """The Message Batch object of ``batch`` (ended once it has no polls left)."""
    ended = batch["polls_left"] <= 0
    n = len(batch["requests"])
    errored = min(batch_errors, n) if ended else 0
    return {"id": batch["id"], "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {"processing": 0 if ended else n, "succeeded":
                               n - errored if ended else 0, "errored": errored,
                               "canceled": 0, "expired": 0},
            "created_at": _iso(batch["created"]),
            "expires_at": _iso(batch["created"] + timedelta(hours=24)),
            "ended_at": _iso(datetime.now(UTC)) if ended else None,
            "results_url": (f"{base_url}/v1/messages/batches/"
                            f"{batch['id']}/results") if ended else None}


def openai_batch(batch: dict, batch_errors: int) -> dict:
    """The Batch object of ``batch`` (completed once it has no polls left)."""
    done = batch["polls_left"] <= 0
    n = len(batch["lines"])
    errored = min(batch_errors, n)
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
