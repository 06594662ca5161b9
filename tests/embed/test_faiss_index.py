"""PersistentIndex as a mirror of one model's rows in the store: current, one own write behind, or rebuilt."""

from __future__ import annotations

import fcntl
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dedup_tasks.embed.faiss_index import EXACT_UP_TO, PersistentIndex, index_path
from dedup_tasks.registry.embeddings import MemoryEmbeddingStore

B0, B1, B2 = "2026-12-01T00", "2026-12-01T01", "2026-12-01T02"
MODEL = "sketch:test"


def unit(*axes: int, dim: int = 4) -> np.ndarray:
    out = np.zeros((len(axes), dim), np.float32)
    out[np.arange(len(axes)), axes] = 1.0
    return out


def ids(*values: str) -> np.ndarray:
    return np.array(values, object)


def put(store: MemoryEmbeddingStore, docs: list[str], batch: str, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    args = (ids(*docs), ids(*[batch] * len(docs)), vectors)
    store.put(MODEL, *args)
    return args


def test_an_index_follows_its_own_writes_and_is_current_when_reopened(tmp_path: Path) -> None:
    store = MemoryEmbeddingStore()
    index = PersistentIndex.mirror(tmp_path, MODEL, 4, store)
    assert len(index) == 0
    index.follow(store, MODEL, *put(store, ["a", "b"], B0, unit(0, 1)))
    index.follow(store, MODEL, *put(store, ["c"], B1, unit(2)))
    assert index.generation == store.generation(MODEL)
    assert index_path(tmp_path, MODEL).exists()

    def no_snapshot(model_id: str):  # a current index on disk reads no stored vector back
        raise AssertionError("the store was read back")

    store.snapshot = no_snapshot  # type: ignore[method-assign]
    reopened = PersistentIndex.mirror(tmp_path, MODEL, 4, store)
    assert reopened.doc_id.tolist() == ["a", "b", "c"] and reopened.generation == store.generation(MODEL)


def test_an_index_of_another_store_or_generation_is_rebuilt_never_searched(tmp_path: Path) -> None:
    elsewhere = MemoryEmbeddingStore()
    stale = PersistentIndex.mirror(tmp_path, MODEL, 4, elsewhere)
    stale.follow(elsewhere, MODEL, *put(elsewhere, ["ghost"], B0, unit(0)))
    store = MemoryEmbeddingStore()  # same number of writes, another lineage
    put(store, ["real"], B0, unit(1))
    index = PersistentIndex.mirror(tmp_path, MODEL, 4, store)
    assert index.doc_id.tolist() == ["real"] and index.generation == store.generation(MODEL)
    # A write the index did not follow (another process) makes it stale too.
    put(store, ["later"], B1, unit(2))
    assert PersistentIndex.mirror(tmp_path, MODEL, 4, store).doc_id.tolist() == ["real", "later"]


def test_after_another_writer_or_a_rerun_the_index_is_rebuilt_from_the_store(tmp_path: Path) -> None:
    store = MemoryEmbeddingStore()
    index = PersistentIndex.mirror(tmp_path, MODEL, 4, store)
    index.follow(store, MODEL, *put(store, ["a"], B0, unit(0)))
    put(store, ["x"], B1, unit(1))  # another writer, between this index's open and its own write
    index.follow(store, MODEL, *put(store, ["y"], B2, unit(2)))
    assert sorted(index.doc_id.tolist()) == ["a", "x", "y"]
    # A rerun of B2 keeps another document: the index holds what the store holds, no more, no less.
    index.follow(store, MODEL, *put(store, ["y2"], B2, unit(3)))
    assert sorted(index.doc_id.tolist()) == sorted(store.scan(MODEL)[0].tolist())
    assert index.generation == store.generation(MODEL)
    assert sorted(PersistentIndex.open(tmp_path, MODEL, 4).doc_id.tolist()) == ["a", "x", "y", "y2"]


@pytest.mark.parametrize("exact_up_to", [EXACT_UP_TO, 0], ids=["exact", "graph"])
def test_a_rerun_of_an_old_batch_finds_only_documents_of_earlier_batches(tmp_path: Path, exact_up_to: int) -> None:
    store = MemoryEmbeddingStore()
    index = PersistentIndex.mirror(tmp_path, MODEL, 4, store)
    near = np.array([[0.8, 0.6, 0, 0]], np.float32)
    index.follow(store, MODEL, *put(store, ["early"], B0, near))
    index.follow(store, MODEL, *put(store, ["late", "late2"], B2, unit(0, 0)))  # nearer than "early"
    scores, found = index.neighbours(unit(0), 3, before_batch=B1, exact_up_to=exact_up_to)
    assert index.doc_id[found[0, 0]] == "early" and np.isclose(scores[0, 0], 0.8)
    assert found[0, 1:].tolist() == [-1, -1] and np.isneginf(scores[0, 1:]).all()
    scores, found = index.neighbours(unit(0), 3, before_batch="2026-12-01T03", exact_up_to=exact_up_to)
    assert sorted(index.doc_id[found[0, :2]].tolist()) == ["late", "late2"]
    assert index.neighbours(unit(0), 3, before_batch=B0, exact_up_to=exact_up_to)[1].tolist() == [[-1, -1, -1]]


def test_an_hour_that_keeps_no_sketch_leaves_the_index_current(tmp_path: Path) -> None:
    store = MemoryEmbeddingStore()
    index = PersistentIndex.mirror(tmp_path, MODEL, 4, store)
    index.follow(store, MODEL, *put(store, ["a"], B0, unit(0)))

    def no_snapshot(model_id: str):
        raise AssertionError("the index was rebuilt")

    store.snapshot = no_snapshot  # type: ignore[method-assign]
    index.follow(store, MODEL, *put(store, [], B1, np.zeros((0, 4), np.float32)))
    assert index.generation == store.generation(MODEL) and index.doc_id.tolist() == ["a"]


def test_a_save_waits_for_a_reader_of_the_manifest_and_its_graph(tmp_path: Path) -> None:
    # Manifest and graph are two files: a save that removed the old graph between a reader's two
    # reads would leave that reader a manifest without its graph.
    store = MemoryEmbeddingStore()
    index = PersistentIndex.mirror(tmp_path, MODEL, 4, store)
    index.follow(store, MODEL, *put(store, ["a"], B0, unit(0)))
    with open(index.lock, "a+b") as reader:
        fcntl.flock(reader, fcntl.LOCK_SH)
        saving = threading.Thread(target=index.follow, args=(store, MODEL, *put(store, ["b"], B1, unit(1))))
        saving.start()
        time.sleep(0.5)
        assert saving.is_alive()
        assert np.load(index.path)["doc_id"].tolist() == ["a"]  # the first save's files, still
        fcntl.flock(reader, fcntl.LOCK_UN)
    saving.join(10)
    assert not saving.is_alive()
    assert PersistentIndex.open(tmp_path, MODEL, 4).doc_id.tolist() == ["a", "b"]


def test_an_index_file_of_another_layout_or_a_missing_graph_is_rebuilt_from_the_store(tmp_path: Path) -> None:
    store = MemoryEmbeddingStore()
    put(store, ["a", "b"], B0, unit(0, 1))
    index = PersistentIndex.mirror(tmp_path, MODEL, 4, store)
    index.save()
    for graph in index.graph_files:
        graph.unlink()
    with pytest.raises(RuntimeError, match="unreadable index"):
        PersistentIndex.open(tmp_path, MODEL, 4)
    assert PersistentIndex.mirror(tmp_path, MODEL, 4, store).doc_id.tolist() == ["a", "b"]

    import faiss  # a bare FAISS file where the manifest belongs (an index written by another layout)

    faiss.write_index(faiss.IndexFlatIP(4), str(index.path))
    assert PersistentIndex.mirror(tmp_path, MODEL, 4, store).doc_id.tolist() == ["a", "b"]
