"""Row 21: as root, with the data root under a folder of mode 700 (a clone in /root), the embedded
registry still starts and commits: its cluster goes to a folder of the server's user under
SERVER_PLACE, ``<root>/registry/pg`` links to it, and the next run finds it again. Where the server's
user can reach the data root, the cluster stays in it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psycopg2
import pytest

from dedup_tasks.registry.connect import registry_dir
from dedup_tasks.registry.embedded import SERVER_PLACE
from tests.conftest import server_readable_tmpdir, write_partition
from tests.faults.conftest import cli, docs, make_batch

HOURS = ("2026-12-01T00", "2026-12-01T01")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the embedded server then runs as another user")


def _run(root: Path, hour: str):
    env = {"DEDUP_DB_URL": "", "AIRFLOW_CONN_DEDUP_DB": ""}
    return cli("run", "--root", str(root), "--batch", hour, "--no-progress", "--layers", "url,exact,simhash,minhash", env=env)


@pytest.fixture
def private_root(tmp_path):
    private = tmp_path / "home"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    root = private / "crawl-dedup" / "data"
    write_partition(root, HOURS[0], make_batch(docs("d", list(range(30)))))
    # Hour 01 repeats ten of hour 00's documents: the registry must drop them.
    write_partition(root, HOURS[1], make_batch(docs("d", list(range(20, 40)))))
    yield root
    link = registry_dir(root) / "pg"
    if link.is_symlink():
        shutil.rmtree(link.resolve().parent, ignore_errors=True)


def test_a_batch_commits_with_the_cluster_placed_outside_the_private_folder(private_root):
    first = _run(private_root, HOURS[0])
    assert first.returncode == 0, first.stderr
    link = registry_dir(private_root) / "pg"
    assert link.is_symlink()
    place = link.resolve()
    assert place.parent.parent == SERVER_PLACE and (place / "PG_VERSION").exists()
    assert str(place) in first.stderr  # the run says where the registry's data went
    assert place.parent.stat().st_uid != 0  # owned by the server's user

    places = set(SERVER_PLACE.iterdir())
    second = _run(private_root, HOURS[1])  # the same cluster again, through the link
    assert second.returncode == 0, second.stderr
    assert "dropped 10" in second.stdout, second.stdout
    assert set(SERVER_PLACE.iterdir()) == places and "note: embedded" not in second.stderr  # no second cluster


def test_a_traversable_root_keeps_its_cluster(tmp_path):
    root = server_readable_tmpdir("dedup-open-root-") / "data"
    try:
        write_partition(root, HOURS[0], make_batch(docs("d", list(range(5)))))
        result = _run(root, HOURS[0])
        assert result.returncode == 0, result.stderr
        pg = registry_dir(root) / "pg"
        assert not pg.is_symlink() and (pg / "PG_VERSION").exists()
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def test_the_placed_cluster_holds_the_committed_batch(private_root):
    from dedup_tasks.registry.embedded import EmbeddedPostgres

    assert _run(private_root, HOURS[0]).returncode == 0
    server = EmbeddedPostgres(registry_dir(private_root) / "pg")
    with server, psycopg2.connect(server.dsn) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM dedup.documents")
        assert cur.fetchone()[0] == 30
