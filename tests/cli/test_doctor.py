"""``eval-harness doctor`` on a real store and against the fake provider server.

Keys are distinctive strings so a leak of any part of them would show in the output.
"""

from __future__ import annotations

import socket
import uuid

import psycopg
import pytest
from psycopg import sql

from eval_harness.cli import main
from eval_harness.cli.doctor import run_doctor
from eval_harness.store.migrate import available_migrations
from live_store import seeds_config_yaml

OPENAI_KEY = "sk-doctor-OPENAI-7f3e9a1c5b2d"
ANTHROPIC_KEY = "sk-ant-doctor-ANTHROPIC-4c8e2a6f0b9d"
KEY_FRAGMENTS = ("7f3e9a1c5b2d", "4c8e2a6f0b9d", "doctor-OPENAI", "doctor-ANTHROPIC")
DATASET = f"doctor_{uuid.uuid4().hex[:6]}"


def write_config(tmp_path, *, judge1="local:lexical", judge2="local:embedding",
                 fallback=True, extra=""):
    path = tmp_path / "config.yaml"
    precomputed(tmp_path / "data")
    path.write_text(f"default_dataset: {DATASET}\n"
                    f"datasets:\n  {DATASET}:\n    path: data\n"
                    f"judges:\n  judge1: {judge1}\n  judge2: {judge2}\n"
                    f"  fallback_to_local: {'true' if fallback else 'false'}\n{extra}",
                    encoding="utf-8")
    return str(path)


def precomputed(folder):
    """The dataset folder has its vectors precomputed, so ingesting it needs no embedder
    (the doctor looks for the file only)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "embeddings.npz").write_bytes(b"")


def doctor(config, environ, **options) -> tuple[int, list[str]]:
    lines: list[str] = []
    code = run_doctor(config, environ, write=lines.append, **options)
    return code, lines


def line(lines: list[str], name: str) -> str:
    found = [entry for entry in lines if entry.split()[1] == name]
    assert len(found) == 1, lines
    return found[0]


def assert_no_key(text: str) -> None:
    for fragment in KEY_FRAGMENTS:
        assert fragment not in text


@pytest.fixture(scope="module")
def ingested(store):
    """A tiny ingested dataset (one document) in the shared test store."""
    with store.connection() as conn:
        conn.execute("INSERT INTO datasets (name) VALUES (%s)", (DATASET,))
        conn.execute("INSERT INTO l2_insights (dataset, external_id, content, embedding, language)"
                     " VALUES (%s, 'd1', 'aspirin and the heart', '[1,0,0]', 'english')",
                     (DATASET,))
        conn.commit()
    yield store
    with store.connection() as conn:
        conn.execute("DELETE FROM datasets WHERE name = %s", (DATASET,))
        conn.commit()


def fake_env(store, fake, **more) -> dict[str, str]:
    return {"DATABASE_URL": store.url, "OPENAI_API_KEY": OPENAI_KEY,
            "ANTHROPIC_API_KEY": ANTHROPIC_KEY, "OPENAI_BASE_URL": fake.openai_base_url,
            "ANTHROPIC_BASE_URL": fake.anthropic_base_url, **more}


def test_all_ok_on_the_test_store_with_local_judges(ingested, tmp_path):
    code, lines = doctor(write_config(tmp_path), {"DATABASE_URL": ingested.url})
    assert code == 0
    assert [entry.split()[0] for entry in lines] == ["ok"] * len(lines), lines
    assert [entry.split()[1] for entry in lines] == [
        "config", "store", "pgvector", "migrations", "privileges", "datasets", "embedder",
        "judge1", "judge2", "local"]
    assert "(PostgreSQL " in line(lines, "store")
    assert "extension vector " in line(lines, "pgvector")
    latest = available_migrations()[-1].name
    assert f"schema 'eval_harness': {len(available_migrations())} of " \
        f"{len(available_migrations())} applied" in line(lines, "migrations")
    assert latest in line(lines, "migrations")
    assert line(lines, "privileges").endswith("owns the harness schema 'eval_harness'")
    assert f"{DATASET} (1 documents)" in line(lines, "datasets")


def test_pending_migrations_are_reported_and_not_applied(empty_database, tmp_path):
    code, lines = doctor(write_config(tmp_path), {"DATABASE_URL": empty_database.url})
    assert code == 0  # warnings only
    migrations = line(lines, "migrations")
    assert migrations.startswith("warn  migrations   the store has no eval-harness schema "
                                 "'eval_harness' yet")
    assert "run `eval-harness migrate`" in migrations
    assert f"0 of {len(available_migrations())} applied" in migrations
    assert line(lines, "privileges").endswith("may create the harness schema 'eval_harness'")
    assert available_migrations()[0].name in migrations
    assert line(lines, "pgvector").startswith("warn")
    assert line(lines, "datasets").startswith("warn")
    with empty_database.connection() as conn:  # the doctor only looked
        assert conn.execute("SELECT to_regclass('schema_migrations')").fetchone()[0] is None
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'"
                            ).fetchone()[0] == 0


def test_a_schema_behind_names_the_pending_migration(fresh, tmp_path):
    latest = available_migrations()[-1]
    with fresh.connection() as conn:
        conn.execute("DELETE FROM eval_harness.schema_migrations WHERE version = %s",
                     (latest.version,))
        conn.commit()
    code, lines = doctor(write_config(tmp_path), {"DATABASE_URL": fresh.url})
    count = len(available_migrations())
    assert line(lines, "migrations") == (
        f"warn  migrations   schema 'eval_harness' is behind: {count - 1} of {count} applied; "
        f"pending: {latest.name}: run `eval-harness migrate`")


@pytest.fixture
def stranger(empty_database):
    """A login role with no privilege in the empty database (it may not create schemas)."""
    role = f"stranger_{uuid.uuid4().hex[:8]}"
    with empty_database.connection(autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(
            sql.Identifier(conn.info.dbname)))
    yield role, psycopg.conninfo.make_conninfo(empty_database.url, user=role)
    with empty_database.connection(autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {r}; DROP ROLE {r}").format(r=sql.Identifier(role)))


def test_a_role_that_may_not_create_the_schema_is_not_told_all_is_well(stranger, tmp_path,
                                                                       empty_database):
    role, url = stranger
    with empty_database.connection(autocommit=True) as conn:  # connecting needs CONNECT
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(conn.info.dbname), sql.Identifier(role)))
    code, lines = doctor(write_config(tmp_path), {"DATABASE_URL": url})
    assert code == 1, lines
    assert line(lines, "migrations").endswith(
        f"run `eval-harness migrate` with a role that may create it (this role '{role}' may "
        f"not), or let this one: the database's owner runs CREATE SCHEMA eval_harness "
        f"AUTHORIZATION {role};")
    assert line(lines, "privileges").startswith(
        f"FAIL  privileges   role '{role}' may not create the harness schema 'eval_harness'")


def test_default_dataset_not_ingested_is_a_warning(store, tmp_path):
    config = tmp_path / "other.yaml"
    config.write_text("default_dataset: never_ingested\n"
                      "datasets:\n  never_ingested:\n    path: data\n"
                      "judges: {judge1: local:lexical, judge2: local:embedding}\n")
    precomputed(tmp_path / "data")
    code, lines = doctor(str(config), {"DATABASE_URL": store.url})
    assert code == 0
    assert line(lines, "datasets").startswith("warn  datasets     default dataset "
                                              "'never_ingested' is not ingested")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_store_is_a_fail_line_and_exit_1(tmp_path, monkeypatch, capsys):
    url = f"postgresql://doctor:pw-{uuid.uuid4().hex}@127.0.0.1:{_closed_port()}/eval"
    monkeypatch.setenv("DATABASE_URL", url)
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_JUDGE1",
                     "EVAL_HARNESS_JUDGE2"):
        monkeypatch.delenv(variable, raising=False)
    code = main(["--config", write_config(tmp_path), "doctor"])
    out, err = capsys.readouterr()
    assert code == 1
    store_line = line(out.splitlines(), "store")
    assert store_line.startswith("FAIL  store") and "doctor:***@127.0.0.1" in store_line
    assert url.split(":")[2].split("@")[0] not in out + err  # the password
    assert "Traceback" not in out + err
    for name in ("pgvector", "migrations", "datasets"):
        assert line(out.splitlines(), name).startswith("skip")


@pytest.mark.unit
def test_a_bad_config_is_a_fail_line_not_an_error(tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_text("hybrid_search: {semantic: 2.0}\n")
    code = main(["--config", str(config), "doctor"])
    out, err = capsys.readouterr()
    assert code == 1 and err == ""
    # the message names the file that was read, not config.yaml
    assert out.splitlines() == [f"FAIL  config       {config}: hybrid_search weights must lie "
                                "in [0, 1]."]


def test_keys_set_and_fake_providers_reachable(store, tmp_path, fake):
    config = write_config(tmp_path, judge1="openai:gpt-4o", judge2="anthropic:claude-haiku-4-5")
    code, lines = doctor(config, fake_env(store, fake))
    text = "\n".join(lines)
    assert code == 0, text
    assert line(lines, "judge1") == "ok    judge1       openai:gpt-4o: OPENAI_API_KEY set"
    assert line(lines, "judge2") == ("ok    judge2       anthropic:claude-haiku-4-5: "
                                     "ANTHROPIC_API_KEY set")
    assert line(lines, "openai").startswith(f"ok    openai       reachable at "
                                            f"{fake.openai_base_url}, key accepted")
    assert line(lines, "anthropic").startswith("ok    anthropic    reachable")
    assert_no_key(text)
    models = [r for r in fake.records if r.api == "models"]
    assert len(models) == 2 and fake.chat_requests == 0
    assert {r.headers.get("authorization") for r in models} >= {f"Bearer {OPENAI_KEY}"}


def test_missing_key_falls_back_and_is_not_probed(store, tmp_path, fake):
    config = write_config(tmp_path, judge1="openai:gpt-4o", judge2="local:embedding")
    env = fake_env(store, fake)
    del env["OPENAI_API_KEY"]
    code, lines = doctor(config, env)
    assert code == 0
    assert line(lines, "judge1") == ("warn  judge1       openai:gpt-4o: OPENAI_API_KEY not set: "
                                     "falls back to local:lexical")
    assert not [entry for entry in lines if entry.split()[1] == "openai"]
    assert fake.records == []


def test_missing_key_without_fallback_fails(store, tmp_path, fake):
    config = write_config(tmp_path, judge1="anthropic:claude-haiku-4-5", fallback=False)
    env = fake_env(store, fake)
    del env["ANTHROPIC_API_KEY"]
    code, lines = doctor(config, env)
    assert code == 1
    assert line(lines, "judge1").startswith("FAIL  judge1       anthropic:claude-haiku-4-5: "
                                            "ANTHROPIC_API_KEY not set and judges.fallback_to_"
                                            "local is false")


@pytest.mark.parametrize("provider, spec", [("openai", "openai:gpt-4o"),
                                            ("anthropic", "anthropic:claude-haiku-4-5")])
@pytest.mark.parametrize("fault, status, code", [("401", "FAIL", 1), ("503", "warn", 0)])
def test_provider_errors_are_one_line_without_the_key(store, tmp_path, fake, provider, spec,
                                                      fault, status, code):
    fake.echo_auth_on_error = True  # a misbehaving server that quotes the credentials back
    fake.enqueue(fault)
    result, lines = doctor(write_config(tmp_path, judge1=spec), fake_env(store, fake))
    text = "\n".join(lines)
    assert result == code, text
    probe = line(lines, provider)
    assert probe.startswith(f"{status:<5} {provider:<12} ")
    assert f"HTTP {fault} from " in probe
    if fault == "401":
        assert "was rejected" in probe
    assert_no_key(text)
    assert [r.status for r in fake.records if r.api == "models"] == [int(fault)]  # no retries


def test_offline_skips_the_network(store, tmp_path, fake):
    config = write_config(tmp_path, judge1="openai:gpt-4o", judge2="anthropic:claude-haiku-4-5")
    code, lines = doctor(config, fake_env(store, fake), offline=True)
    assert code == 0
    assert line(lines, "openai") == "skip  openai       network check skipped (--offline)"
    assert line(lines, "anthropic").startswith("skip")
    assert fake.records == []


def test_an_unreachable_provider_fails_within_the_timeout(store, tmp_path):
    env = {"DATABASE_URL": store.url, "OPENAI_API_KEY": OPENAI_KEY,
           "OPENAI_BASE_URL": f"http://127.0.0.1:{_closed_port()}/v1"}
    code, lines = doctor(write_config(tmp_path, judge1="openai:gpt-4o"), env, probe_timeout=2)
    assert code == 1
    assert line(lines, "openai").startswith("FAIL  openai       cannot connect to http://127.0.0.1:")
    assert_no_key("\n".join(lines))


# --- doctor before migrate, on a store of your own (the README's order) -------------------

OWN_STORE = seeds_config_yaml(schema="public")


@pytest.fixture
def unmigrated_own_store(empty_database, beir_folder):
    """An unmigrated database holding only a RAG store in the seeds' layout (``public``)."""
    from eval_harness.datasets.demo_store import build_rag_store

    with psycopg.connect(empty_database.url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    with psycopg.connect(empty_database.url) as conn:
        from pgvector.psycopg import register_vector
        register_vector(conn)
        build_rag_store(conn, beir_folder, schema="public", cache_query_vectors=False)
    return empty_database


def doctor_cli(capsys, config, url) -> tuple[int, list[str]]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DATABASE_URL", url)
        for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "EVAL_HARNESS_CONFIG"):
            env.delenv(name, raising=False)
        code = main(["--config", str(config), "doctor", "--offline"])
    out, err = capsys.readouterr()
    assert err == "" or "Traceback" not in err
    return code, out.splitlines()


def assert_no_raw_error(lines: list[str]) -> None:
    for entry in lines:
        assert "does not exist" not in entry and 'relation "' not in entry, entry


def test_doctor_before_migrate_says_what_is_missing_and_runs_every_other_check(
        unmigrated_own_store, tmp_path, capsys):
    config = tmp_path / "config.yaml"
    config.write_text(OWN_STORE)
    code, lines = doctor_cli(capsys, config, unmigrated_own_store.url)
    assert_no_raw_error(lines)
    assert "run `eval-harness migrate`" in line(lines, "migrations")
    privileges = [e for e in lines if e.split()[1] == "privileges"]
    assert privileges[0].endswith("may create the harness schema 'eval_harness'"), lines
    # the checks that need only the RAG tables still run: the live relations, the indexes,
    # the keyword side measured on the store's own queries
    assert any("may SELECT the live relations public.l2_insights, public.ground_truth" in e
               for e in lines), lines
    keyword = [e for e in lines if e.split()[1] == "keyword"]
    assert any("'prod' tsvector: null, so keyword search parses" in e for e in keyword), lines
    with unmigrated_own_store.connection() as conn:  # the doctor only looked
        assert conn.execute("SELECT to_regnamespace('eval_harness')").fetchone()[0] is None


def test_doctor_for_a_role_with_select_only_prints_the_statement_an_owner_runs(
        unmigrated_own_store, tmp_path, capsys):
    role = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(unmigrated_own_store.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {0}; GRANT SELECT ON ALL "
                             "TABLES IN SCHEMA public TO {0}").format(sql.Identifier(role)))
    config = tmp_path / "config.yaml"
    config.write_text(OWN_STORE)
    try:
        code, lines = doctor_cli(capsys, config,
                                 psycopg.conninfo.make_conninfo(unmigrated_own_store.url,
                                                                user=role))
    finally:
        with psycopg.connect(unmigrated_own_store.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {r}; DROP ROLE {r}").format(
                r=sql.Identifier(role)))
    assert code == 1 and lines
    assert_no_raw_error(lines)
    statement = f"CREATE SCHEMA eval_harness AUTHORIZATION {role}"
    assert statement in line(lines, "migrations"), lines
    assert statement in [e for e in lines if e.split()[1] == "privileges"][0]
    assert any("'prod' tsvector: null, so keyword search parses" in e for e in lines), lines
