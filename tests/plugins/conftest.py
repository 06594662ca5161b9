"""The audit plugin's app on a generated, audited week; Airflow's real auth manager and JWTs."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

# Airflow reads plugins from AIRFLOW_HOME/plugins in production; tests import the module directly.
sys.path.insert(0, str(REPO / "plugins"))
# One signing key for the session, so tokens minted here validate in the app (also in uvicorn's thread).
os.environ.setdefault("AIRFLOW__API_AUTH__JWT_SECRET", uuid.uuid4().hex * 2)
WEEK = "2026-W49"
# The browser tests drive Debian's chromium; playwright's bundled browsers are never downloaded.
CHROMIUM = os.environ.get("DEDUP_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run"]
SCREENSHOT_DIR = os.environ.get("DEDUP_SCREENSHOT_DIR", "/tmp")


def playwright_or_skip():
    """playwright's sync API; the calling test module is skipped without it or without chromium."""
    api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.skip(f"chromium not found at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)
    return api


@contextlib.contextmanager
def served(app) -> Iterator[str]:
    """``app`` mounted under its url_prefix on a parent app, as Airflow's api-server mounts plugin
    apps, served by uvicorn on a free port in a thread; yields the app's base URL."""
    import uvicorn
    from fastapi import FastAPI

    parent = FastAPI()
    parent.mount("/dedup-audit", app)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(parent, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not srv.started:
        if time.time() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/dedup-audit"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def audited_root(tmp_path_factory, pg_dsn) -> tuple[Path, str]:
    """A generated week, audited; returns (root, label schema)."""
    import psycopg2

    from dedup_tasks.audit.run import run_audit
    from tests.audit.synth import config_for, run_week

    root = tmp_path_factory.mktemp("plugin-week")
    run_week(root, config_for(root))
    schema = f"t_{uuid.uuid4().hex[:12]}"
    run_audit(root, WEEK, db_url=pg_dsn, schema=schema, per_stratum=3)
    yield root, schema
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def auth_manager():
    """Airflow's configured auth manager (SimpleAuthManager by default) and its revocation table.

    Token validation checks Airflow's revoked-token table; creating just that table in the session's
    metadata DB keeps the check real without a full `airflow db migrate`.
    """
    from airflow import settings
    from airflow.api_fastapi.app import create_auth_manager
    from airflow.models.revoked_token import RevokedToken

    RevokedToken.__table__.create(settings.engine, checkfirst=True)
    return create_auth_manager()


@pytest.fixture(scope="session")
def mint(auth_manager):
    """Mint a JWT the way the api-server does at login: auth_manager.generate_jwt(user)."""
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    def _mint(username: str, role: str = "admin") -> str:
        return auth_manager.generate_jwt(SimpleAuthManagerUser(username=username, role=role))

    return _mint


@pytest.fixture
def plugin_app(audited_root, pg_dsn):
    import dedup_audit_plugin

    root, schema = audited_root
    return dedup_audit_plugin.create_app(root=root, db_url=pg_dsn, schema=schema)
