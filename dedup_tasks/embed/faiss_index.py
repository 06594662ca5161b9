"""FAISS indexes for the semantic layer.

* ``search_flat``: exact inner-product search (IndexFlatIP) among one batch's vectors; with normalized
  vectors the inner product is the cosine.
* ``PersistentIndex``: every kept document of one model id, an HNSW graph in
  ``<root>/registry/faiss/<model_id>.<tag>.faiss`` and a manifest ``<model_id>.index`` that holds
  (doc_id, batch_id) per FAISS id, the store generation and the name of its graph. A save writes a new
  graph file, then renames a new manifest into place: that one rename is the commit, so a save killed
  at any point leaves the previous index or the new one, never a graph beside another save's ids.
  HNSW needs no training (IVF would need a representative sample before the first batch) and keeps recall high while the index grows batch by batch.
  ``PersistentIndex.mirror`` opens it as a cache of that model id's rows in the EmbeddingStore (the
  rewrite sketches of kept documents; the ``full`` mode's kept vectors), checked against the store's
  generation each time: current, one own write behind (``follow`` applies it), or rebuilt from the store.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import uuid
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from dedup_tasks.io import OutputError
from dedup_tasks.registry.embeddings import EmbeddingStore

HNSW_M = 32
HNSW_EF_SEARCH = 128
# Up to this many stored vectors ``neighbours`` scans the index's own flat storage: exact, and no
# slower than the graph (20k sketches, a 20k hour: 3.2 s exact, 4.1 s at efSearch 256).
EXACT_UP_TO = 50_000


def _faiss():
    import faiss

    return faiss


def search_flat(vectors: np.ndarray, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(cosines (q, k), indices (q, k), -1 where fewer than k) of each query among ``vectors``."""
    faiss = _faiss()
    vectors = np.ascontiguousarray(vectors, np.float32)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index.search(np.ascontiguousarray(queries, np.float32), min(k, max(len(vectors), 1)))


def index_path(root: str | Path, model_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)
    return Path(root) / "registry" / "faiss" / f"{safe}.index"


class PersistentIndex:
    """Every kept document's vector of one model, with its (doc_id, batch_id)."""

    def __init__(self, path: Path, dim: int) -> None:
        self.path = Path(path)
        self.dim = dim
        self.index = _faiss().IndexHNSWFlat(dim, HNSW_M, _faiss().METRIC_INNER_PRODUCT)
        self.doc_id = np.empty(0, object)
        self.batch_id = np.empty(0, object)
        # The store generation this index mirrors (``mirror``); None for an index that mirrors nothing.
        self.generation: str | None = None

    def __len__(self) -> int:
        return int(self.index.ntotal)

    @property
    def lock(self) -> Path:
        return self.path.with_suffix(".lock")

    @classmethod
    def open(cls, root: str | Path, model_id: str, dim: int) -> PersistentIndex:
        """The index on disk, or a new empty one."""
        path = index_path(root, model_id)
        out = cls(path, dim)
        if not path.exists():
            return out
        with _locked(out.lock, exclusive=False):
            try:
                with np.load(path, allow_pickle=False) as manifest:
                    ids = {name: manifest[name] for name in manifest.files}
                index = _faiss().read_index(str(path.with_name(str(ids["graph"]))))
            except (OSError, ValueError, KeyError, RuntimeError, zipfile.BadZipFile) as exc:
                raise RuntimeError(f"{path}: unreadable index ({exc}); mirror() rebuilds it") from exc
        if index.d != dim or index.ntotal != len(ids["doc_id"]):
            raise RuntimeError(f"{path}: index and manifest disagree (dim {index.d}, {index.ntotal} vectors); mirror() rebuilds it")
        out.index = index
        out.doc_id = ids["doc_id"].astype(object)
        out.batch_id = ids["batch_id"].astype(object)
        out.generation = str(ids["generation"]) if "generation" in ids else None
        return out

    @property
    def graph_files(self) -> list[Path]:
        """This model's graph files on disk: the manifest's, and any a killed save left behind."""
        pattern = re.compile(re.escape(self.path.stem) + r"\.[0-9a-f]{32}\.faiss")
        return sorted(p for p in self.path.parent.glob("*.faiss") if pattern.fullmatch(p.name))

    def save(self) -> None:
        """Write a new graph file and a new manifest naming it, then rename the manifest into place.

        The rename is the commit and happens under the index's lock, which ``open`` shares while it
        reads the manifest and its graph; the graphs no manifest names are removed under that lock.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tag = uuid.uuid4().hex
        graph = self.path.with_name(f"{self.path.stem}.{tag}.faiss")
        tmp_manifest = self.path.with_name(f".{self.path.name}.tmp-{tag}")
        # The new graph stays locked by this save until it ends: a concurrent save's clean-up removes
        # only graphs no live save holds (a killed save's lock ends with its process).
        owner = open(graph, "wb")  # noqa: SIM115  (held until the finally below)
        fcntl.flock(owner, fcntl.LOCK_EX)
        try:
            try:
                _faiss().write_index(self.index, str(graph))
                extra = {} if self.generation is None else {"generation": np.array(self.generation)}
                with open(tmp_manifest, "wb") as handle:  # a handle: np.savez would append ".npz" to a name
                    np.savez(
                        handle, doc_id=self.doc_id.astype(str), batch_id=self.batch_id.astype(str),
                        graph=np.array(graph.name), **extra,
                    )
            except (OSError, RuntimeError) as exc:  # FAISS reports a failed write (a full disk) as RuntimeError
                graph.unlink(missing_ok=True)
                raise OutputError(getattr(exc, "errno", None) or 0, f"{self.path}: cannot write ({exc})") from exc
            with _locked(self.lock, exclusive=True):
                os.replace(tmp_manifest, self.path)
                for stale in self.graph_files:
                    if stale != graph:
                        _remove_unless_held(stale)
        finally:
            tmp_manifest.unlink(missing_ok=True)
            owner.close()

    @classmethod
    def mirror(cls, root: str | Path, model_id: str, dim: int, store: EmbeddingStore) -> PersistentIndex:
        """The index of every ``model_id`` vector in the store: the one on disk if it holds the store's
        current generation, else one rebuilt from the store (in memory: ``follow`` saves it).

        An index another process left behind (an older generation, another registry, another dim) is
        never searched: the store is the truth, the index a cache of it.
        """
        try:
            out = cls.open(root, model_id, dim)
        except RuntimeError:
            out = cls(index_path(root, model_id), dim)
        if out.generation is None or out.generation != store.generation(model_id):
            out = cls._from_snapshot(index_path(root, model_id), dim, store, model_id)
        return out

    @classmethod
    def _from_snapshot(cls, path: Path, dim: int, store: EmbeddingStore, model_id: str) -> PersistentIndex:
        out = cls(path, dim)
        generation, docs, batches, vectors = store.snapshot(model_id)
        if len(docs) and vectors.shape[1] == dim:
            out.add(docs, batches, vectors)
        out.generation = generation
        return out

    def follow(self, store: EmbeddingStore, model_id: str, doc_ids: np.ndarray, batch_ids: np.ndarray, vectors: np.ndarray) -> None:
        """After ``store.put(model_id, doc_ids, batch_ids, vectors)``: mirror that write, and save.

        Added in place when that put was the only write since this index's generation and brings no
        batch the index already holds; otherwise (a rerun of a batch, another writer in between) the
        index is rebuilt from the store, so it never claims a generation whose rows it lacks.
        """
        generation = store.generation(model_id)
        if len(doc_ids) == 0 and generation == self.generation:  # nothing was written: nothing to mirror
            self.save()
            return
        own_write = generation is not None and generation == _next_generation(self.generation, generation, len(self))
        batches = np.unique(np.asarray(batch_ids, object).astype(str))
        if own_write and not (len(self) and np.isin(self.batch_id.astype(str), batches).any()):
            if len(doc_ids):
                self.add(doc_ids, batch_ids, vectors)
            self.generation = generation
        else:
            fresh = self._from_snapshot(self.path, self.dim, store, model_id)
            self.index, self.doc_id, self.batch_id, self.generation = fresh.index, fresh.doc_id, fresh.batch_id, fresh.generation
        self.save()

    # ---- contents -------------------------------------------------------------------------------
    def add(self, doc_ids: np.ndarray, batch_ids: np.ndarray, vectors: np.ndarray) -> None:
        """Append vectors (a rerun's batch is not replaced here: ``follow`` rebuilds from the store)."""
        if len(doc_ids) == 0:
            return
        self.index.add(np.ascontiguousarray(vectors, np.float32))
        self.doc_id = np.concatenate([self.doc_id, np.asarray(doc_ids, object)])
        self.batch_id = np.concatenate([self.batch_id, np.asarray(batch_ids, object)])

    def neighbours(
        self, queries: np.ndarray, k: int, before_batch: str, ef_search: int = HNSW_EF_SEARCH,
        exact_up_to: int = EXACT_UP_TO,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(cosines (q, k), FAISS ids (q, k)) of each query's k nearest documents of batches <
        ``before_batch``; -inf and -1 where there are fewer. A rerun of an old batch searches only what
        came before it (a filtered search, not a widened one: a later batch can hold every neighbour).
        Exact while the index holds at most ``exact_up_to`` vectors, then the HNSW graph with a
        candidate list of ``ef_search`` (recall against time: bench.research.sketch_history)."""
        n = len(queries)
        scores = np.full((n, k), -np.inf, np.float32)
        ids = np.full((n, k), -1, np.int64)
        if n == 0 or len(self) == 0 or k <= 0:
            return scores, ids
        earlier = self.batch_id.astype(str) < before_batch
        if not earlier.any():
            return scores, ids
        faiss = _faiss()
        exact = len(self) <= exact_up_to
        params = faiss.SearchParameters() if exact else faiss.SearchParametersHNSW(efSearch=max(int(ef_search), k))
        if not earlier.all():
            # Kept alive until the search returns: FAISS holds a raw pointer to the selector.
            selector = faiss.IDSelectorBatch(np.flatnonzero(earlier).astype(np.int64))
            params.sel = selector
        searched = self.index.storage if exact else self.index
        found, idx = searched.search(np.ascontiguousarray(queries, np.float32), min(k, len(self)), params=params)
        hit = idx >= 0
        scores[:, : idx.shape[1]] = np.where(hit, found, -np.inf)
        ids[:, : idx.shape[1]] = np.where(hit, idx, -1)
        return scores, ids

    def search(self, queries: np.ndarray, before_batch: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Best hit per query among documents of batches < ``before_batch``: (cosine, doc_id, batch_id);
        -inf (and ids None) where there is none."""
        scores, idx = self.neighbours(queries, 1, before_batch)
        hit = idx[:, 0] >= 0
        docs = np.full(len(queries), None, object)
        batches = np.full(len(queries), None, object)
        docs[hit] = self.doc_id[idx[hit, 0]]
        batches[hit] = self.batch_id[idx[hit, 0]]
        return scores[:, 0].astype(float), docs, batches


@contextlib.contextmanager
def _locked(path: Path, *, exclusive: bool) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_unless_held(path: Path) -> None:
    """Remove ``path`` unless a save in progress holds its lock (that save's manifest will name it)."""
    try:
        with open(path, "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path.unlink(missing_ok=True)
    except BlockingIOError:
        return
    except FileNotFoundError:
        return


def _next_generation(held: str | None, current: str, size: int) -> str | None:
    """The generation one put after ``held`` (the lineage of ``current`` when ``held`` is None, which an
    index can only claim while it is empty and the store was never written)."""
    lineage, _, _ = current.rpartition(":")
    if held is None:
        return f"{lineage}:1" if size == 0 else None
    held_lineage, _, puts = held.rpartition(":")
    return f"{held_lineage}:{int(puts) + 1}" if held_lineage == lineage else None
