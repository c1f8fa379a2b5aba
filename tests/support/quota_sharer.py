"""Another client on the same API key: a separate process sending chat requests to the fake
LLM server (tests/support/fake_llm_server.py) at a fixed rate whatever the replies, so the server's
own bucket is drained by someone the harness does not know about.

    with QuotaSharer(fake.anthropic_base_url, rpm=1500):
        ...  # the harness judges meanwhile

Its requests carry ``x-client: quota-sharer`` (:func:`is_sharer` tells them apart in the
server's records). A process, not a thread: it must not share the harness's event loop or
the server's interpreter lock more than a real second client would. Alone:
``python tests/support/quota_sharer.py BASE_URL RPM``.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

HEADER, VALUE = "x-client", "quota-sharer"
_BODY = json.dumps({"model": "claude-haiku-4-5", "max_tokens": 10,
                    "messages": [{"role": "user", "content": "ping"}]}).encode()


class QuotaSharer:
    """Runs the other client in a subprocess from ``__enter__`` to ``__exit__``."""

    def __init__(self, anthropic_base_url: str, *, rpm: float) -> None:
        self.base_url, self.rpm = anthropic_base_url, rpm
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> QuotaSharer:
        self._process = subprocess.Popen(
            [sys.executable, __file__, self.base_url, str(self.rpm)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None


def is_sharer(record) -> bool:
    """Whether a fake server record is one of the other client's requests."""
    return record.headers.get(HEADER) == VALUE


def send_forever(base_url: str, rpm: float) -> None:
    """Send one Messages request every ``60 / rpm`` seconds (answers are not waited for:
    up to 64 at once), until the process is terminated."""
    where = urlsplit(base_url)
    local = threading.local()

    def post() -> None:
        for _ in range(2):  # one reconnect if the kept-alive connection was closed
            connection = getattr(local, "connection", None)
            if connection is None:
                connection = local.connection = http.client.HTTPConnection(
                    where.hostname, where.port, timeout=30)
            try:
                connection.request("POST", "/v1/messages", body=_BODY, headers={
                    "content-type": "application/json", "x-api-key": "sk-ant-sharer",
                    "anthropic-version": "2023-06-01", HEADER: VALUE})
                connection.getresponse().read()
                return
            except (OSError, http.client.HTTPException):
                connection.close()
                local.connection = None

    interval = 60.0 / rpm
    with ThreadPoolExecutor(64) as pool:
        due = time.monotonic()
        while True:
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            pool.submit(post)
            due += interval


if __name__ == "__main__":
    send_forever(sys.argv[1], float(sys.argv[2]))
