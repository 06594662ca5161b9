"""A real PostgreSQL for the registry tests: DEDUP_TEST_DB_URL when set (CI), else an embedded server.

Every test gets a fresh, migrated schema, dropped afterwards, so tests never see each other's rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg2
import pytest

from dedup_tasks.registry.migrate import code_version, current_version, migrate, scratch_schema
from dedup_tasks.registry.postgres import PostgresRegistry


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "embedded: starts its own embedded PostgreSQL (a few seconds)")


@contextmanager
def schema_at_version(pg_dsn: str, admin: psycopg2.extensions.connection, version: int) -> Iterator[str]:
    """A fresh schema migrated up to ``version`` only (the layout a migration test starts from), dropped after."""
    name = f"test_registry_v{version}_{uuid.uuid4().hex[:10]}"
    conn = psycopg2.connect(pg_dsn)
    try:
        assert migrate(conn, name, target=version) == list(range(1, version + 1))
    finally:
        conn.close()
    try:
        yield name
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')



def migrate_to_current(pg_dsn: str, name: str, from_version: int) -> None:
    """Migrate a schema at ``from_version`` to the code's version: every later migration applied, once, in order."""
    conn = psycopg2.connect(pg_dsn)
    try:
        assert migrate(conn, name) == list(range(from_version + 1, code_version() + 1))
        assert current_version(conn, name) == code_version()
    finally:
        conn.close()

@pytest.fixture
def admin(pg_dsn: str) -> Iterator[psycopg2.extensions.connection]:
    """A second, autocommit connection for inspecting tables and disturbing the registry."""
    conn = psycopg2.connect(pg_dsn)
    conn.autocommit = True
    yield conn
    conn.close()


@pytest.fixture
def schema(pg_dsn: str) -> Iterator[str]:
    conn = psycopg2.connect(pg_dsn)
    try:
        with scratch_schema(conn, "test_registry") as name:
            yield name
    finally:
        conn.close()


@pytest.fixture
def make_registry(pg_dsn: str, schema: str) -> Iterator[Callable[..., PostgresRegistry]]:
    """Factory of registries on the test schema (several = several processes/tasks), closed at teardown."""
    made: list[PostgresRegistry] = []

    def make(**kwargs: object) -> PostgresRegistry:
        kwargs.setdefault("schema", schema)
        kwargs.setdefault("num_perm", 32)
        registry = PostgresRegistry(pg_dsn, **kwargs)  # type: ignore[arg-type]
        made.append(registry)
        return registry

    yield make
    for registry in made:
        registry.close()
