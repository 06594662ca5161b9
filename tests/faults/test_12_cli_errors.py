"""Row 12: the CLI prints one ``error: ...`` line and exits non-zero (never a traceback) for a registry
of a newer version, an unreachable database, a full disk and a missing partition."""

from __future__ import annotations

import resource
import subprocess
import uuid
from pathlib import Path

import psycopg2
import pyarrow.parquet as pq
import pytest

from dedup_tasks.registry.migrate import migrate
from tests.conftest import write_partition
from tests.faults.conftest import cli, docs, make_batch

HOUR = "2026-12-01T00"


def assert_one_error_line(result: subprocess.CompletedProcess, *needles: str) -> str:
    assert result.returncode != 0 and result.returncode != 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def partition(tmp_path: Path) -> Path:
    write_partition(tmp_path, HOUR, make_batch(docs("d", list(range(5)))))
    return tmp_path


def test_registry_of_a_newer_version(partition, pg_dsn):
    schema = f"t_newer_{uuid.uuid4().hex[:8]}"
    conn = psycopg2.connect(pg_dsn)
    conn.autocommit = True
    migrate(conn, schema)
    with conn.cursor() as cur:
        cur.execute(f'INSERT INTO "{schema}".schema_migrations (version, name, checksum) VALUES (999, %s, %s)', ("future", "x"))
    try:
        result = cli("run", "--root", str(partition), "--batch", HOUR, "--no-progress", "--db-url", pg_dsn, "--set", f"db_schema={schema}")
        assert_one_error_line(result, "version 999")
    finally:
        with conn.cursor() as cur:
            cur.execute(f'DROP SCHEMA "{schema}" CASCADE')
        conn.close()


def test_unreachable_database(partition):
    dsn = "postgresql://nobody:s3cret-pw@127.0.0.1:1/none?connect_timeout=2"
    result = cli("run", "--root", str(partition), "--batch", HOUR, "--no-progress", "--db-url", dsn)
    line = assert_one_error_line(result, "database")
    assert "s3cret-pw" not in result.stderr + result.stdout and "127.0.0.1" in line


def _full_disk(path: Path) -> bool:
    """A 1 MiB tmpfs at ``path`` filled up (root only); False where it cannot be mounted."""
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], capture_output=True).returncode:
        return False
    try:
        with (path / "filler").open("wb") as fh:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
    except OSError:
        pass
    return True


def test_disk_full_while_publishing(tmp_path):
    src = tmp_path / "in.parquet"
    pq.write_table(make_batch(docs("d", list(range(50)))), src)
    out = tmp_path / "out"
    mounted = _full_disk(out)
    try:
        if mounted:
            result = cli("run", "--input", str(src), "--out", str(out), "--no-registry", "--no-progress")
        else:
            # No tmpfs (not root): a file size limit fails the writes the same way (Python ignores SIGXFSZ).
            def limit() -> None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

            out.mkdir(exist_ok=True)
            result = subprocess.run(
                ["python", "-m", "dedup_tasks", "run", "--input", str(src), "--out", str(out), "--no-registry", "--no-progress"],
                capture_output=True, text=True, preexec_fn=limit, cwd=Path(__file__).resolve().parents[2],
            )  # fmt: skip
        assert_one_error_line(result, str(out))
        assert not [p for p in out.rglob("*") if ".tmp-" in p.name]
    finally:
        if mounted:
            subprocess.run(["umount", str(out)], check=True)


def test_missing_partition(tmp_path):
    result = cli("run", "--root", str(tmp_path), "--batch", HOUR, "--no-registry", "--no-progress")
    assert_one_error_line(result, "does not exist")
