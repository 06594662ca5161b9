"""Which PostgreSQL the registry uses, and opening it.

Order: an explicit URL (config `db_url`, which DedupConfig fills from DEDUP_DB_URL) or DEDUP_DB_URL;
else the Airflow connection `dedup_db` (through airflow.sdk when Airflow is installed; its
AIRFLOW_CONN_DEDUP_DB variable is also read directly, so the same setting works outside a task);
else an embedded server under `<root>/registry/pg`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from dedup_tasks.contract import NEAR_MISS_HAMMING_MAX

log = logging.getLogger(__name__)

AIRFLOW_CONN_ID = "dedup_db"


@dataclass(frozen=True)
class ResolvedDb:
    """Where the registry lives: `dsn` for a server, or `embedded_dir` for the embedded one."""

    dsn: str | None
    source: str  # "config", "env", "airflow" or "embedded"
    embedded_dir: Path | None = None

    @property
    def embedded(self) -> bool:
        return self.dsn is None


def registry_dir(root: Path | str) -> Path:
    return Path(root) / "registry"


def bloom_path(root: Path | str) -> Path:
    return registry_dir(root) / "url_bloom.npy"


def resolve_dsn(config_db_url: str | None, root: Path | str) -> ResolvedDb:
    """The registry's database for this run (see the module docstring for the order)."""
    if config_db_url:
        return ResolvedDb(config_db_url, "config")
    if os.environ.get("DEDUP_DB_URL"):
        return ResolvedDb(os.environ["DEDUP_DB_URL"], "env")
    dsn = airflow_connection_dsn(AIRFLOW_CONN_ID)
    if dsn:
        return ResolvedDb(dsn, "airflow")
    return ResolvedDb(None, "embedded", registry_dir(root) / "pg")


def airflow_connection_dsn(conn_id: str = AIRFLOW_CONN_ID) -> str | None:
    """libpq URL of an Airflow connection, or None when Airflow or the connection is absent."""
    try:
        from airflow.sdk import BaseHook  # type: ignore[import-not-found]
    except ImportError:
        BaseHook = None  # noqa: N806 - the class, when importable
    if BaseHook is not None:
        try:
            conn = BaseHook.get_connection(conn_id)
        except Exception as exc:  # noqa: BLE001 - "not found" is an exception of Airflow's own types
            log.debug("Airflow connection %r not available: %s", conn_id, exc)
        else:
            return _dsn_from_fields(
                host=conn.host,
                port=conn.port,
                login=conn.login,
                password=conn.password,
                database=conn.schema,
                extra=conn.extra_dejson if hasattr(conn, "extra_dejson") else {},
            )
    # Outside a running task Airflow 3's SDK may not reach its API server; the connection is still
    # defined by this variable, in URI or JSON form.
    raw = os.environ.get(f"AIRFLOW_CONN_{conn_id.upper()}")
    return _dsn_from_airflow_env(raw) if raw else None


_LIBPQ_EXTRAS = {
    "sslmode",
    "sslcert",
    "sslkey",
    "sslrootcert",
    "connect_timeout",
    "application_name",
    "options",
    "target_session_attrs",
}


def _dsn_from_fields(
    *,
    host: str | None,
    port: int | None,
    login: str | None,
    password: str | None,
    database: str | None,
    extra: Any,
) -> str:
    auth = ""
    if login:
        auth = quote(login, safe="")
        if password:
            auth += ":" + quote(password, safe="")
        auth += "@"
    netloc = auth + (host or "") + (f":{port}" if port else "")
    query = {k: str(v) for k, v in (extra or {}).items() if k in _LIBPQ_EXTRAS}
    return f"postgresql://{netloc}/{quote(database or '', safe='')}" + (
        f"?{urlencode(query)}" if query else ""
    )


def _dsn_from_airflow_env(raw: str) -> str:
    raw = raw.strip()
    if raw.startswith("{"):
        data = json.loads(raw)
        extra = data.get("extra") or {}
        if isinstance(extra, str):
            extra = json.loads(extra) if extra else {}
        return _dsn_from_fields(
            host=data.get("host"),
            port=data.get("port"),
            login=data.get("login"),
            password=data.get("password"),
            database=data.get("schema"),
            extra=extra,
        )
    parts = urlsplit(raw)
    # Airflow's URI scheme is the conn type ("postgres", "postgresql"); its query holds extras,
    # some of which (e.g. __extra__) libpq would reject.
    query = [(k, v) for k, v in parse_qsl(parts.query) if k in _LIBPQ_EXTRAS]
    return parts._replace(scheme="postgresql", query=urlencode(query)).geturl()


@contextmanager
def open_registry(config: Any, **registry_kwargs: Any) -> Iterator[Any]:
    """The pipeline's registry for `config` (a DedupConfig): migrated, with the URL Bloom filter.

    Starts (and afterwards stops) the embedded server when no database is configured. Extra keyword
    arguments go to PostgresRegistry.
    """
    from dedup_tasks.fingerprint.stoplist import band_key_space
    from dedup_tasks.registry.postgres import PostgresRegistry

    root = Path(config.root)
    defaults: dict[str, Any] = {
        "bloom_path": bloom_path(root),
        "num_perm": getattr(config, "minhash_num_perm", 128),
        "conflict_max_hamming": getattr(config, "simhash_max_distance", 3),
        "conflict_min_jaccard": getattr(config, "minhash_registry_threshold", 0.8),
        # The SimHash layer needs candidates up to the suspect range (L4); further ones are never used.
        "simhash_max_distance": max(NEAR_MISS_HAMMING_MAX, getattr(config, "simhash_max_distance", 3)),
        "auto_migrate": True,
        "band_key_space": band_key_space(getattr(config, "minhash_registry_stoplist", "")),
    }
    defaults.update(registry_kwargs)
    with database(root, getattr(config, "db_url", None)) as dsn:
        registry = PostgresRegistry(dsn, **defaults)
        try:
            yield registry
        finally:
            registry.close()


@contextmanager
def database(root: Path | str, db_url: str | None = None) -> Iterator[str]:
    """A DSN for the data root's database: configured (resolve_dsn order), else an embedded server.

    An embedded server is started for the duration of the block and stopped afterwards.
    """
    from dedup_tasks.registry.embedded import EmbeddedPostgres

    resolved = resolve_dsn(db_url, Path(root))
    if not resolved.embedded:
        assert resolved.dsn is not None
        yield resolved.dsn
        return
    assert resolved.embedded_dir is not None
    server = EmbeddedPostgres(resolved.embedded_dir)
    try:
        yield server.start()
    finally:
        server.stop()
