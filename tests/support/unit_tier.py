"""The unit tier (``-m unit``): tests of pure code, run alone in seconds.

A test marked ``unit`` uses no fixture that stands on a server (the test PostgreSQL's
``server_url``, the fake LLM provider's ``server``, and every fixture built on them), and
while its fixtures are made and while it runs, starting a process, opening a socket
connection or connecting to PostgreSQL fails it with a sentence saying so: the mark cannot
drift from what the test does.
"""

from __future__ import annotations

import socket
import subprocess
from contextlib import contextmanager, nullcontext

import psycopg
import pytest

SERVER_FIXTURES = frozenset({"server_url", "server"})


class NotAUnitTest(AssertionError):
    """A test marked ``unit`` reached for a process, the network or a database."""


@contextmanager
def no_processes_network_or_database(nodeid: str):
    """While inside: ``subprocess.Popen``, ``socket.connect`` and psycopg's connect raise."""
    def refuse(what: str):
        def refused(*args, **kwargs):
            raise NotAUnitTest(f"{nodeid} is marked unit but {what}: drop the unit mark, or "
                               "what the test reaches for.")
        return refused

    replaced = [(subprocess.Popen, "__init__", refuse("starts a process")),
                (socket.socket, "connect", refuse("opens a connection")),
                (psycopg, "connect", refuse("connects to PostgreSQL")),
                (psycopg.Connection, "connect", refuse("connects to PostgreSQL")),
                (psycopg.AsyncConnection, "connect", refuse("connects to PostgreSQL"))]
    # the owner's own attribute, or None where a class inherits it (socket.socket's connect)
    originals = [(owner, name, owner.__dict__.get(name)) for owner, name, _ in replaced]
    for owner, name, replacement in replaced:
        setattr(owner, name, replacement)
    try:
        yield
    finally:
        for owner, name, original in originals:
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


def _guard(item: pytest.Item):
    if item.get_closest_marker("unit") is None:
        return nullcontext()
    return no_processes_network_or_database(item.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    if item.get_closest_marker("unit") is not None:
        servers = sorted(SERVER_FIXTURES & set(item.fixturenames))
        if servers:
            raise NotAUnitTest(f"{item.nodeid} is marked unit but uses {', '.join(servers)} "
                               "(a server): drop the unit mark or the fixture.")
    with _guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    with _guard(item):
        return (yield)
