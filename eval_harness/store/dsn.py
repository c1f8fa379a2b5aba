"""A malformed connection string (``DATABASE_URL``), named by its part before libpq sees it.

libpq and psycopg quote the offending token back when they cannot parse a connection string
(``invalid percent-encoded token: "S3cr3t%ZZPw!x"``), and a password is usually the token: a
raw ``%``, ``@``, ``/`` or space in it is the commonest way to write a URL wrong. Redacting
``password=...`` cannot catch a bare token, so the string is checked here first and a problem
is one sentence naming the *part* (user, password, host, port, database, a parameter by its
name) and the fix, never quoting any of it. What this check does not foresee, libpq still
refuses; :func:`unquoted` then drops every quoted token from its message.

The URL rules are libpq's (``conninfo_uri_parse``): ``postgresql://`` or ``postgres://``,
user information up to the first ``@`` before any ``/``, then hosts, ``/dbname``,
``?key=value&...``; every part is percent-decoded, ``%`` must be followed by two hex digits
and ``%00`` is refused. The keyword/value form (``host=h password='a b'``) is read with its
own quoting rules.
"""

from __future__ import annotations

import re

_SCHEMES = ("postgresql://", "postgres://")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_KEYWORD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=?)")
_QUOTED_TOKEN = re.compile(r"\"[^\"]*\"|'[^']*'")


def malformed_dsn(dsn: str, source: str = "DATABASE_URL") -> str | None:
    """One sentence naming what is malformed in ``dsn`` and how to write it, quoting none
    of it; None when libpq will be able to parse it (it may still fail to connect)."""
    if dsn.startswith(_SCHEMES):
        return _malformed_url(dsn.split("://", 1)[1], source)
    return _malformed_keywords(dsn, source)


def unquoted(message: str) -> str:
    """libpq's ``message`` without the tokens it quotes (they may be parts of a password)."""
    return " ".join(_QUOTED_TOKEN.sub("(...)", message).split())


def _malformed_url(rest: str, source: str) -> str | None:
    slash = rest.find("/")
    at = rest.find("@")
    if at != -1 and (slash == -1 or at < slash):
        userinfo, hosts = rest[:at], rest[at + 1:]
    else:  # libpq reads no user information: a '/' in the password ends it early
        userinfo, hosts = "", rest
        question = rest.find("?")
        if at != -1 and (question == -1 or at < question) and ":" in rest[:slash]:
            return (f"{source} has an '@' after a '/': a '/' in the password (or user) must "
                    "be percent-encoded as %2F.")
    hosts, _, query = hosts.partition("?")
    hosts, _, dbname = hosts.partition("/")
    if "@" in hosts:
        return (f"{source} has more than one '@' before the host: an '@' in the password (or "
                "user) must be percent-encoded as %40.")
    user, colon, password = userinfo.partition(":")
    parts = [("user", user), ("password", password if colon else ""),
             ("host", hosts), ("database name", dbname)]
    for pair in filter(None, query.split("&")):
        key, _, value = pair.partition("=")
        named = key if _safe_key(key) else "a parameter"
        parts += [(f"name of {named}", key), (f"value of parameter {named}", value)]
    for name, text in parts:
        problem = _encoding_problem(text)
        if problem:
            return f"the {name} in {source} {problem}."
    return None


def _safe_key(key: str) -> bool:
    """Whether a URL parameter's name may be printed (a known key, or a plain word)."""
    return bool(re.fullmatch(r"[A-Za-z_]{1,40}", key))


def _encoding_problem(text: str) -> str | None:
    if _BAD_PERCENT.search(text):
        return "has a '%' not followed by two hex digits: percent-encode it as %25"
    if re.search(r"%00", text):
        return "holds %00 (a NUL byte), which PostgreSQL refuses: remove it"
    if re.search(r"\s", text):
        return "has a space: percent-encode it as %20"
    return None


def _malformed_keywords(dsn: str, source: str) -> str | None:
    """The keyword/value form: ``key = value`` pairs, a value quoted ('...', with \\' and
    \\\\) or running to the next unescaped whitespace."""
    position, previous = 0, None
    while position < len(dsn):
        if not dsn[position:].strip():
            return None
        match = _KEYWORD.match(dsn, position)
        after = f" after the {previous} setting" if previous else ""
        if match is None or not match.group(2):
            return (f"{source} is neither a postgresql:// URL nor keyword=value settings: "
                    f"text{after} is not followed by '='; quote a value that holds spaces "
                    "(password='a b') or write a postgresql:// URL.")
        key = match.group(1).lower()
        position = match.end()
        while position < len(dsn) and dsn[position].isspace():
            position += 1
        if dsn[position:position + 1] == "'":
            end = _closing_quote(dsn, position + 1)
            if end is None:
                return (f"the value of {key} in {source} opens a quote (') that is never "
                        "closed: close it, and write a quote inside it as \\'.")
            position = end + 1
        else:
            while position < len(dsn) and not dsn[position].isspace():
                position += 2 if dsn[position] == "\\" else 1
        previous = key
    return None


def _closing_quote(text: str, start: int) -> int | None:
    position = start
    while position < len(text):
        if text[position] == "\\":
            position += 2
            continue
        if text[position] == "'":
            return position
        position += 1
    return None
