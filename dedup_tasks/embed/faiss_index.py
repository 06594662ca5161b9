"""FAISS indexes for the semantic layer.

* ``search_flat``: exact inner-product search (IndexFlatIP) among one batch's vectors; with normalized
  vectors the inner product is the cosine.
* ``PersistentIndex``: the ``full`` mode's index of every kept document of one model, an HNSW graph
  under ``<root>/registry/faiss/<model_id>.index`` plus a sidecar of (doc_id, batch_id) per FAISS id.
  Added to once per batch, written tmp-then-rename (index and sidecar), rebuildable from the
  EmbeddingStore. HNSW needs no training (IVF would need a representative sample before the first
  batch) and keeps recall high while the index grows batch by batch.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import numpy as np

from dedup_tasks.registry.embeddings import EmbeddingStore

HNSW_M = 32
HNSW_EF_SEARCH = 128


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
        self.index.hnsw.efSearch = HNSW_EF_SEARCH
        self.doc_id = np.empty(0, object)
        self.batch_id = np.empty(0, object)

    @property
    def sidecar(self) -> Path:
        return self.path.with_suffix(".ids.npz")

    def __len__(self) -> int:
        return int(self.index.ntotal)

    # ---- persistence ----------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | Path, model_id: str, dim: int) -> PersistentIndex:
        """The index on disk, or a new empty one."""
        path = index_path(root, model_id)
        out = cls(path, dim)
        if path.exists() and out.sidecar.exists():
            index = _faiss().read_index(str(path))
            ids = np.load(out.sidecar, allow_pickle=False)
            if index.d != dim or index.ntotal != len(ids["doc_id"]):
                raise RuntimeError(f"{path}: index and sidecar disagree (dim {index.d}, {index.ntotal} vectors); rebuild it")
            index.hnsw.efSearch = HNSW_EF_SEARCH
            out.index = index
            out.doc_id = ids["doc_id"].astype(object)
            out.batch_id = ids["batch_id"].astype(object)
        return out

    def save(self) -> None:
        """Write index and sidecar under temporary names, then rename each into place.

        The sidecar is renamed last and ``open`` checks the two agree, so a crash between the renames
        is detected instead of silently mapping FAISS ids to the wrong documents.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tag = uuid.uuid4().hex
        tmp_index = self.path.with_name(f".{self.path.name}.tmp-{tag}")
        tmp_ids = self.sidecar.with_name(f".{self.sidecar.name}.tmp-{tag}.npz")
        try:
            _faiss().write_index(self.index, str(tmp_index))
            np.savez(tmp_ids, doc_id=self.doc_id.astype(str), batch_id=self.batch_id.astype(str))
            os.replace(tmp_index, self.path)
            os.replace(tmp_ids, self.sidecar)
        finally:
            for tmp in (tmp_index, tmp_ids):
                tmp.unlink(missing_ok=True)

    @classmethod
    def rebuild(cls, root: str | Path, model_id: str, store: EmbeddingStore, dim: int) -> PersistentIndex:
        """A fresh index from every vector of ``model_id`` in the store, saved in place."""
        out = cls(index_path(root, model_id), dim)
        docs, batches, vectors = store.scan(model_id)
        if len(docs):
            out.add(docs, batches, vectors)
        out.save()
        return out

    # ---- contents -------------------------------------------------------------------------------
    def add(self, doc_ids: np.ndarray, batch_ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add vectors; a batch already in the index (a rerun) has its old vectors replaced."""
        batch_ids = np.asarray(batch_ids, object)
        rerun = np.isin(self.batch_id.astype(str), np.unique(batch_ids.astype(str))) if len(self) else np.zeros(0, bool)
        if rerun.any():
            # HNSW cannot delete: rebuild from the vectors that stay (reconstructed from the graph's storage).
            keep = np.flatnonzero(~rerun)
            old = self.index.reconstruct_n(0, len(self)) if len(keep) else np.zeros((0, self.dim), np.float32)
            fresh = PersistentIndex(self.path, self.dim)
            if len(keep):
                fresh.add(self.doc_id[keep], self.batch_id[keep], old[keep])
            self.index, self.doc_id, self.batch_id = fresh.index, fresh.doc_id, fresh.batch_id
        if len(doc_ids) == 0:
            return
        self.index.add(np.ascontiguousarray(vectors, np.float32))
        self.doc_id = np.concatenate([self.doc_id, np.asarray(doc_ids, object)])
        self.batch_id = np.concatenate([self.batch_id, batch_ids])

    def search(self, queries: np.ndarray, k: int, before_batch: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Best hit per query among documents of batches < ``before_batch``: (cosine, doc_id, batch_id).

        cosine is -inf (and ids None) where there is none. Later batches are filtered out after the
        search (a rerun of an old batch must not match documents of newer batches), so k is widened.
        """
        n = len(queries)
        best = np.full(n, -np.inf)
        docs = np.full(n, None, object)
        batches = np.full(n, None, object)
        if n == 0 or len(self) == 0:
            return best, docs, batches
        scores, idx = self.index.search(np.ascontiguousarray(queries, np.float32), min(k, len(self)))
        valid = idx >= 0
        safe = np.where(valid, idx, 0)
        earlier = valid & (self.batch_id[safe].astype(str) < before_batch)
        scores = np.where(earlier, scores, -np.inf)
        col = np.argmax(scores, axis=1)
        rows = np.arange(n)
        best = scores[rows, col].astype(float)
        hit = np.isfinite(best)
        docs[hit] = self.doc_id[safe[rows, col]][hit]
        batches[hit] = self.batch_id[safe[rows, col]][hit]
        return best, docs, batches
