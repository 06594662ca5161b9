"""Migrations, version checks, the `db` CLI, DSN resolution and the embedded server."""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from pathlib import Path

import numpy as np
import psycopg2
import pytest

from dedup_tasks.contract import NEAR_MISS_HAMMING_MAX
from dedup_tasks.registry import connect
from dedup_tasks.registry.cli import db_main
from dedup_tasks.registry.migrate import (
    RegistryVersionError,
    available_migrations,
    code_version,
    current_version,
    migrate,
)
from dedup_tasks.registry.postgres import PostgresRegistry
from tests.conftest import server_readable_tmpdir
from tests.registry.synth import fingerprints


@pytest.fixture
def fresh_schema(admin):
    name = f"test_registry_m_{uuid.uuid4().hex[:10]}"
    yield name
    with admin.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def test_migrations_are_numbered_and_migrate_is_idempotent(pg_dsn, fresh_schema, admin):
    assert [m.version for m in available_migrations()] == list(range(1, code_version() + 1))
    conn = psycopg2.connect(pg_dsn)
    try:
        assert current_version(conn, fresh_schema) == 0
        assert migrate(conn, fresh_schema) == list(range(1, code_version() + 1))
        assert migrate(conn, fresh_schema) == []
        assert current_version(conn, fresh_schema) == code_version()
        assert conn.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_IDLE
    finally:
        conn.close()
    with admin.cursor() as cur:
        cur.execute(f'SELECT count(*) FROM "{fresh_schema}".schema_migrations')
        assert cur.fetchone()[0] == code_version()
        cur.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'documents' ORDER BY 1",
            (fresh_schema,),
        )
        # Migration 8: one row per document, a B-tree per lookup key and the primary key, nothing else.
        assert [r[0] for r in cur.fetchall()] == [
            "documents_content_hi", "documents_seq", "documents_simhash", "documents_url_key"
        ]


def test_concurrent_migrations_apply_once(pg_dsn, fresh_schema):
    errors: list[BaseException] = []
    applied: list[list[int]] = []

    def run():
        conn = psycopg2.connect(pg_dsn)
        try:
            applied.append(migrate(conn, fresh_schema))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert sorted(applied, key=len) == [[], [], list(range(1, code_version() + 1))]


def test_a_registry_newer_than_the_code_is_refused(pg_dsn, schema, admin):
    with admin.cursor() as cur:
        cur.execute(
            f'INSERT INTO "{schema}".schema_migrations (version, name, checksum) VALUES (%s, %s, %s)',
            (code_version() + 1, "from_the_future", "x"),
        )
    conn = psycopg2.connect(pg_dsn)
    try:
        with pytest.raises(RegistryVersionError, match="newer crawl-dedup"):
            migrate(conn, schema)
    finally:
        conn.close()
    with pytest.raises(RegistryVersionError, match=f"version {code_version() + 1}"):
        PostgresRegistry(pg_dsn, schema=schema)
    assert db_main(["--db-url", pg_dsn, "--schema", schema, "migrate"]) == 3  # rc 3: registry (README)


def test_an_unmigrated_registry_is_refused_unless_auto_migrate(pg_dsn, fresh_schema):
    with pytest.raises(RegistryVersionError, match="db migrate"):
        PostgresRegistry(pg_dsn, schema=fresh_schema)
    registry = PostgresRegistry(pg_dsn, schema=fresh_schema, auto_migrate=True)
    registry.close()


def test_db_cli_migrate_status_and_rebuild_bloom(pg_dsn, fresh_schema, tmp_path, capsys):
    base = ["--db-url", pg_dsn, "--schema", fresh_schema, "--root", str(tmp_path)]
    assert db_main([*base, "migrate"]) == 0
    assert "now at version" in capsys.readouterr().out
    assert db_main([*base, "migrate"]) == 0
    assert "up to date" in capsys.readouterr().out
    registry = PostgresRegistry(pg_dsn, schema=fresh_schema, num_perm=32)
    registry.begin("b1")
    registry.commit("b1", fingerprints(["a", "b"], [1, 2], [(1, 1), (2, 2)], [1, 2]))
    registry.close()
    assert db_main([*base, "rebuild-bloom", "--capacity", "10000"]) == 0
    assert "2 keys" in capsys.readouterr().out
    assert (tmp_path / "registry" / "url_bloom.npy").exists()
    assert db_main([*base, "status", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["version"] == code_version()
    assert info["tables"]["documents"]["rows"] == 2
    assert info["tables"]["minhash_bands"]["rows"] == 16
    assert info["tables"]["total"]["bytes_per_doc"] > 0
    assert info["bloom"]["keys"] == 2
    assert db_main([*base, "status"]) == 0
    assert "bytes/doc" in capsys.readouterr().out
    assert db_main([*base, "compact"]) == 0
    assert "2 documents moved" in capsys.readouterr().out
    assert db_main([*base, "status", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert (
        info["tables"]["documents"]["rows"] == 2 and info["tables"]["documents"]["recent_rows"] == 0
    )


def test_resolve_dsn_order(monkeypatch, tmp_path):
    monkeypatch.delenv("DEDUP_DB_URL", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_DEDUP_DB", raising=False)
    assert connect.resolve_dsn("postgresql://x/y", tmp_path).source == "config"
    embedded = connect.resolve_dsn(None, tmp_path)
    if embedded.source == "airflow":  # a machine with Airflow and a configured dedup_db connection
        pytest.skip("an Airflow dedup_db connection is configured here")
    assert embedded.embedded and embedded.embedded_dir == tmp_path / "registry" / "pg"
    monkeypatch.setenv("AIRFLOW_CONN_DEDUP_DB", "postgres://u:p%40w@dbhost:5433/reg?sslmode=disable")
    got = connect.resolve_dsn(None, tmp_path)
    assert got.source == "airflow"
    assert got.dsn == "postgresql://u:p%40w@dbhost:5433/reg?sslmode=disable"
    monkeypatch.setenv("DEDUP_DB_URL", "postgresql://env/db")
    assert connect.resolve_dsn(None, tmp_path).dsn == "postgresql://env/db"
    assert connect.resolve_dsn("postgresql://explicit/db", tmp_path).dsn == "postgresql://explicit/db"


def test_airflow_connection_in_json_form(monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_DEDUP_DB",
        json.dumps(
            {
                "conn_type": "postgres",
                "host": "h",
                "port": 5432,
                "login": "u",
                "password": "p w",
                "schema": "d",
            }
        ),
    )
    assert connect.airflow_connection_dsn() == "postgresql://u:p%20w@h:5432/d"


def test_open_registry_migrates_and_uses_the_root(pg_dsn, fresh_schema, tmp_path):
    from dedup_tasks.config import DedupConfig

    config = DedupConfig(root=str(tmp_path), db_url=pg_dsn)
    with connect.open_registry(config, schema=fresh_schema, bloom_capacity=1000) as registry:
        assert isinstance(registry, PostgresRegistry)
        assert registry.bloom_path == tmp_path / "registry" / "url_bloom.npy"
        assert registry.simhash_max_distance == NEAR_MISS_HAMMING_MAX
        registry.begin("b1")
        registry.commit("b1", fingerprints(["a"], [1], [(1, 1)], [1]))
        assert len(registry.lookup_urls("b2", np.array([1], np.uint64))) == 1
    assert (tmp_path / "registry" / "url_bloom.npy").exists()


@pytest.mark.embedded
def test_embedded_server_starts_serves_and_stops(monkeypatch):
    from dedup_tasks.registry.embedded import EmbeddedPostgres

    monkeypatch.delenv("DEDUP_DB_URL", raising=False)
    base = server_readable_tmpdir("dedup-test-embedded-")
    try:
        data = base / "registry" / "pg"
        server = EmbeddedPostgres(data, init_fsync=False, settings={"fsync": "off", "shared_buffers": "32MB"})
        with server:
            assert server.started_here
            dsn = server.dsn
            with PostgresRegistry(server.dsn, auto_migrate=True, num_perm=32) as registry:
                registry.begin("b1")
                registry.commit("b1", fingerprints(["a"], [1], [(1, 1)], [1]))
                assert list(registry.lookup_content("b2", np.array([[1, 1]], np.uint64)).doc_id) == ["a"]
            # A second user of the same data root attaches instead of starting another server.
            attached = EmbeddedPostgres(data)
            assert attached.start() == server.dsn and not attached.started_here
            attached.stop()  # not ours: leaves it running
            psycopg2.connect(server.dsn).close()
            if os.geteuid() == 0:
                assert data.stat().st_uid != 0  # the server runs unprivileged
        assert not (data / "postmaster.pid").exists()
        with pytest.raises(psycopg2.OperationalError):
            psycopg2.connect(dsn, connect_timeout=2).close()
        # Restart on the existing cluster: no second initdb, the data is still there.
        again = EmbeddedPostgres(data, settings={"fsync": "off", "shared_buffers": "32MB"})
        with again, PostgresRegistry(again.dsn, num_perm=32) as registry:
            assert len(registry.lookup_content("b2", np.array([[1, 1]], np.uint64))) == 1
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_embedded_server_reports_an_unreachable_data_root(tmp_path):
    from dedup_tasks.registry.embedded import EmbeddedPostgres, EmbeddedPostgresError

    if os.geteuid() != 0:
        pytest.skip("only root runs the server as another user")
    locked = Path(tmp_path) / "locked"
    locked.mkdir(mode=0o700)
    # A new cluster would be placed outside (tests/faults row 21); a folder already there is not moved.
    (locked / "pg").mkdir()
    with pytest.raises(EmbeddedPostgresError, match="cannot enter"):
        EmbeddedPostgres(locked / "pg").start()
