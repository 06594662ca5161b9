"""Row 18: the L4 vector store when the process writing vectors is killed (SIGKILL, a real child
process). The store's put is one transaction: the next run finds all of that put or none of it, every
key at most once, and the encoder embeds exactly the texts that are not stored (nothing twice). A
FAISS index cache killed while it is saved leaves the previous index or the new one, never a pair of
files that disagree."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
import uuid
import zlib

import numpy as np
import psycopg2
import pytest

from tests.conftest import REPO

N_TEXTS = 40_000  # a put of ~60 MB: the kill lands while it is being written
DIM = 384
MODEL = "test-model#sentence@128"


def texts(start: int, stop: int) -> list[str]:
    return [f"sentence number {i} of the store test" for i in range(start, stop)]


def encoder(counter: list[int]):
    """A deterministic stand-in for the model (the store, not the model, is under test)."""

    def encode(batch: list[str]) -> np.ndarray:
        counter[0] += len(batch)
        seeds = np.array([zlib.crc32(t.encode()) for t in batch], np.uint64)  # the same in every process
        return (np.outer(seeds % 997, np.arange(1, DIM + 1)) % 101).astype(np.float32) / 101

    return encode


CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from dedup_tasks.registry.embeddings import PostgresEmbeddingStore
    from dedup_tasks.embed.stored import StoredEncoder
    from tests.faults.test_18_vector_store_killed import texts, encoder
    dsn, schema, start, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    store = PostgresEmbeddingStore(dsn, schema)
    print("writing", flush=True)
    StoredEncoder(encoder([0]), store, sys.argv[5])(texts(start, stop))
    print("written", flush=True)
    """
)


@pytest.fixture
def store_schema(pg_dsn):
    from dedup_tasks.registry.migrate import migrate

    schema = f"t_{uuid.uuid4().hex[:12]}"
    conn = psycopg2.connect(pg_dsn)
    conn.autocommit = True
    migrate(conn, schema)
    yield schema
    with conn.cursor() as cur:
        cur.execute(f'DROP SCHEMA "{schema}" CASCADE')
    conn.close()


def _child(pg_dsn: str, schema: str, start: int, stop: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, pg_dsn, schema, str(start), str(stop), MODEL],
        cwd=REPO, stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def _rows(pg_dsn: str, schema: str) -> tuple[int, int]:
    with psycopg2.connect(pg_dsn) as conn, conn.cursor() as cur:
        cur.execute(f'SELECT count(*), count(DISTINCT doc_id) FROM "{schema}".embeddings WHERE model_id = %s', (MODEL,))
        return cur.fetchone()


def test_a_writer_killed_mid_put_leaves_all_or_nothing_and_nothing_is_embedded_twice(pg_dsn, store_schema):
    from dedup_tasks.embed.stored import StoredEncoder
    from dedup_tasks.registry.embeddings import PostgresEmbeddingStore

    first = _child(pg_dsn, store_schema, 0, 1000)  # a put that completes
    assert first.communicate(timeout=300)[0].split() == ["writing", "written"]
    child = _child(pg_dsn, store_schema, 0, N_TEXTS)  # 1,000 stored, 39,000 being written
    assert child.stdout.readline().strip() == "writing"
    time.sleep(0.5)
    child.send_signal(signal.SIGKILL)
    rest = child.communicate(timeout=60)[0]
    assert child.returncode == -signal.SIGKILL
    rows, distinct = _rows(pg_dsn, store_schema)
    assert rows == distinct  # every key at most once
    assert rows in (1000, N_TEXTS), rows  # the killed put is all there or not at all
    killed_mid_write = "written" not in rest

    counted = [0]
    store = PostgresEmbeddingStore(pg_dsn, store_schema)
    try:
        stored = StoredEncoder(encoder(counted), store, MODEL)
        vectors = stored(texts(0, N_TEXTS))
        assert counted[0] == N_TEXTS - rows  # only what is not stored is embedded
        assert stored(texts(0, N_TEXTS)).shape == vectors.shape and counted[0] == N_TEXTS - rows  # and only once
        assert np.array_equal(vectors, encoder([0])(texts(0, N_TEXTS)))  # stored vectors are the texts' own
    finally:
        store.close()
    assert _rows(pg_dsn, store_schema) == (N_TEXTS, N_TEXTS)
    assert killed_mid_write or rows == N_TEXTS


def test_an_index_save_killed_leaves_the_previous_index_or_the_new_one(tmp_path):
    pytest.importorskip("faiss")
    script = textwrap.dedent(
        """
        import sys, numpy as np
        from dedup_tasks.embed.faiss_index import PersistentIndex
        root, n = sys.argv[1], int(sys.argv[2])
        index = PersistentIndex.open(root, "m", 64)
        vectors = np.random.default_rng(n).random((n, 64), dtype=np.float32)
        index.add(np.array([f"d{i}" for i in range(n)], object), np.array(["b"] * n, object), vectors)
        print("saving", flush=True)
        index.save()
        print("saved", flush=True)
        """
    )
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path), "500"], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path), "200000"], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "saving"
    time.sleep(0.3)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=60)
    from dedup_tasks.embed.faiss_index import PersistentIndex

    index = PersistentIndex.open(tmp_path, "m", 64)  # raises if the manifest and its graph disagree
    assert index.index.ntotal in (500, 200_500) and len(index.doc_id) == index.index.ntotal  # before or after the save
    assert len(index.graph_files) in (1, 2)  # the manifest's graph, and at most one a killed save left
    index.save()
    assert index.graph_files == [index.path.with_name(str(np.load(index.path)["graph"]))]  # the next save removes it
