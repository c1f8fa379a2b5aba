"""DAGSTER_HOME: a project-local instance, or Dagster's storage in Postgres when configured."""

from __future__ import annotations

import uuid
from dataclasses import replace
from urllib.parse import urlsplit, urlunsplit

import dagster as dg
import psycopg
import pytest
from psycopg import sql

from eval_harness.settings import load_settings
from eval_harness_pipelines.dagster_home import MARKER, prepare_dagster_home


@pytest.mark.unit
def test_local_instance_without_postgres_url(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    settings = load_settings(environ={}).with_overrides(dagster_home=tmp_path / "home")
    home = prepare_dagster_home(settings)
    text = (home / "dagster.yaml").read_text()
    assert text.startswith(MARKER) and "storage" not in text


@pytest.mark.unit
def test_shards_at_once_is_the_pools_default_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    settings = load_settings(environ={})
    prepare_dagster_home(settings.with_overrides(
        judges=replace(settings.judges, shards_at_once=3)))
    with dg.DagsterInstance.get() as instance:
        assert instance.event_log_storage.get_pool_config().default_pool_limit == 3
    prepare_dagster_home(settings)  # null again: no limit, no concurrency section
    assert "concurrency" not in (tmp_path / "dagster.yaml").read_text()


@pytest.mark.unit
def test_hand_written_dagster_yaml_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    prepare_dagster_home(load_settings(environ={"DAGSTER_POSTGRES_URL": "postgresql://x"}))
    assert (tmp_path / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"


def test_postgres_url_moves_dagster_storage_to_postgres(tmp_path, monkeypatch, server_url):
    dbname = f"eh_dagster_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    parts = urlsplit(server_url)  # a URL: Dagster (SQLAlchemy) does not take key=value strings
    user, password = parts.username or "postgres", parts.password or "s3cret-pw"
    host = parts.netloc.rsplit("@", 1)[-1]
    url = urlunsplit((parts.scheme, f"{user}:{password}@{host}", f"/{dbname}", parts.query, ""))
    try:
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        monkeypatch.setenv("DAGSTER_POSTGRES_URL", url)
        prepare_dagster_home(load_settings(environ={"DAGSTER_POSTGRES_URL": url}))
        text = (tmp_path / "dagster.yaml").read_text()
        assert "env: DAGSTER_POSTGRES_URL" in text and password not in text
        with dg.DagsterInstance.get() as instance:
            assert type(instance.run_storage).__name__ == "PostgresRunStorage"
            assert instance.get_runs() == []
        # switching the URL off again rewrites our file back to local storage
        prepare_dagster_home(load_settings(environ={}))
        assert "storage" not in (tmp_path / "dagster.yaml").read_text()
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(dbname)))
