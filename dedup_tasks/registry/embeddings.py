"""Document vectors of the L4 semantic layer, cached per (model_id, batch_id, doc_id).

The semantic layer embeds a candidate from an earlier batch at most once per model: the first time it
reads the document back from the published partition and stores the vector here; later batches find
it here. Vectors are keyed by model id and a lookup names one model, so a vector of model A is never
returned to a caller that embeds with model B.

Two implementations: ``MemoryEmbeddingStore`` (tests, the benchmark, MemoryRegistry runs) and
``PostgresEmbeddingStore`` (table ``embeddings`` of migration 0002, in the registry's schema).
"""

from __future__ import annotations

import abc
import contextlib
import threading
import uuid
from collections.abc import Iterable
from typing import Any

import numpy as np
from psycopg2 import sql

from dedup_tasks.registry._pgio import copy_in

# The batch id of a vector keyed by its text's content (``embed.stored``: the sketch path's sentence
# vectors), not by a document: it belongs to no batch (a real batch id is an hour's name).
CONTENT_KEYED = "*"


def _pairs(doc_ids: Iterable[Any], batch_ids: Iterable[Any]) -> list[tuple[str, str]]:
    return [(str(d), str(b)) for d, b in zip(doc_ids, batch_ids, strict=True)]


class EmbeddingStore(abc.ABC):
    """Vectors by (model_id, batch_id, doc_id). All calls are bulk: whole arrays, never one row at a time."""

    @abc.abstractmethod
    def get(self, model_id: str, doc_ids: np.ndarray, batch_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found mask (n,), vectors (n, d) float32 with zero rows where not found) for this model only."""

    @abc.abstractmethod
    def put(self, model_id: str, doc_ids: np.ndarray, batch_ids: np.ndarray, vectors: np.ndarray) -> int:
        """Store (or replace) vectors; returns how many rows were written."""

    @abc.abstractmethod
    def scan(self, model_id: str, before_batch: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every (doc_id, batch_id, vector) of this model, batch_id < before_batch if given, in key order.

        What a FAISS index is rebuilt from.
        """

    @abc.abstractmethod
    def generation(self, model_id: str) -> str | None:
        """``"<lineage>:<puts>"`` of this model's vectors (None: never written). Every ``put`` moves it to
        ``puts + 1`` in the same write; a FAISS index that mirrors the vectors records the generation it
        holds (``faiss_index.PersistentIndex.mirror``)."""

    @abc.abstractmethod
    def snapshot(self, model_id: str) -> tuple[str | None, np.ndarray, np.ndarray, np.ndarray]:
        """(generation, doc_ids, batch_ids, vectors) of this model, read together: the vectors are those
        of that generation, whatever other writers do meanwhile."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class MemoryEmbeddingStore(EmbeddingStore):
    def __init__(self) -> None:
        self._rows: dict[tuple[str, str, str], np.ndarray] = {}
        self._puts: dict[str, int] = {}
        # A store lives as long as its process: an index left on disk by another one never matches.
        self._lineage = uuid.uuid4().hex
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, model_id: str, doc_ids: np.ndarray, batch_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = _pairs(doc_ids, batch_ids)
        found = np.zeros(len(keys), bool)
        hits: list[np.ndarray | None] = []
        with self._lock:
            for i, (d, b) in enumerate(keys):
                v = self._rows.get((model_id, b, d))
                hits.append(v)
                found[i] = v is not None
        dim = next((len(v) for v in hits if v is not None), 0)
        out = np.zeros((len(keys), dim), np.float32)
        for i, v in enumerate(hits):
            if v is not None:
                out[i] = v
        return found, out

    def put(self, model_id: str, doc_ids: np.ndarray, batch_ids: np.ndarray, vectors: np.ndarray) -> int:
        keys = _pairs(doc_ids, batch_ids)
        if not keys:  # as in PostgreSQL: no write, the generation stays
            return 0
        vectors = np.asarray(vectors, np.float32)
        with self._lock:
            for (d, b), v in zip(keys, vectors, strict=True):
                self._rows[(model_id, b, d)] = v.copy()
            self._puts[model_id] = self._puts.get(model_id, 0) + 1
        return len(keys)

    def generation(self, model_id: str) -> str | None:
        with self._lock:
            return self._generation(model_id)

    def _generation(self, model_id: str) -> str | None:
        puts = self._puts.get(model_id)
        return None if puts is None else f"{self._lineage}:{puts}"

    def snapshot(self, model_id: str) -> tuple[str | None, np.ndarray, np.ndarray, np.ndarray]:
        with self._lock:
            return (self._generation(model_id), *self._read(model_id, None))

    def scan(self, model_id: str, before_batch: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with self._lock:
            return self._read(model_id, before_batch)

    def _read(self, model_id: str, before_batch: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        items = sorted(
            (k, v) for k, v in self._rows.items() if k[0] == model_id and (before_batch is None or k[1] < before_batch)
        )
        docs = np.array([k[2] for k, _ in items], dtype=object)
        batches = np.array([k[1] for k, _ in items], dtype=object)
        vectors = np.stack([v for _, v in items]).astype(np.float32) if items else np.zeros((0, 0), np.float32)
        return docs, batches, vectors


class PostgresEmbeddingStore(EmbeddingStore):
    """The ``embeddings`` table (migration 0002) in a registry schema.

    Takes a psycopg2 connection (or a DSN, then owns the connection). Writes go through COPY into a
    temporary table and one upsert; reads join the requested keys in one statement.
    """

    def __init__(self, conn_or_dsn: Any, schema: str = "dedup") -> None:
        import psycopg2

        self._owns = isinstance(conn_or_dsn, str)
        self._conn = psycopg2.connect(conn_or_dsn) if self._owns else conn_or_dsn
        self._table = sql.Identifier(schema, "embeddings")
        self._generations = sql.Identifier(schema, "embedding_generations")

    def close(self) -> None:
        if self._owns and not self._conn.closed:
            self._conn.close()

    def get(self, model_id: str, doc_ids: np.ndarray, batch_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = _pairs(doc_ids, batch_ids)
        found = np.zeros(len(keys), bool)
        if not keys:
            return found, np.zeros((0, 0), np.float32)
        query = sql.SQL(
            "SELECT k.ord, e.dim, e.vector FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS k(doc_id, batch_id, ord)"
            " JOIN {} e ON e.model_id = %s AND e.batch_id = k.batch_id COLLATE \"C\" AND e.doc_id = k.doc_id COLLATE \"C\""
        ).format(self._table)
        with self._conn, self._conn.cursor() as cur:
            cur.execute(query, ([d for d, _ in keys], [b for _, b in keys], model_id))
            rows = cur.fetchall()
        dim = rows[0][1] if rows else 0
        out = np.zeros((len(keys), dim), np.float32)
        for ord_, _, vec in rows:
            out[ord_ - 1] = np.frombuffer(bytes(vec), np.float32)
            found[ord_ - 1] = True
        return found, out

    def put(self, model_id: str, doc_ids: np.ndarray, batch_ids: np.ndarray, vectors: np.ndarray) -> int:
        keys = _pairs(doc_ids, batch_ids)
        if not keys:
            return 0
        vectors = np.ascontiguousarray(vectors, np.float32).reshape(len(keys), -1)
        n, dim = vectors.shape
        # Binary COPY, built column-wise (registry._pgio): no per-row text, no hex of the vectors.
        columns = [
            ("text", [model_id] * n), ("text", [b for _, b in keys]), ("text", [d for d, _ in keys]),
            ("int4", np.full(n, dim, np.int32)), ("bytea", vectors.view(np.uint8)),
        ]
        with self._conn, self._conn.cursor() as cur:
            cur.execute(
                "CREATE TEMP TABLE IF NOT EXISTS _emb_in (model_id text, batch_id text, doc_id text, dim int, vector bytea)"
                " ON COMMIT DELETE ROWS"
            )
            copy_in(cur, "_emb_in", ["model_id", "batch_id", "doc_id", "dim", "vector"], columns)
            cur.execute(
                sql.SQL(
                    "INSERT INTO {} (model_id, batch_id, doc_id, dim, vector)"
                    " SELECT DISTINCT ON (model_id, batch_id, doc_id) model_id, batch_id, doc_id, dim, vector FROM _emb_in"
                    " ON CONFLICT (model_id, batch_id, doc_id) DO UPDATE SET dim = EXCLUDED.dim, vector = EXCLUDED.vector,"
                    " registered_at = now()"
                ).format(self._table)
            )
            written = cur.rowcount
            self._next_generation(cur, model_id)
            return written

    def prune_content_keyed(self, older_than_days: float) -> dict[str, int]:
        """Delete the content-keyed vectors (``CONTENT_KEYED``) written more than ``older_than_days``
        ago (ValueError below 0); returns rows deleted per model id. Each model whose rows went moves
        its generation on, in the same transaction. Such vectors are a cache: a text needed again is
        embedded again, no decision changes."""
        if older_than_days < 0:
            raise ValueError(f"older_than_days must be >= 0, got {older_than_days}")
        with self._conn, self._conn.cursor() as cur:
            cur.execute(*self._prune_statement(older_than_days))
            deleted = {model_id: int(rows) for model_id, rows in cur.fetchall()}
            for model_id in deleted:
                self._next_generation(cur, model_id)
            return deleted

    def _prune_statement(self, older_than_days: float) -> tuple[sql.Composed, tuple[str, float]]:
        # The batch id is bound client-side as the literal '*', which the partial index of schema 11
        # (embeddings_content_keyed_age) names in its predicate: the prune reads that index, not the table.
        return (
            sql.SQL(
                "WITH gone AS (DELETE FROM {} WHERE batch_id = %s AND registered_at < now() - make_interval(secs => %s)"
                " RETURNING model_id) SELECT model_id, count(*) FROM gone GROUP BY model_id"
            ).format(self._table),
            (CONTENT_KEYED, float(older_than_days) * 86400.0),
        )

    def _next_generation(self, cur: Any, model_id: str) -> None:
        """Move ``model_id``'s generation on, in the caller's transaction (every write to its vectors does)."""
        cur.execute(
            sql.SQL(
                "INSERT INTO {0} (model_id, puts) VALUES (%s, 1) ON CONFLICT (model_id) DO UPDATE SET puts = {0}.puts + 1"
            ).format(self._generations),
            (model_id,),
        )

    def generation(self, model_id: str) -> str | None:
        with self._conn, self._conn.cursor() as cur:
            return self._generation(cur, model_id)

    def _generation(self, cur: Any, model_id: str) -> str | None:
        cur.execute(sql.SQL("SELECT lineage, puts FROM {} WHERE model_id = %s").format(self._generations), (model_id,))
        row = cur.fetchone()
        return None if row is None else f"{row[0]}:{row[1]}"

    def snapshot(self, model_id: str) -> tuple[str | None, np.ndarray, np.ndarray, np.ndarray]:
        with self._conn, self._conn.cursor() as cur:
            # One snapshot for both reads: a put committed between them cannot pair new rows with an
            # old generation.
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return (self._generation(cur, model_id), *self._read(cur, model_id, None))

    def scan(self, model_id: str, before_batch: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        with self._conn, self._conn.cursor() as cur:
            return self._read(cur, model_id, before_batch)

    def _read(self, cur: Any, model_id: str, before_batch: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cur.execute(
            sql.SQL(
                "SELECT batch_id, doc_id, vector FROM {} WHERE model_id = %s"
                " AND (%s::text IS NULL OR batch_id < %s::text COLLATE \"C\") ORDER BY batch_id, doc_id"
            ).format(self._table),
            (model_id, before_batch, before_batch),
        )
        rows = cur.fetchall()
        if not rows:
            return np.empty(0, object), np.empty(0, object), np.zeros((0, 0), np.float32)
        batches, docs, blobs = zip(*rows, strict=True)
        # One model, one dim: the vectors are one buffer, not an array per row.
        vectors = np.frombuffer(bytearray().join(blobs), np.float32).reshape(len(rows), -1)
        return np.array(docs, object), np.array(batches, object), vectors


def store_for(registry: object) -> EmbeddingStore:
    """The embedding store that goes with ``registry``.

    A registry that has one exposes it as ``registry.embedding_store`` (the PostgreSQL registry should
    return a PostgresEmbeddingStore on its connection and schema). Any other registry gets one
    MemoryEmbeddingStore, attached to the registry object so it lives as long as the registry does and
    is shared by every batch run against it.
    """
    store = getattr(registry, "embedding_store", None)
    if isinstance(store, EmbeddingStore):
        return store
    store = getattr(registry, "_semantic_memory_store", None)
    if store is None:
        store = MemoryEmbeddingStore()
        # A registry with __slots__ cannot hold it: then a per-call store (no cross-batch cache).
        with contextlib.suppress(AttributeError):
            registry._semantic_memory_store = store  # type: ignore[attr-defined]
    return store
