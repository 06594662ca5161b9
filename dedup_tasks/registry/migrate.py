"""Versioned SQL migrations of the registry schema.

Migrations are the files `migrations/NNNN_name.sql` shipped with the package; version = NNNN. Each file
runs in its own transaction together with its `schema_migrations` row, so a failed file leaves the
registry at the previous version. A session advisory lock serialises concurrent `migrate` calls (two
DAG runs starting at once), and each file is re-checked under the lock before it runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

from psycopg2 import sql

log = logging.getLogger(__name__)

DEFAULT_SCHEMA = "dedup"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class RegistryVersionError(RuntimeError):
    """The registry's schema version does not match what this code can use."""


class RegistryKeySpaceError(RegistryVersionError):
    """The registry's MinHash band keys come from another index signature than the configuration's."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def available_migrations() -> list[Migration]:
    """The migrations shipped with this code, by version."""
    found = []
    for entry in resources.files("dedup_tasks.registry").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"registry migrations must be numbered 1..n without gaps, found {versions}")
    return found


def code_version() -> int:
    """The newest schema version this code knows."""
    return len(available_migrations())


def advisory_key(name: str) -> int:
    """A stable signed 64-bit advisory-lock key for `name` (one per registry schema and purpose)."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)


def current_version(conn: Any, schema: str = DEFAULT_SCHEMA) -> int:
    """Schema version of the registry in `schema` (0 when it was never migrated). Leaves no transaction open."""
    was_autocommit = conn.autocommit
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", (f"{_quote(schema)}.schema_migrations",))
            if cur.fetchone()[0] is None:
                return 0
            cur.execute(
                sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(
                    sql.Identifier(schema)
                )
            )
            return int(cur.fetchone()[0])
    finally:
        conn.autocommit = was_autocommit


def check_version(conn: Any, schema: str = DEFAULT_SCHEMA, *, require_current: bool = True) -> int:
    """Raise RegistryVersionError when the registry is newer than this code (or, if required, older)."""
    version = current_version(conn, schema)
    known = code_version()
    if version > known:
        raise RegistryVersionError(
            f"registry schema {schema!r} is at version {version}, but this code only knows versions up to "
            f"{known}: it was migrated by a newer crawl-dedup. Upgrade crawl-dedup on this machine; this "
            f"code refuses to read or write a registry it does not understand."
        )
    if require_current and version < known:
        raise RegistryVersionError(
            f"registry schema {schema!r} is at version {version}, this code needs version {known}: run "
            f"`python -m dedup_tasks db migrate`."
        )
    return version


def migrate(conn: Any, schema: str = DEFAULT_SCHEMA, *, target: int | None = None) -> list[int]:
    """Apply the missing migrations to `schema` (created if absent); return the versions applied.

    Idempotent: running it again applies nothing. Refuses (RegistryVersionError) a registry whose
    version is newer than this code. `target`: stop at that version (tests of a migration fill a
    registry under the schema before it).
    """
    migrations = [m for m in available_migrations() if target is None or m.version <= target]
    was_autocommit = conn.autocommit
    conn.autocommit = True
    ident = sql.Identifier(schema)
    applied: list[int] = []
    try:
        with conn.cursor() as cur:
            # Session lock: held across the per-file transactions below.
            cur.execute("SELECT pg_advisory_lock(%s)", (advisory_key(f"crawl-dedup:migrate:{schema}"),))
            try:
                cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
                cur.execute(
                    sql.SQL(
                        "CREATE TABLE IF NOT EXISTS {}.schema_migrations ("
                        " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
                        " applied_at timestamptz NOT NULL DEFAULT now())"
                    ).format(ident)
                )
                check_version(conn, schema, require_current=False)
                cur.execute(sql.SQL("SELECT version, checksum FROM {}.schema_migrations").format(ident))
                done = dict(cur.fetchall())
                for migration in migrations:
                    if migration.version in done:
                        if done[migration.version] != migration.checksum:
                            log.warning(
                                "registry migration %04d_%s changed since it was applied to schema %r "
                                "(checksum differs); it is not re-run",
                                migration.version,
                                migration.name,
                                schema,
                            )
                        continue
                    conn.autocommit = False
                    try:
                        cur.execute(sql.SQL("SET LOCAL search_path TO {}, public").format(ident))
                        cur.execute(migration.sql)
                        cur.execute(
                            sql.SQL(
                                "INSERT INTO {}.schema_migrations (version, name, checksum) VALUES (%s, %s, %s)"
                            ).format(ident),
                            (migration.version, migration.name, migration.checksum),
                        )
                        conn.commit()
                    except BaseException:
                        conn.rollback()
                        raise
                    finally:
                        conn.autocommit = True
                    log.info(
                        "registry schema %r migrated to version %d (%s)",
                        schema,
                        migration.version,
                        migration.name,
                    )
                    applied.append(migration.version)
            finally:
                if not conn.closed:
                    cur.execute(
                        "SELECT pg_advisory_unlock(%s)", (advisory_key(f"crawl-dedup:migrate:{schema}"),)
                    )
    finally:
        if not conn.closed:
            conn.autocommit = was_autocommit
    return applied


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


@contextlib.contextmanager
def scratch_schema(conn: Any, prefix: str) -> Iterator[str]:
    """A new schema ``<prefix>_<random>`` at this code's version, dropped with all it holds on exit
    (benchmarks and tests that need a registry of their own)."""
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    migrate(conn, schema)
    try:
        yield schema
    finally:
        conn.rollback()
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
