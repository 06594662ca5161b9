"""Synthetic fingerprints with planted collisions in every layer (shared by the registry tests)."""

from __future__ import annotations

import zlib

import numpy as np

from dedup_tasks.registry.base import Fingerprints

NUM_PERM = 32
BANDS = 8
ROWS = 4


def band_keys(sig: np.ndarray, bands: int = BANDS, rows: int = ROWS) -> np.ndarray:
    """(n, bands) uint64: a hash of each band's values and the band index (like fingerprint.minhash)."""
    n = len(sig)
    out = np.empty((n, bands), np.uint64)
    with np.errstate(over="ignore"):
        for b in range(bands):
            h = np.full(n, b + 1, np.uint64)
            for r in range(rows):
                h = h * np.uint64(0x9E3779B97F4A7C15) + sig[:, b * rows + r].astype(np.uint64)
                h ^= h >> np.uint64(29)
            out[:, b] = h
    return out


class Pool:
    """Shared base values: documents drawn from it collide across batches in controlled ways."""

    def __init__(self, rng: np.random.Generator, size: int = 300) -> None:
        self.rng = rng
        self.url = rng.integers(0, 2**64, size, dtype=np.uint64)
        self.content = rng.integers(0, 2**64, (size, 2), dtype=np.uint64)
        self.simhash = rng.integers(0, 2**64, size, dtype=np.uint64)
        self.minhash = rng.integers(0, 2**32, (size, NUM_PERM), dtype=np.uint64).astype(np.uint32)

    def batch(self, n: int, tag: str) -> Fingerprints:
        rng = self.rng
        size = len(self.url)
        fresh = rng.random(n) < 0.4
        pick = rng.integers(0, size, n)
        url = np.where(fresh, rng.integers(0, 2**64, n, dtype=np.uint64), self.url[pick])
        # Same URL with the same content (a repeat) or a changed one (an update).
        cpick = np.where(rng.random(n) < 0.5, pick, rng.integers(0, size, n))
        content = np.where(
            (rng.random(n) < 0.5)[:, None],
            self.content[cpick],
            rng.integers(0, 2**64, (n, 2), dtype=np.uint64),
        )
        # SimHash: a pool value with 0..8 random bits flipped (both near and far band-sharing hashes).
        sim = self.simhash[rng.integers(0, size, n)].copy()
        for i in range(n):
            for bit in rng.choice(64, rng.integers(0, 9), replace=False):
                sim[i] ^= np.uint64(1) << np.uint64(bit)
        sim = np.where(rng.random(n) < 0.2, rng.integers(0, 2**64, n, dtype=np.uint64), sim)
        # MinHash: a pool signature with a share of values replaced (Jaccard ~0.3..1).
        sig = self.minhash[rng.integers(0, size, n)].copy()
        replace = rng.random((n, NUM_PERM)) < rng.uniform(0.0, 0.7, (n, 1))
        sig[replace] = rng.integers(0, 2**32, int(replace.sum()), dtype=np.uint64).astype(np.uint32)
        return Fingerprints(
            doc_id=np.array([f"{tag}-{i}" for i in range(n)], dtype=object),
            url_key=url.astype(np.uint64),
            has_url=rng.random(n) < 0.9,
            content_hash=content.astype(np.uint64),
            simhash=sim.astype(np.uint64),
            has_simhash=rng.random(n) < 0.9,
            minhash=sig,
            has_minhash=rng.random(n) < 0.85,
            minhash_bands=band_keys(sig),
        )


def count_rows(conn, schema: str) -> dict[str, int]:
    """Rows per fingerprint table of the registry in `schema` (conn: autocommit psycopg2 connection)."""
    out = {}
    with conn.cursor() as cur:
        for table in ("url_keys", "content_hashes", "simhashes", "minhash_signatures", "minhash_bands"):
            cur.execute(f'SELECT count(*) FROM "{schema}".{table}')
            out[table] = cur.fetchone()[0]
    return out


def fingerprints(
    doc_ids: list[str],
    url_key: list[int],
    content: list[tuple[int, int]],
    simhash: list[int],
    minhash: np.ndarray | None = None,
) -> Fingerprints:
    """Hand-made fingerprints (every row has URL, SimHash and MinHash) for the targeted tests."""
    n = len(doc_ids)
    rng = np.random.default_rng(
        zlib.crc32("\x1f".join(doc_ids).encode())
    )  # distinct ids: distinct signatures
    sig = (
        minhash
        if minhash is not None
        else rng.integers(0, 2**32, (n, NUM_PERM), dtype=np.uint64).astype(np.uint32)
    )
    return Fingerprints(
        doc_id=np.array(doc_ids, dtype=object),
        url_key=np.array(url_key, dtype=np.uint64),
        has_url=np.ones(n, bool),
        content_hash=np.array(content, dtype=np.uint64).reshape(n, 2),
        simhash=np.array(simhash, dtype=np.uint64),
        has_simhash=np.ones(n, bool),
        minhash=sig,
        has_minhash=np.ones(n, bool),
        minhash_bands=band_keys(sig),
    )


def canonical(m, payload_key: str | None) -> list[tuple]:
    """A Matches as a sorted list of (query, doc_id, batch_id, payload bytes): order-free comparison."""
    rows = []
    payload = m.payload.get(payload_key) if payload_key else None
    for i in range(len(m)):
        rows.append(
            (
                int(m.query[i]),
                str(m.doc_id[i]),
                str(m.batch_id[i]),
                payload[i].tobytes() if payload is not None else b"",
            )
        )
    return sorted(rows)


def all_lookups(registry, query, ask: str) -> dict[str, object]:
    """Every layer's lookup of ``query`` as batch ``ask``, canonical: two registries compare equal."""
    return {
        "url": canonical(registry.lookup_urls(ask, query.url_key), "content_hash"),
        "exact": canonical(registry.lookup_content(ask, query.content_hash), None),
        "simhash": canonical(registry.simhash_candidates(ask, query.simhash), "simhash"),
        "minhash": canonical(registry.minhash_candidates(ask, query.minhash_bands), "minhash"),
    }


def mix_band_keys(fp: Fingerprints) -> Fingerprints:
    """``fp`` with band keys finished by splitmix64's mixer: ``band_keys`` leaves differences in the low
    bits, and the main tier's blocks compare a key's top bits + 32 only (a collision there is an extra
    candidate, not a miss), so without it the lookups could differ from MemoryRegistry's."""
    with np.errstate(over="ignore"):
        k = np.asarray(fp.minhash_bands, np.uint64)
        k = (k ^ (k >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        k = (k ^ (k >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        fp.minhash_bands = k ^ (k >> np.uint64(31))
    return fp


def commit_both(registry, memory, batch_id: str, fp: Fingerprints):
    """Commit ``fp`` to ``registry`` (begin + commit) and to ``memory``; the registry's CommitResult."""
    registry.begin(batch_id)
    result = registry.commit(batch_id, fp)
    memory.commit(batch_id, fp)
    return result


def fill_both(registry, memory, batches, batch_of) -> None:
    """``commit_both`` of ``batch_of(batch_id)`` for each batch; ``registry`` compacted after the first,
    so one batch is in the main tier and the others are recent."""
    for i, batch_id in enumerate(batches):
        commit_both(registry, memory, batch_id, batch_of(batch_id))
        if i == 0:
            registry.compact()
