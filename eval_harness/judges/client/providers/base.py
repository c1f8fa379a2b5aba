"""The provider protocol: what the pipeline asks of a chat provider, and the typed decision on
an error.

A provider module (one per API, found through :mod:`eval_harness.judges.client.providers`)
defines ``PROVIDER``, a :class:`Provider` that owns everything specific to that API:

* where its key and server come from: :attr:`~Provider.key_variable` (and whether a key is
  needed at all), :attr:`~Provider.base_url_variable` and :attr:`~Provider.default_base_url`;
* its client (:class:`ChatClient`), built with the SDK's own retries off (``max_retries=0``)
  so the pipeline's are the only ones, its timeout from ``judges.timeout_seconds``;
* :meth:`~Provider.classify`: its SDK's errors as one :class:`RetryDecision` (retry or not,
  the class, the server's Retry-After);
* :meth:`~Provider.read_rate_headers`: what its responses' headers say about its limits;
* :meth:`~Provider.probe`: the doctor's one cheap authenticated request;
* its defaults where ``judges.rate_limits`` / ``judges.send_temperature`` name it not.

The pipeline around it (runner, session, batch, doctor) knows no provider by name. A client
sends one :class:`~eval_harness.judges.protocol.ChatRequest` and returns the reply text with
its usage, or raises the SDK's exception untouched (the pipeline asks the provider to
classify it, see :mod:`eval_harness.judges.client.retry`). Batch methods submit many requests
at once, report whether the batch has ended and return each request's reply (or an error
message) by custom id.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from eval_harness.errors import InvalidInput
from eval_harness.judges.client.rate_headers import RateSignal, retry_after_seconds
from eval_harness.settings.judges import RateLimit

if TYPE_CHECKING:
    from eval_harness.judges.protocol import ChatRequest, Completion
    from eval_harness.settings import Settings

AUTH_STATUS = frozenset({401, 403})  # the key is not valid / not allowed to do this
RETRYABLE_STATUS = {429: "rate_limit", 529: "overloaded", 500: "server_error",
                    502: "server_error", 503: "server_error", 504: "server_error"}
_DEFAULT_PORTS = {"http": 80, "https": 443}


class BadProviderResponse(Exception):
    """A successful HTTP status whose body is not what the API promises (e.g. HTML)."""


@dataclass(frozen=True)
class RetryDecision:
    """What a provider makes of one error: its ``kind`` (see
    :mod:`eval_harness.judges.client.retry` for the classes), whether a retry may help,
    the HTTP status, the wait the server asked for (seconds) and the provider's own error
    code where it matters (kinds ``quota`` and ``auth``)."""

    kind: str
    retry: bool
    status_code: int | None = None
    retry_after: float | None = None
    code: str | None = None

    @classmethod
    def no(cls, kind: str, status_code: int | None = None,
           code: str | None = None) -> RetryDecision:
        """Not retried: waiting cannot fix it."""
        return cls(kind, False, status_code, None, code)

    @classmethod
    def transient(cls, kind: str, status_code: int | None = None,
                  retry_after: float | None = None) -> RetryDecision:
        """Retried after a backoff, never sooner than the server's ``retry_after``."""
        return cls(kind, True, status_code, retry_after)


def decide_status(status: int, headers: Mapping[str, str] | None, *,
                  error_code: str | None = None) -> RetryDecision:
    """The decision on an HTTP error status that is neither quota nor a provider quirk: 401 /
    403 ``auth``, the retried statuses of :data:`RETRYABLE_STATUS` (with the server's
    Retry-After), any other 4xx ``client_error``, any other status ``server_error``."""
    if status in AUTH_STATUS:
        return RetryDecision.no("auth", status, error_code or ("authentication" if status == 401
                                                                 else "permission"))
    if status in RETRYABLE_STATUS:
        return RetryDecision.transient(RETRYABLE_STATUS[status], status,
                                       retry_after_seconds(headers))
    kind = "client_error" if 400 <= status < 500 else "server_error"
    return RetryDecision(kind, False, status, retry_after_seconds(headers))


def normalised_base_url(url: str) -> str:
    """``url`` as ``scheme://host[:port]/path``: the server, as it is in a reply's cache key.

    Two servers speaking the same API (OpenAI and a vLLM server, or two gateways) can serve
    models of the same name and still answer differently, so the server is part of what
    changes a judge's output (see
    :func:`eval_harness.judges.client.reply_cache.cache_key`). Scheme and host in lower case,
    the port only when it is not the scheme's default, no trailing slash; credentials, query
    string and fragment dropped, so they never reach a cache key, a log line or the store.

    Raises ValueError for a value that is not an absolute http(s) URL; the message does not
    repeat the value, which may hold credentials.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number
        host, port = None, None
    if scheme not in _DEFAULT_PORTS or not host:
        raise InvalidInput("a base URL must look like https://host[:port]/path")
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


@dataclass(frozen=True)
class BatchState:
    done: bool
    status: str


class ChatClient(Protocol):
    """One provider's client in a run (built by :meth:`Provider.client`)."""

    name: str
    base_url: str  # normalised (normalised_base_url): the server, in the cache key

    async def complete(self, request: ChatRequest) -> Completion: ...

    async def submit_batch(self, items: Sequence[tuple[str, ChatRequest]]) -> str: ...

    async def batch_state(self, batch_id: str) -> BatchState: ...

    async def batch_results(self, batch_id: str) -> dict[str, Completion | str]: ...

    async def aclose(self) -> None: ...


class Provider:
    """One chat API: the parts of it the pipeline asks for (see the module docstring).

    A subclass sets the class attributes and implements :meth:`client`, :meth:`classify`,
    :meth:`read_rate_headers` and :meth:`probe`. The key and the base URL are read from
    :attr:`Settings.provider_variables
    <eval_harness.settings.Settings.provider_variables>` (the environment's
    ``*_API_KEY`` / ``*_BASE_URL`` variables, read by the settings); a provider with typed
    settings of its own overrides :meth:`api_key` / :meth:`configured_base_url`.
    """

    name: str
    key_variable: str                 # the environment variable holding its API key
    base_url_variable: str            # ... and the one pointing it at another server
    default_base_url: str | None = None
    key_required: bool = True         # False: a server that takes any key (or none)
    default_rate_limit: RateLimit = RateLimit(60)   # when judges.rate_limits names it not
    sends_temperature: bool = True    # when judges.send_temperature names it not

    def __repr__(self) -> str:
        return f"<provider {self.name}>"

    def api_key(self, settings: Settings) -> str | None:
        """The API key the settings hold for this provider (None: not set)."""
        return settings.provider_variables.get(self.key_variable) or None

    def configured_base_url(self, settings: Settings) -> str | None:
        """The base URL the settings point this provider at (None: its default server)."""
        return settings.provider_variables.get(self.base_url_variable) or None

    def endpoint(self, base_url: str | None) -> str:
        """The normalised base URL a client given ``base_url`` talks to: the default server
        when ``base_url`` is empty ("" for a provider without a default)."""
        url = base_url or self.default_base_url
        return normalised_base_url(url) if url else ""

    def client(self, *, api_key: str | None, base_url: str | None, timeout: float,
               send_temperature: bool) -> ChatClient:
        raise NotImplementedError

    def classify(self, exc: BaseException) -> RetryDecision | None:
        """The decision on ``exc`` if it is this provider's SDK error, else None (the
        pipeline then classifies it as a plain timeout, connection error or bug)."""
        raise NotImplementedError

    def read_rate_headers(self, headers: Mapping[str, str] | None, *,
                          now: datetime | None = None) -> RateSignal:
        """What a response's headers say about this provider's rate limits."""
        raise NotImplementedError

    async def probe(self, *, api_key: str, base_url: str, timeout: float) -> None:
        """One cheap authenticated request (a models list), no retries: raises the SDK's
        error when it fails."""
        raise NotImplementedError


async def parsed(raw: Any) -> Any:
    """The body of an SDK's raw response (``with_raw_response``), parsed into its model:
    ``parse()`` is a coroutine in one SDK's async client and a plain call in the other's."""
    body = raw.parse()
    return await body if inspect.isawaitable(body) else body


# Error codes and types (OpenAI ``error.code`` / ``error.type``, Anthropic ``error.type`` /
# ``error.details.error_code``) saying the account cannot pay for the call. One set for every
# provider: a gateway passes one API's billing errors on through another's SDK.
QUOTA_CODES = frozenset({
    "insufficient_quota", "billing_hard_limit_reached", "billing_not_active",  # OpenAI
    "billing_error", "enforced_spend_limit_reached", "contract_spend_limit_reached",
    "linked_organization_spend_limit_reached", "linked_organization_billing_unavailable",
})
_QUOTA_WORDING = ("credit balance is too low",)  # Anthropic's 400 invalid_request_error


def quota_code(exc: Any) -> str | None:
    """The code under which an SDK's HTTP status error (``status_code``, and ``code`` /
    ``error_code`` / ``type`` where its SDK sets them) says the account has no quota or
    credit left, or None when it says something else."""
    for value in (getattr(exc, "code", None), getattr(exc, "error_code", None),
                  getattr(exc, "type", None)):
        if isinstance(value, str) and value in QUOTA_CODES:
            return value
    if int(exc.status_code) == 402:
        return "payment_required"
    wording = str(getattr(exc, "api_message", None) or getattr(exc, "message", "")).lower()
    if 400 <= int(exc.status_code) < 500 and any(w in wording for w in _QUOTA_WORDING):
        return "credit_balance_too_low"
    return None


def error_code_of(exc: Any) -> str | None:
    """The provider's own name for an error (OpenAI ``code``, Anthropic ``type``)."""
    for value in (getattr(exc, "code", None), getattr(exc, "type", None)):
        if isinstance(value, str) and value and value != "invalid_request_error":
            return value
    return None
