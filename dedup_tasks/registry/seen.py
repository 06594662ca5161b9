""""Seen?" for a crawler frontier: is a URL already registered, and as which document?

The answer for a URL is its canonical form (the one L1 keys on), then the URL Bloom filter (a "no"
is certain: the filter holds every registered key), then, for the filter's "maybe", one registry
query per chunk of URLs (``url_key = ANY(array)``). Only the registry ever says "seen", so a Bloom
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
import xxhash

from dedup_tasks.normalize.url import InvalidURL, _canonicalize, _matcher_for
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
    is_tracking = _matcher_for(tracking_params)
    n = len(urls)
    canonical: list[str | None] = [None] * n
    reasons: list[str | None] = [None] * n
    keys = np.zeros(n, np.uint64)
    valid = np.zeros(n, bool)
    hash64 = xxhash.xxh64_intdigest
    for i, url in enumerate(urls):
        try:
            text, _ = _canonicalize(url, is_tracking)
        except InvalidURL as exc:
            reasons[i] = f"unparsable: {exc.reason}"
            continue
        except Exception as exc:  # noqa: BLE001 - one bad URL must not end the stream (as in url_keys)
            reasons[i] = f"unparsable: {type(exc).__name__}"
            continue
        canonical[i] = text
        keys[i] = hash64(text.encode("utf-8"))
        valid[i] = True
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
            bloom = self._sync(cur)
        self.conn.commit()
        return bloom

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
            probe = np.arange(n)
            if self.bloom_path is not None:
                maybe = self._sync(cur).bloom.contains(keys)
                bloom_no = ~maybe
                probe = np.flatnonzero(maybe)
            if len(probe):
                uniq = np.unique(keys[probe])
                array = "{" + ",".join(map(str, uniq.view(np.int64).tolist())) + "}"
                # The first registration of each key (lowest seq): the page a duplicate would be matched to.
                cur.execute(
                    "SELECT DISTINCT ON (d.url_key) d.url_key, b.batch_id, d.doc_id FROM documents d"
                    " JOIN registry_batches b ON b.ord = d.batch_ord"
                    " WHERE d.url_key = ANY(%s::int8[]) ORDER BY d.url_key, d.seq",
                    (array,),
                )
                found = {int(k) & 0xFFFFFFFFFFFFFFFF: (b, d) for k, b, d in cur.fetchall()}
                self.stats["queries"] += 1
                self.stats["queried"] += len(probe)
                for i in probe.tolist():
                    hit = found.get(int(keys[i]))
                    if hit is not None:
                        seen[i] = True
                        batch[i], doc[i] = hit
        self.conn.commit()
        return seen, batch, doc, bloom_no


def answer_chunk(index: SeenIndex, chunk: CanonicalChunk) -> list[dict[str, Any]]:
    """The answer objects of one canonicalized chunk, in input order."""
    valid = np.flatnonzero(chunk.valid)
    seen, batch, doc, bloom_no = index.lookup(chunk.keys[valid])
    out: list[dict[str, Any]] = [
        {"url": url, "canonical_url": None, "seen": None, "batch_id": None, "doc_id": None, "reason": reason}
        for url, reason in zip(chunk.urls, chunk.reasons, strict=True)
    ]
    for j, i in enumerate(valid.tolist()):
        row = out[i]
        row["canonical_url"] = chunk.canonical[i]
        if seen[j]:
            row.update(seen=True, batch_id=batch[j], doc_id=doc[j])
        else:
            row.update(seen=False, reason=REASON_BLOOM if bloom_no[j] else REASON_NOT_REGISTERED)
    index.stats["urls"] += len(chunk.urls)
    index.stats["invalid"] += len(chunk.urls) - len(valid)
    index.stats["bloom_no"] += int(bloom_no.sum())
    index.stats["seen"] += int(seen.sum())
    return out


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
                answers = answer_chunk(index, chunk)
                out.write(b"\n".join(map(orjson.dumps, answers)) + b"\n")
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
