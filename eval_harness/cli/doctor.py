"""``eval-harness doctor``: is this installation ready to run? One line per check.

    ok    config       /work/main/config.yaml
    ok    store        embedded PostgreSQL with pgvector in ... (PostgreSQL 18.3)
    ok    pgvector     extension vector 0.8.6 installed; a distance query and an HNSW index build work
    warn  migrations   schema 'eval_harness' is behind: 7 of 8 applied; pending: 0008_...: run ...
    ok    privileges   role 'rag' owns the harness schema 'eval_harness'
    ok    datasets     default 'scifact' ingested (5183 documents); configured: scifact
    warn  indexes      'prod' keyword query: Seq Scan over all ~500,000 rows of public.l2_ins...
    warn  indexes      'prod' missing: CREATE INDEX CONCURRENTLY "l2_insights_content_gin_idx...
    FAIL  embedder     'prod' local:all-MiniLM-L6-v2 needs the optional local-embeddings extra...
    warn  keyword      'prod' tsvector: null, so keyword search parses every document a query...
    warn  keyword      'prod' remove it as the owner of public.l2_insights (...): ALTER TABLE ...
    ok    judge1       openai:gpt-4o: OPENAI_API_KEY set
    warn  judge2       anthropic:claude-haiku-4-5: ANTHROPIC_API_KEY not set: falls back to ...
    ok    local        local:embedding: offline, no key or network needed
    ok    openai       reachable at https://api.openai.com/v1, key accepted (0.31 s)

Exit 0 when no check FAILs (warnings allowed), else 1. A bad config is a FAIL line, not an
error. The doctor only reads: it never applies migrations or writes the store (its session
is read-only; the index lines' query costs are EXPLAIN estimates; the keyword line of a
``tsvector: null`` dataset times a few real keyword queries, and a temporary table, in a
transaction it rolls back: :mod:`eval_harness.cli.doctor_datasets`). A role that may not
create or write the harness schema, or read a live relation, is a line of its own, never
"all is well". API keys are reported as set or not set and never shown; the reachability
probe (one models-list request per provider with a key, skipped with ``--offline``) maps
every error to one sanitised line.
"""

from __future__ import annotations

import argparse
from typing import Callable, Iterable, Iterator, Mapping

import psycopg

from eval_harness.cli.common import describe_config
from eval_harness.cli.doctor_check import FAIL, OK, SKIP, WARN, Check, first_line
from eval_harness.cli.doctor_datasets import embedder_checks, index_checks, keyword_checks
from eval_harness.cli.doctor_judges import PROBE_TIMEOUT_SECONDS, judge_checks
from eval_harness.escaping.terminal import say
from eval_harness.settings import ConfigError, Settings, load_settings
from eval_harness.datasets.live_catalog import live_datasets, live_relations
from eval_harness.store.catalog import (SchemaPrivileges, available_extension_version,
                                        installed_extension_version, make_session_read_only,
                                        relation_exists, schema_privileges, select_refusal,
                                        server_version)
from eval_harness.store.connection import (StoreLocation, StoreUnavailable, locate_store,
                                           redact_conninfo)
from eval_harness.datasets.register import live_dataset_names
from eval_harness.datasets.ingest import documents_per_dataset
from eval_harness.store.migrate import (MigrationError, applied_migrations,
                                        available_migrations, pending_migrations)
from eval_harness.store.vector_probe import VectorProbeFailed, probe_pgvector

EXIT_HEALTHY, EXIT_UNHEALTHY = 0, 1


# -- the store -------------------------------------------------------------------------


def check_pgvector(conn: psycopg.Connection, location: StoreLocation | None = None) -> Check:
    """Installed, and proven: a distance and a tiny HNSW index in a rolled-back transaction."""
    version = installed_extension_version(conn, "vector")
    if version is not None:
        try:
            probe_pgvector(conn)
        except VectorProbeFailed as exc:
            return Check(FAIL, "pgvector", f"extension vector {version} gives wrong answers: {exc}")
        except psycopg.errors.InsufficientPrivilege:
            return Check(OK, "pgvector", f"extension vector {version} installed (not proven: "
                         "this role may not create temporary tables)")
        except psycopg.Error as exc:
            crashed = location.failure_message(exc) if location else None
            if crashed:
                return Check(FAIL, "pgvector", f"extension vector {version} crashed the server "
                             f"on a distance query or HNSW build: {crashed}")
            return Check(FAIL, "pgvector", f"extension vector {version} failed a distance query "
                         f"or HNSW build: {first_line(exc)}")
        return Check(OK, "pgvector", f"extension vector {version} installed; a distance query "
                     "and an HNSW index build work")
    available = available_extension_version(conn, "vector")
    if available is not None:
        return Check(WARN, "pgvector", f"available ({available}) but not installed in this "
                     "database: run `eval-harness migrate`")
    return Check(FAIL, "pgvector", "this PostgreSQL server has no pgvector extension: install "
                 "pgvector on it, or unset DATABASE_URL to use the embedded server")


def check_migrations(conn: psycopg.Connection, schema: str,
                     privileges: SchemaPrivileges | None = None) -> Check:
    """Applied vs available migrations of the harness ``schema``; applies nothing."""
    try:
        available = available_migrations()
        pending = pending_migrations(conn, schema)
    except MigrationError as exc:  # a file changed after it was applied
        return Check(FAIL, "migrations", str(exc))
    unknown = sorted(set(applied_migrations(conn, schema)) - {m.version for m in available})
    if unknown:
        return Check(WARN, "migrations", "the store has migrations this version does not know "
                     f"({', '.join(f'{v:04d}' for v in unknown)}): upgrade eval-harness")
    if not pending:
        return Check(OK, "migrations", f"schema '{schema}': {len(available)} of "
                     f"{len(available)} applied (latest {available[-1].name})" if available
                     else "none to apply")
    who = "" if privileges is None else owner_statement(schema, privileges)
    if len(pending) == len(available):
        return Check(WARN, "migrations", f"the store has no eval-harness schema '{schema}' yet "
                     f"(0 of {len(available)} applied; first {available[0].name}): run "
                     f"`eval-harness migrate`{who}")
    return Check(WARN, "migrations", f"schema '{schema}' is behind: {len(available) - len(pending)}"
                 f" of {len(available)} applied; pending: {', '.join(m.name for m in pending)}: "
                 f"run `eval-harness migrate`{who}")


def owner_statement(schema: str, privileges: SchemaPrivileges) -> str:
    """What lets this role migrate the harness ``schema`` when it may not (empty when it
    may): the statement an owner runs, as the end of the migrations line."""
    p = privileges
    if p.may_migrate:
        return ""
    if not p.exists:
        return (f" with a role that may create it (this role '{p.role}' may not), or let this "
                f"one: the database's owner runs CREATE SCHEMA {schema} AUTHORIZATION "
                f"{p.role};")
    return (f" with a role that may alter it (this role '{p.role}' may not), or let this "
            f"one: the schema's owner '{p.owner}' runs ALTER SCHEMA {schema} OWNER TO "
            f"{p.role};")


def check_privileges(conn: psycopg.Connection, schema: str, privileges: SchemaPrivileges,
                     relations: Iterable[str]) -> Iterator[Check]:
    """Whether this role may migrate and write the harness schema and SELECT every live
    relation (``schema.name``): a read-only role runs the read-only commands only."""
    p = privileges
    if p.owns:
        yield Check(OK, "privileges", f"role '{p.role}' owns the harness schema '{schema}'")
    elif not p.exists:
        yield (Check(OK, "privileges", f"role '{p.role}' may create the harness schema "
                     f"'{schema}'") if p.may_create else
               Check(FAIL, "privileges", f"role '{p.role}' may not create the harness schema "
                     f"'{schema}' in this database: create it once with a role that may "
                     f"(CREATE SCHEMA {schema} AUTHORIZATION {p.role}) or GRANT CREATE ON "
                     f"DATABASE to '{p.role}'"))
    elif not p.may_use:
        yield Check(FAIL, "privileges", f"role '{p.role}' has no USAGE on the harness schema "
                    f"'{schema}' (owner '{p.owner}'): GRANT USAGE ON SCHEMA {schema} TO {p.role}")
    elif p.read_only_tables or not p.may_create:
        what = (f"may not write {len(p.read_only_tables)} of its tables (e.g. "
                f"{p.read_only_tables[0]})" if p.read_only_tables else "may not CREATE in it")
        yield Check(WARN, "privileges", f"role '{p.role}' {what} (owner '{p.owner}'): read-only "
                    "commands (report, search, agreement, review export, doctor) work; migrate,"
                    " ingest, judge, calibrate and gate need the owner's role")
    else:
        yield Check(OK, "privileges", f"role '{p.role}' may create and write in the harness "
                    f"schema '{schema}' (owner '{p.owner}'; a pending migration needs that role)")
    relations = list(dict.fromkeys(relations))
    refused = [why for r in relations if (why := select_refusal(conn, *r.split(".", 1)))]
    yield from (Check(FAIL, "privileges", why) for why in refused)
    if relations and not refused:
        yield Check(OK, "privileges", f"role '{p.role}' may SELECT the live relations "
                    f"{', '.join(relations)}")


def check_datasets(conn: psycopg.Connection, settings: Settings) -> Check:
    """Configured vs ingested datasets; the default one must be both."""
    configured = ", ".join(sorted(settings.datasets)) or "none"
    default = settings.default_dataset
    if default not in settings.datasets:
        return Check(FAIL, "datasets", f"default_dataset '{default}' is not configured under "
                     f"datasets: in config.yaml (configured: {configured})")
    if not relation_exists(conn, "datasets") or not relation_exists(conn, "l2_insights"):
        return Check(WARN, "datasets", "cannot tell which datasets are ingested before the "
                     "schema is migrated: run `eval-harness migrate`")
    documents = documents_per_dataset(conn)
    live = live_dataset_names(conn)
    ingested = ", ".join(f"{name} (live)" if name in live else f"{name} ({n} documents)"
                         for name, n in documents.items()) or "none"
    if settings.datasets[default].is_live:
        if default not in live:
            return Check(WARN, "datasets", f"default dataset '{default}' is live and not "
                         f"attached: run `eval-harness attach --dataset {default}` or "
                         f"`eval-harness run` (configured: {configured}; in the store: "
                         f"{ingested})")
        return Check(OK, "datasets", f"default '{default}' live, attached "
                     f"({settings.datasets[default].live.corpus.relation}); configured: "
                     f"{configured}; in the store: {ingested}")
    if not documents.get(default):
        return Check(WARN, "datasets", f"default dataset '{default}' is not ingested: run "
                     f"`eval-harness run` (configured: {configured}; ingested: {ingested})")
    return Check(OK, "datasets", f"default '{default}' ingested; configured: {configured}; "
                 f"ingested: {ingested}")


def _datasets_in_store(conn: psycopg.Connection) -> set[str] | None:
    """The datasets the store holds; None before the schema is migrated."""
    if not relation_exists(conn, "datasets") or not relation_exists(conn, "l2_insights"):
        return None
    return set(documents_per_dataset(conn))


def store_checks(settings: Settings) -> Iterator[Check]:
    """Reachability, pgvector, migrations, privileges, datasets and live indexes, on one
    read-only connection; a check that errors is one FAIL line and the next still runs."""
    try:
        location = locate_store(settings)
        conn = location.connect(autocommit=True)
    except (StoreUnavailable, psycopg.Error) as exc:
        # psycopg may quote a malformed URL back, password included
        yield Check(FAIL, "store", redact_conninfo(first_line(exc)))
        for name in ("pgvector", "migrations", "datasets"):
            yield Check(SKIP, name, "the store is unreachable")
        return
    with conn:
        try:
            make_session_read_only(conn)
            version = server_version(conn)
        except psycopg.Error as exc:
            yield Check(FAIL, "store", redact_conninfo(first_line(exc)))
            return
        yield Check(OK, "store", f"{location.description} (PostgreSQL {version})")
        seen: dict = {"live": []}

        def migrations() -> Iterator[Check]:
            seen["privileges"] = schema_privileges(conn, settings.schema)
            yield check_migrations(conn, settings.schema, seen["privileges"])

        def privileges() -> Iterator[Check]:
            try:
                current = not pending_migrations(conn, settings.schema)
            except MigrationError:
                current = False
            seen["current"] = current
            seen["live"] = live_datasets(conn, settings.datasets, attached_known=current)
            if "privileges" in seen:
                yield from check_privileges(conn, settings.schema, seen["privileges"],
                                            live_relations(settings.datasets, seen["live"]))

        for name, check in (("pgvector", lambda: [check_pgvector(conn, location)]),
                            ("migrations", migrations), ("privileges", privileges),
                            ("datasets", lambda: [check_datasets(conn, settings)]),
                            ("indexes", lambda: index_checks(conn, settings, seen["live"])),
                            ("embedder", lambda: embedder_checks(
                                conn, settings, seen["live"], _datasets_in_store(conn))),
                            ("keyword", lambda: keyword_checks(
                                conn, settings, seen["live"],
                                migrated=seen.get("current", False)))):
            if conn.broken or conn.closed:  # a crashed backend takes the session with it
                yield Check(SKIP, name, "the server went away (see the pgvector line)")
                continue
            try:
                yield from check()
            except psycopg.Error as exc:  # e.g. permission denied on a table
                yield Check(FAIL, name, redact_conninfo(first_line(exc)))


# -- the command -----------------------------------------------------------------------


def diagnose(config_path: str | None = None, environ: Mapping[str, str] | None = None, *,
             offline: bool = False,
             probe_timeout: float = PROBE_TIMEOUT_SECONDS) -> Iterator[Check]:
    """Every check in order; later checks are skipped when the config does not load."""
    try:
        settings = load_settings(config_path, environ)
    except ConfigError as exc:
        yield Check(FAIL, "config", str(exc))
        return
    yield Check(OK if settings.config_path else WARN, "config", describe_config(settings))
    yield from store_checks(settings)
    yield from judge_checks(settings, offline=offline, timeout=probe_timeout)


def run_doctor(config_path: str | None = None, environ: Mapping[str, str] | None = None, *,
               offline: bool = False, probe_timeout: float = PROBE_TIMEOUT_SECONDS,
               write: Callable[[str], None] = lambda line: say(line, flush=True)) -> int:
    """Print one line per check; 0 when none FAILed, else 1."""
    failed = False
    for check in diagnose(config_path, environ, offline=offline, probe_timeout=probe_timeout):
        write(check.line())
        failed = failed or check.status == FAIL
    return EXIT_UNHEALTHY if failed else EXIT_HEALTHY


def cmd_doctor(args, settings: Settings | None = None) -> int:
    return run_doctor(args.config, offline=args.offline, probe_timeout=args.timeout)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def add_doctor_command(subparsers) -> None:
    doctor = subparsers.add_parser(
        "doctor", help="check config, store, schema, datasets, judge keys and providers")
    doctor.add_argument("--offline", action="store_true",
                        help="skip the providers' network checks")
    doctor.add_argument("--timeout", type=_positive_seconds, default=PROBE_TIMEOUT_SECONDS,
                        help=f"seconds per provider check (default {PROBE_TIMEOUT_SECONDS:g})")
    # The doctor loads the config itself, so a bad one is a FAIL line rather than exit 2.
    doctor.set_defaults(func=cmd_doctor, loads_own_settings=True)
