""""Seen?" for a crawler frontier: is a URL already registered, and as which document?

The answer for a URL is its canonical form (the one L1 keys on), then the URL Bloom filter (a "no"
is certain: the filter holds every registered key), then, for the filter's "maybe", one registry
query per chunk of URLs (an array of keys joined to the url_key index). Only the registry ever says "seen", so a Bloom
false positive never turns into a false "seen"; only the filter says "not seen" without a query, so
it is never wrong either (the filter is caught up with the registry before every chunk).

Each answer is one JSON object: ``url``, ``canonical_url``, ``seen``, ``batch_id``, ``doc_id``,
``reason``. ``seen`` is true (batch_id/doc_id of the first registration of that canonical URL),
false (not registered; batch_id/doc_id null) or null for a URL that cannot be canonicalized
(canonical_url null too); ``reason`` says why for the last two, and is null for a "seen".

Throughput: canonicalization is a Python loop (~2-4 us a URL); the registry queries run in a second
thread, so the database works on one chunk while this process canonicalizes the next (psycopg2
releases the GIL while it waits). ``python -m bench seen`` measures it (docs/seen.md).
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from dedup_tasks.normalize.url import canonicalize_each, url_key
from dedup_tasks.registry import bloom as bloom_mod

CHUNK_URLS = 4096  # URLs per registry query: one round trip amortized over a few thousand lookups
QUEUE_CHUNKS = 4  # chunks in flight between the canonicalizing and the querying thread

REASON_NOT_REGISTERED = "not registered"
REASON_BLOOM = "not registered (URL Bloom filter)"


@dataclass
class CanonicalChunk:
    """One chunk of input URLs, canonicalized: aligned arrays."""

    urls: list[str]
    canonical: list[str | None]
    keys: np.ndarray  # uint64, 0 where invalid
    valid: np.ndarray  # bool
    reasons: list[str | None]


def canonicalize(urls: list[str], tracking_params: Iterable[str]) -> CanonicalChunk:
    """Canonical URL and URL key of each URL, the way the pipeline's L1 computes them (``url_keys``)."""
    n = len(urls)
    canonical: list[str | None] = [None] * n
    reasons: list[str | None] = [None] * n
    keys = np.zeros(n, np.uint64)
    valid = np.zeros(n, bool)
    for i, (text, _, reasons[i]) in enumerate(canonicalize_each(urls, tracking_params)):
        if text is not None:
            canonical[i], keys[i], valid[i] = text, url_key(text), True
    return CanonicalChunk(urls, canonical, keys, valid, reasons)


class SeenIndex:
    """The registry's URL keys behind its Bloom filter, on one connection (a REPEATABLE READ snapshot per chunk).

    ``bloom_path``: the registry's persisted filter (built from the registry when missing or not
    trusted, as the pipeline does). ``None``: no filter, every valid URL is looked up.
    """

    def __init__(self, dsn: str, schema: str = "dedup", bloom_path: Path | None = None,
                 capacity: int = bloom_mod.DEFAULT_CAPACITY, fp_rate: float = bloom_mod.DEFAULT_FP_RATE) -> None:
        import psycopg2
        from psycopg2 import sql

        self.conn = psycopg2.connect(dsn, application_name="crawl-dedup-seen")
        with self.conn.cursor() as cur:
            cur.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            cur.execute("SELECT to_regclass('documents')")
            if cur.fetchone()[0] is None:
                from dedup_tasks.config import ConfigError

                self.conn.close()
                raise ConfigError(f"no registry in schema {schema!r} (run `python -m dedup_tasks db migrate` "
                                  "or a batch first)")
        self.conn.commit()
        self.bloom_path = bloom_path
        self.capacity, self.fp_rate = capacity, fp_rate
        self.bloom: bloom_mod.PersistedBloom | None = None
        self.bloom_state = "none"
        self._batches: dict[int, str] = {}
        self.stats = {"urls": 0, "invalid": 0, "bloom_no": 0, "queried": 0, "seen": 0, "queries": 0}

    def close(self) -> None:
        if self.bloom is not None and self.bloom.dirty and self.bloom_path is not None and self.bloom_state != "loaded":
            try:
                self.bloom.save(self.bloom_path)  # built here: the next caller loads instead of rebuilding
            except OSError as exc:
                print(f"warning: URL Bloom filter not saved to {self.bloom_path}: {exc}", file=sys.stderr)
        self.conn.close()

    def __enter__(self) -> SeenIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sync(self, cur: Any) -> bloom_mod.PersistedBloom:
        assert self.bloom_path is not None
        if self.bloom is None:
            self.bloom, self.bloom_state = bloom_mod.load_synced(cur, self.bloom_path, self.capacity, self.fp_rate)
        else:
            bloom_mod.catch_up(cur, self.bloom)  # rows committed since the last chunk
        return self.bloom

    def synced_bloom(self) -> bloom_mod.PersistedBloom:
        """The registry's URL filter, holding every key committed up to now (what `db export-bloom` writes)."""
        if self.bloom_path is None:
            raise ValueError("this index has no Bloom filter path")
        with self.conn.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            # Before the snapshot (as the registry's lookups): a compaction's TRUNCATE of the recent tier
            # is not MVCC-safe, so it must wait for this chunk, and this chunk for it.
            cur.execute("LOCK TABLE documents IN ACCESS SHARE MODE")
            bloom = self._sync(cur)
        self.conn.commit()
        return bloom

    def _batch_names(self, cur: Any, ords: set[int]) -> dict[int, str]:
        """batch_id of each registry batch ord (cached: a batch's ord never changes)."""
        missing = [o for o in ords if o not in self._batches]
        if missing:
            cur.execute("SELECT ord, batch_id FROM registry_batches WHERE ord = ANY(%s)", (missing,))
            self._batches.update(cur.fetchall())
        return self._batches

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, list[str | None], list[str | None], np.ndarray]:
        """(seen, batch_id, doc_id, bloom_no) per key: one snapshot, one query for the filter's maybes."""
        keys = np.ascontiguousarray(keys, np.uint64)
        n = len(keys)
        seen = np.zeros(n, bool)
        batch: list[str | None] = [None] * n
        doc: list[str | None] = [None] * n
        bloom_no = np.zeros(n, bool)
        if n == 0:
            return seen, batch, doc, bloom_no
        with self.conn.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            # Before the snapshot (as the registry's lookups): a compaction's TRUNCATE of the recent tier
            # is not MVCC-safe, so it must wait for this chunk, and this chunk for it.
            cur.execute("LOCK TABLE documents IN ACCESS SHARE MODE")
            probe = np.arange(n)
            if self.bloom_path is not None:
                maybe = self._sync(cur).bloom.contains(keys)
                bloom_no = ~maybe
                probe = np.flatnonzero(maybe)
            if len(probe):
                # Sorted as the index stores them (signed): neighbouring probes share index pages.
                uniq = np.unique(keys[probe].view(np.int64))
                array = "{" + ",".join(map(str, uniq.tolist())) + "}"
                # An index probe per key (unnest + join: the planner keeps the url_key index for any
                # array size); batch ids from a cached ord -> id map instead of a join per row.
                cur.execute(
                    "SELECT d.url_key, d.seq, d.batch_ord, d.doc_id FROM unnest(%s::int8[]) AS k(key)"
                    " JOIN documents d ON d.url_key = k.key",
                    (array,),
                )
                rows = cur.fetchall()
                self.stats["queries"] += 1
                self.stats["queried"] += len(probe)
                # The first registration of each key (lowest seq): the page a duplicate would be matched to.
                first: dict[int, tuple[int, int, str]] = {}
                for key, seq, ord_, doc_id in rows:
                    key &= 0xFFFFFFFFFFFFFFFF
                    if key not in first or seq < first[key][0]:
                        first[key] = (seq, ord_, doc_id)
                names = self._batch_names(cur, {o for _, o, _ in first.values()})
                for i in probe.tolist():
                    hit = first.get(int(keys[i]))
                    if hit is not None:
                        seen[i] = True
                        batch[i], doc[i] = names[hit[1]], hit[2]
        self.conn.commit()
        return seen, batch, doc, bloom_no


def answer_chunk(index: SeenIndex, chunk: CanonicalChunk) -> list[dict[str, Any]]:
    """The answer objects of one canonicalized chunk, in input order."""
    return [orjson.loads(line) for line in answer_lines(index, chunk)]


_NULLS = b',"seen":null,"batch_id":null,"doc_id":null,"reason":'
_UNSEEN = {False: b',"seen":false,"batch_id":null,"doc_id":null,"reason":' + orjson.dumps(REASON_NOT_REGISTERED) + b"}",
           True: b',"seen":false,"batch_id":null,"doc_id":null,"reason":' + orjson.dumps(REASON_BLOOM) + b"}"}


def answer_lines(index: SeenIndex, chunk: CanonicalChunk) -> list[bytes]:
    """One JSON line (bytes, no newline) per URL of the chunk, in input order.

    Built from pre-encoded fragments (only the URL strings are encoded per row): this and the
    canonicalization are the per-URL Python work, so it is kept to a few string operations.
    """
    dumps = orjson.dumps
    valid = np.flatnonzero(chunk.valid)
    seen, batch, doc, bloom_no = index.lookup(chunk.keys[valid])
    lines: list[bytes] = [
        b'{"url":' + dumps(url) + b',"canonical_url":null' + _NULLS + dumps(reason) + b"}"
        for url, reason in zip(chunk.urls, chunk.reasons, strict=True)
    ]
    urls, canonical = chunk.urls, chunk.canonical
    for j, (i, hit, no) in enumerate(zip(valid.tolist(), seen.tolist(), bloom_no.tolist(), strict=True)):
        head = b'{"url":' + dumps(urls[i]) + b',"canonical_url":' + dumps(canonical[i])
        if hit:
            lines[i] = head + b',"seen":true,"batch_id":' + dumps(batch[j]) + b',"doc_id":' + dumps(doc[j]) + b',"reason":null}'
        else:
            lines[i] = head + _UNSEEN[no]
    index.stats["urls"] += len(chunk.urls)
    index.stats["invalid"] += len(chunk.urls) - len(valid)
    index.stats["bloom_no"] += int(bloom_no.sum())
    index.stats["seen"] += int(seen.sum())
    return lines


def read_lines(stream: BinaryIO, chunk: int = CHUNK_URLS) -> Iterator[list[str]]:
    """Input URLs in chunks: one per line, the line end stripped; a line that is not UTF-8 stays a
    (then unparsable) string with its bad bytes replaced, so it still gets its answer."""
    lines: list[str] = []
    for raw in stream:
        lines.append(raw.rstrip(b"\r\n").decode("utf-8", "replace"))
        if len(lines) >= chunk:
            yield lines
            lines = []
    if lines:
        yield lines


def answer_stream(index: SeenIndex, lines: Iterable[list[str]], tracking_params: Iterable[str],
                  out: BinaryIO) -> dict[str, int]:
    """Answer every URL of `lines` as JSON lines on `out`, in input order; returns the counters.

    This thread canonicalizes; a second one queries the registry and writes, so both cores work.
    """
    tracking = tuple(tracking_params)
    pending: queue.Queue[CanonicalChunk | None] = queue.Queue(maxsize=QUEUE_CHUNKS)
    failure: list[BaseException] = []

    def worker() -> None:
        try:
            while (chunk := pending.get()) is not None:
                out.write(b"\n".join(answer_lines(index, chunk)) + b"\n")
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)
            while pending.get() is not None:  # unblock the producer
                pass

    thread = threading.Thread(target=worker, name="seen-registry", daemon=True)
    thread.start()
    try:
        for urls in lines:
            if failure:
                break
            pending.put(canonicalize(urls, tracking))
    finally:
        pending.put(None)
        thread.join()
    if failure:
        raise failure[0]
    out.flush()
    return dict(index.stats)
