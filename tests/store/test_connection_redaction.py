"""No command prints the store password, whichever form libpq reads it from.

One function, :func:`eval_harness.store.connection.redact_conninfo`, redacts every form; these
tests check it on its own, then the output of `migrate`, `report`, `gate`, `doctor` and
`run`'s first line for each form: against an unreachable server (127.0.0.1 port 1, every
command fails fast and prints its error) and against the reachable test database (the
`store:` line).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from urllib.parse import quote

import dagster as dg
import psycopg
import pytest

from eval_harness.store.connection import StoreLocation, StoreUnavailable, redact_conninfo

SECRET = "S3cret-alpha beta7"  # two words: a quoted key=value password may hold a space
FRAGMENTS = ("S3cret", "beta7")


@pytest.mark.unit
@pytest.mark.parametrize("text, expected", [
    ("postgresql://u:pw1234@db.example:5432/app",
     "postgresql://u:***@db.example:5432/app"),
    ("postgres://u:p@ss@w0rd@host/db", "postgres://u:***@host/db"),  # raw '@' in the password
    ("postgresql://:only-pw@host/db", "postgresql://:***@host/db"),
    ("postgresql://postgres:@/postgres?host=/tmp/s", "postgresql://postgres:***@/postgres?host=/tmp/s"),
    ("postgresql://u@host/db?password=pw1234", "postgresql://u@host/db?password=***"),
    ("postgresql://u@host/db?sslmode=require&password=pw1234&connect_timeout=3",
     "postgresql://u@host/db?sslmode=require&password=***&connect_timeout=3"),
    ("postgresql://u@host/db?pass%77ord=pw1234", "postgresql://u@host/db?pass%77ord=***"),
    ("postgresql://u@host/db?sslpassword=pw1234", "postgresql://u@host/db?sslpassword=***"),
    ("host=h user=u password=pw1234 dbname=d", "host=h user=u password=*** dbname=d"),
    ("host=h password = pw1234 dbname=d", "host=h password = *** dbname=d"),
    ("host=h password='pw 12 34' dbname=d", "host=h password=*** dbname=d"),
    (r"host=h password='it\'s a \\ secret' dbname=d", "host=h password=*** dbname=d"),
    (r"host=h password=pw\ 1234 dbname=d", "host=h password=*** dbname=d"),
    ("host=h password='never closed", "host=h password=***"),
    ("host=h sslpassword=pw1234 sslkey=k.pem", "host=h sslpassword=*** sslkey=k.pem"),
    ("host=h passfile=/home/u/.pgpass", "host=h passfile=/home/u/.pgpass"),  # a path, kept
    ('invalid URI: "postgresql://u:pw1234@[::1/db"', 'invalid URI: "postgresql://u:***@[::1/db"'),
    ("https://key:pw1234@llm.example/v1", "https://key:***@llm.example/v1"),
    ("postgresql://host:5432/db?application_name=a@b", "postgresql://host:5432/db?application_name=a@b"),
    ("postgresql://u@host/db", "postgresql://u@host/db"),
    ("the store reported: relation \"answers\" does not exist",
     "the store reported: relation \"answers\" does not exist"),
])
def test_redact_conninfo_hides_every_password_libpq_reads(text, expected):
    assert redact_conninfo(text) == expected
    assert redact_conninfo(expected) == expected  # redacting twice changes nothing


@pytest.mark.unit
def test_libpq_reads_the_passwords_that_are_redacted():
    """The forms above are what libpq itself takes as a password (not a guess of ours)."""
    parse = psycopg.conninfo.conninfo_to_dict
    assert parse("postgresql://u@host/db?pass%77ord=pw1234")["password"] == "pw1234"
    assert parse(r"host=h password='it\'s a \\ secret'")["password"] == "it's a \\ secret"
    assert parse(r"host=h password=pw\ 1234")["password"] == "pw 1234"
    assert parse("host=h password = pw1234")["password"] == "pw1234"


def test_store_location_and_store_unavailable_never_carry_the_password():
    url = f"host=127.0.0.1 port=1 password='{SECRET}'"
    location = StoreLocation(url, f"PostgreSQL at {url}")
    assert location.url == url  # the real one is still used to connect
    with pytest.raises(StoreUnavailable) as caught:
        location.connect()
    for shown in (location.description, repr(location), str(caught.value)):
        assert not any(fragment in shown for fragment in FRAGMENTS), shown
    assert (str(StoreUnavailable(f"cannot use {url}"))
            == "cannot use host=127.0.0.1 port=1 password=***")


# --- the commands --------------------------------------------------------------------------

def forms(params: dict[str, str], secret: str) -> dict[str, str]:
    """The same store in each form a password can take: URL user info, URL parameter,
    key=value plain and quoted, and a malformed URL libpq quotes back in its error."""
    host, port, user = params.get("host", ""), params.get("port"), params.get("user", "postgres")
    dbname = params.get("dbname", user)
    socket = host.startswith("/")
    netloc = "" if socket else host + (f":{port}" if port else "")
    query = f"?host={quote(host, safe='/')}" if socket else ""
    if socket and port:
        query += f"&port={port}"
    plain = secret.replace(" ", "")  # unquoted key=value and URL user info: no space
    keywords = " ".join(f"{k}={v}" for k, v in params.items() if k != "password")
    return {
        "url user info": f"postgresql://{user}:{quote(plain, safe='')}@{netloc}/{dbname}{query}",
        "url ?password=": f"postgresql://{user}@{netloc}/{dbname}{query}"
                          f"{'&' if query else '?'}password={quote(secret, safe='')}",
        "key=value": f"{keywords} password={plain}",
        "key=value quoted": f"{keywords} password='{secret}'",
    }


UNREACHABLE = {"host": "127.0.0.1", "port": "1", "user": "u", "dbname": "nothing"}
UNREACHABLE_FORMS = {**forms(UNREACHABLE, SECRET),
                     "malformed url": "postgresql://u:S3cret-alpha@[::1/db",
                     "unterminated quote": f"host=127.0.0.1 port=1 password='{SECRET}"}


def write_tiny(path):
    """A config naming one dataset folder, ``data``, empty."""
    (path.parent / "data").mkdir()
    path.write_text("default_dataset: tiny\ndatasets:\n  tiny: {path: data}\n"
                    "dagster: {home: dagster-home}\n"
                    "judges: {judge1: local:lexical, judge2: local:embedding}\n")


# the project of the commands below: no database until a test sets DATABASE_URL
pytestmark = pytest.mark.project(config=write_tiny, database=None, chdir=True)


def command_output(capsys, config: Path, *argv: str) -> tuple[int | None, str]:
    from eval_harness_pipelines import cli

    code = None
    with contextlib.suppress(RuntimeError):  # `run` is stopped after its first line, below
        code = cli.main(["--config", str(config), *argv])
    out, err = capsys.readouterr()
    return code, out + err


def stop_before_the_first_job(monkeypatch) -> None:
    """`run` prints `store: ...` first; the instance it opens next refuses, so it ends there."""
    def refuse():
        raise RuntimeError("stopped after the store line")

    monkeypatch.setattr(dg.DagsterInstance, "get", staticmethod(refuse))


COMMANDS = {"migrate": ["migrate"], "report": ["report"],
            "gate": ["gate", "--partition", "2025-03-04"],
            "doctor": ["doctor", "--offline"], "run": ["run"]}


@pytest.mark.parametrize("form", sorted(UNREACHABLE_FORMS))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_command_prints_the_password_of_an_unreachable_store(project, capsys, monkeypatch,
                                                                form, command):
    monkeypatch.setenv("DATABASE_URL", UNREACHABLE_FORMS[form])
    stop_before_the_first_job(monkeypatch)
    code, output = command_output(capsys, project, *COMMANDS[command])
    assert code in (1, 2), output  # doctor: 1 (a FAIL line); the others could not run: 2
    assert not any(fragment in output for fragment in FRAGMENTS), output
    assert "Traceback" not in output, output
    if form == "unterminated quote":  # named by its part, never quoted
        assert "value of password in DATABASE_URL opens a quote" in output, output
    else:
        assert "***" in output, output


def test_every_form_reaches_the_test_database(fresh):
    """The reachable forms below are the test database itself, password or not."""
    params = psycopg.conninfo.conninfo_to_dict(fresh.url)
    for url in forms(params, params.get("password") or SECRET).values():
        with StoreLocation(url).connection() as conn:
            assert conn.execute("SELECT current_database()").fetchone()[0] == params["dbname"]


@pytest.mark.parametrize("command", ["migrate", "doctor", "run"])
def test_the_store_line_never_shows_the_password(fresh, project, capsys, monkeypatch, command):
    params = psycopg.conninfo.conninfo_to_dict(fresh.url)
    secret = params.get("password") or SECRET  # a server that asks for one gets the real one
    fragments = [part for part in secret.split() if len(part) >= 4] or [secret]
    stop_before_the_first_job(monkeypatch)
    monkeypatch.setenv("DAGSTER_HOME", str(project.parent / "dagster-home"))
    for form, url in forms(params, secret).items():
        monkeypatch.setenv("DATABASE_URL", url)
        code, output = command_output(capsys, project, *COMMANDS[command])
        store_line = next(line for line in output.splitlines() if "PostgreSQL at " in line)
        assert "store" in store_line and "(DATABASE_URL)" in store_line, output
        assert not any(fragment in output for fragment in fragments), (form, output)
        assert "***" in store_line, (form, output)
        if command == "run":
            assert output.splitlines()[0] == store_line


# --- a malformed DATABASE_URL: the part named, nothing of it quoted -----

PASSWORD = "Qx7%ZZkw!v"  # none of its 4-character pieces is in any message of ours
MALFORMED = {
    "raw % in the password": (f"postgresql://u:{PASSWORD}@127.0.0.1:1/db",
                              "the password in DATABASE_URL has a '%' not followed by two "
                              "hex digits: percent-encode it as %25"),
    "trailing %": ("postgresql://u:Qx7kw!v%@127.0.0.1:1/db", "the password in DATABASE_URL "
                   "has a '%' not followed by two hex digits"),
    "%00": ("postgresql://u:Qx7%00kw!v@127.0.0.1:1/db", "the password in DATABASE_URL holds "
            "%00"),
    "raw @": ("postgresql://u:Qx7@kw!v@127.0.0.1:1/db", "an '@' in the password (or user) "
              "must be percent-encoded as %40"),
    "raw /": ("postgresql://u:Qx7/kw!v@127.0.0.1:1/db", "a '/' in the password (or user) must "
              "be percent-encoded as %2F"),
    "space": ("postgresql://u:Qx7 kw!v@127.0.0.1:1/db", "the password in DATABASE_URL has a "
              "space: percent-encode it as %20"),
    "% in ?password=": (f"postgresql://u@127.0.0.1:1/db?password={PASSWORD}",
                        "the value of parameter password in DATABASE_URL has a '%'"),
    "unquoted space": ("host=127.0.0.1 port=1 password=Qx7 kw!v", "text after the password "
                       "setting is not followed by '='"),
}


def pieces(text: str, size: int = 4) -> set[str]:
    return {text[i:i + size] for i in range(len(text) - size + 1)}


@pytest.mark.unit
@pytest.mark.parametrize("form", sorted(MALFORMED))
@pytest.mark.parametrize("command", ["migrate", "report", "doctor", "run"])
def test_a_malformed_url_names_its_part_and_quotes_nothing_of_the_password(
        project, capsys, monkeypatch, form, command):
    url, sentence = MALFORMED[form]
    monkeypatch.setenv("DATABASE_URL", url)
    stop_before_the_first_job(monkeypatch)
    code, output = command_output(capsys, project, *COMMANDS[command])
    assert code in (1, 2) and sentence.lower() in output.lower(), output
    password = url.split("password=")[-1] if "password=" in url else url[15:url.rindex("@")]
    leaked = {piece for piece in pieces(password) if piece in output}
    assert not leaked, (leaked, output)
    assert "Traceback" not in output and "PostgreSQL at" not in output, output
