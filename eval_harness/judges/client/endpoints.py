"""Where each provider's API is served: its default base URL, and the normalised form of a base
URL that identifies the server in the reply cache key.

Two servers speaking the same API (OpenAI and a vLLM server behind ``OPENAI_BASE_URL``, or two
gateways) can serve models of the same name and still answer differently, so the server is
part of what changes a judge's output (see :meth:`ChatRequest.cache_key
<eval_harness.judges.protocol.ChatRequest.cache_key>`). A base URL is normalised to
``scheme://host[:port]/path``: scheme and host in lower case, the port only when it is not
the scheme's default, no trailing slash. Credentials, query string and fragment are dropped,
so they never reach a cache key, a log line or the store. No base URL means the provider's
default, so leaving ``OPENAI_BASE_URL`` unset and setting it to ``https://api.openai.com/v1``
name the same server.
"""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1",
                     "anthropic": "https://api.anthropic.com"}
_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalised_base_url(url: str) -> str:
    """``url`` as ``scheme://host[:port]/path`` (see the module docstring).

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
        raise ValueError("a base URL must look like https://host[:port]/path")
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def endpoint_of(provider: str, base_url: str | None) -> str:
    """The normalised base URL a ``provider`` client given ``base_url`` talks to: the
    provider's default when ``base_url`` is empty ("" for a provider without a default)."""
    url = base_url or DEFAULT_BASE_URLS.get(provider)
    return normalised_base_url(url) if url else ""
