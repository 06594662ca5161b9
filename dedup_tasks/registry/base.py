"""The registry interface every layer talks to, and the in-memory implementation.

A registry answers "which earlier batch already holds this fingerprint?" and, at commit, records the
fingerprints of the documents a batch kept. Every lookup is restricted to batches whose batch_id
sorts before the asking batch, so a batch's decisions depend only on earlier batches and reruns are
idempotent. Lookups take whole numpy columns (bulk I/O only: never one query per document).

batch_id values are strings that sort chronologically (e.g. "2026-12-01T00").
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from dedup_tasks.fingerprint.stoplist import Stoplist

# Fingerprint columns, all aligned to `doc_id`.
#   url_key        uint64   xxh64 of the canonical URL (0 where the URL could not be canonicalized)
#   has_url        bool     False where the URL was null/unparsable: such rows are never URL-registered
#   content_hash   2 x uint64 per row (shape (n, 2)): 128-bit xxh3 of normalized title + content
#   simhash        uint64   64-bit SimHash (valid where has_simhash)
#   minhash        uint32   (n, num_perm) signature (valid where has_minhash)


@dataclass
class Fingerprints:
    """Fingerprints of the documents a batch kept, registered in one commit."""

    doc_id: np.ndarray  # object array of str
    url_key: np.ndarray  # uint64
    has_url: np.ndarray  # bool
    content_hash: np.ndarray  # uint64 (n, 2)
    simhash: np.ndarray  # uint64
    has_simhash: np.ndarray  # bool
    minhash: np.ndarray  # uint32 (n, num_perm)
    has_minhash: np.ndarray  # bool
    minhash_bands: np.ndarray  # uint64 (n, bands): band keys, see fingerprint.minhash.band_keys
    # False where the document has no content (empty after normalization): such rows are never
    # registered in content_hashes nor matched by content. None: every row has content.
    has_content: np.ndarray | None = None
    # What the registry keeps of each signature (DedupConfig.registry_signature_bits): 32 the lossless
    # values, b < 32 only their low b bits (b-bit MinHash, schema 9). Both registries store exactly that;
    # their MinHash lookups return each row's bits in payload['minhash_bits'].
    minhash_bits: int = 32

    def content_mask(self) -> np.ndarray:
        return np.ones(len(self), bool) if self.has_content is None else np.asarray(self.has_content, bool)

    def __len__(self) -> int:
        return len(self.doc_id)

    def take(self, index: np.ndarray) -> Fingerprints:
        return Fingerprints(
            **{name: value if value is None or np.ndim(value) == 0 else value[index] for name, value in self.__dict__.items()}
        )


@dataclass
class Matches:
    """Registry hits for a vector of queries: query row i matched registered document (doc_id, batch_id).

    `query` indexes the lookup's input arrays. A query may appear several times (several candidates);
    the layer decides which candidate wins. `payload` carries what the layer needs to score a candidate
    (content hash of a URL hit, SimHash value, MinHash signature).
    """

    query: np.ndarray  # int64
    doc_id: np.ndarray  # object (str)
    batch_id: np.ndarray  # object (str)
    payload: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def empty(cls, **payload: np.ndarray) -> Matches:
        return cls(np.empty(0, np.int64), np.empty(0, object), np.empty(0, object), dict(payload))

    def __len__(self) -> int:
        return len(self.query)


@dataclass
class CommitResult:
    """What the commit registered, and which kept documents the re-check found already taken."""

    registered: int
    # Rows (indices into the committed Fingerprints) that a concurrently committed batch registered a
    # duplicate of between the layers' read and this commit: the pipeline turns them into drops.
    conflicts: Matches
    # Earlier batch wins under any commit order: later batches (larger batch_id) that had registered
    # a duplicate of a document this commit kept. Their copies were retracted from the registry; each
    # needs a rerun (its outputs still keep the copy). batch_id -> documents retracted.
    stale: dict[str, int] = field(default_factory=dict)


class Registry(abc.ABC):
    """Storage of fingerprints from earlier batches. Implementations: MemoryRegistry, PostgresRegistry."""

    # False: MinHash band keys come from the configured index signature (``minhash_registry_stoplist``),
    # which keeps chance agreements rare at billions of documents. True: from the plain signature, for
    # a registry that dies with its process and never holds that many (``--no-registry`` runs).
    plain_band_keys: bool = False

    # ---- lookups: only rows registered by batches with batch_id < `batch_id` -------------------
    @abc.abstractmethod
    def lookup_urls(self, batch_id: str, url_keys: np.ndarray) -> Matches:
        """Registered URLs with these keys; payload['content_hash'] is (m, 2) uint64."""

    @abc.abstractmethod
    def lookup_content(self, batch_id: str, content_hash: np.ndarray) -> Matches:
        """Registered documents with exactly these 128-bit content hashes ((n, 2) uint64)."""

    @abc.abstractmethod
    def simhash_candidates(self, batch_id: str, simhash: np.ndarray) -> Matches:
        """Registered SimHashes sharing at least one 16-bit band; payload['simhash'] uint64.

        The caller computes Hamming distances and applies its thresholds.
        """

    @abc.abstractmethod
    def minhash_candidates(self, batch_id: str, band_keys: np.ndarray, *, main_min_bands: int = 1) -> Matches:
        """Registered documents sharing at least one LSH band key; payload['minhash'] (m, num_perm) uint32
        as stored (b-bit rows: only the low bits), payload['minhash_bits'] (m,) uint8 each row's bits.

        A document of the main tier (registered before the last compaction) must share at least
        ``main_min_bands`` of its band keys with the query (two make chance agreements of unrelated
        documents ~1,000x rarer: docs/registry-scale.md); one of the recent tier, one."""

    @abc.abstractmethod
    def band_key_stoplist(self, propose: Callable[[], Stoplist | None]) -> Stoplist | None:
        """The stoplist this registry's MinHash band keys come from (None: the plain signature), for
        ``minhash_registry_stoplist="auto"``. A registry that has recorded none records ``propose()``
        (called only then, so a new registry learns it from its first batch) and keeps it for good."""

    # ---- writes -------------------------------------------------------------------------------
    @abc.abstractmethod
    def commit(self, batch_id: str, kept: Fingerprints) -> CommitResult:
        """Replace everything `batch_id` registered before with `kept`, atomically.

        Implementations re-check `kept` against rows that other batches registered since this batch's
        lookups and report those as conflicts (they are not registered).
        """

    def begin(self, batch_id: str) -> None:  # noqa: B027 - optional hook
        """Called before the first lookup of a batch (a snapshot point for the commit's re-check)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections / stop servers."""

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _concat_matches(parts: list[Matches], payload_keys: tuple[str, ...]) -> Matches:
    if not parts:
        return Matches.empty()
    return Matches(
        np.concatenate([p.query for p in parts]),
        np.concatenate([p.doc_id for p in parts]),
        np.concatenate([p.batch_id for p in parts]),
        {k: np.concatenate([p.payload[k] for p in parts]) for k in payload_keys},
    )


class MemoryRegistry(Registry):
    """Fingerprints of earlier batches held in process memory.

    Used for `--no-registry` runs (an instance per run, ``plain_band_keys``: the hours of one run
    against each other), for the benchmark's multi-hour runs and by tests. Same semantics as the
    PostgreSQL registry, without persistence.
    """

    def __init__(self, *, plain_band_keys: bool = False) -> None:
        self.plain_band_keys = plain_band_keys
        self._stoplist: tuple[Stoplist | None] | None = None  # recorded: (stoplist,)
        self._batches: dict[str, Fingerprints] = {}
        self._main: set[str] = set()  # batches registered before the last compact()

    def band_key_stoplist(self, propose: Callable[[], Stoplist | None]) -> Stoplist | None:
        if self._stoplist is None:
            self._stoplist = (propose(),)
        return self._stoplist[0]

    def compact(self) -> None:
        """Move every registered batch to the main tier (as PostgresRegistry.compact does)."""
        self._main = set(self._batches)

    def _earlier(self, batch_id: str) -> list[tuple[str, Fingerprints]]:
        return [(b, fp) for b, fp in sorted(self._batches.items()) if b < batch_id and len(fp)]

    @staticmethod
    def _join(query_keys: np.ndarray, stored_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """All (query index, stored index) pairs with equal keys; vectorized sort-merge join."""
        if len(query_keys) == 0 or len(stored_keys) == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        order = np.argsort(stored_keys, kind="stable")
        sorted_keys = stored_keys[order]
        lo = np.searchsorted(sorted_keys, query_keys, side="left")
        hi = np.searchsorted(sorted_keys, query_keys, side="right")
        counts = hi - lo
        q = np.repeat(np.arange(len(query_keys)), counts)
        starts = np.repeat(lo - np.cumsum(counts) + counts, counts)
        s = order[starts + np.arange(counts.sum())]
        return q.astype(np.int64), s.astype(np.int64)

    def _lookup(self, batch_id, keys_of, query_keys, payload_of, valid_of=None) -> Matches:
        parts = []
        for b, fp in self._earlier(batch_id):
            stored = keys_of(fp)
            valid = np.ones(len(fp), bool) if valid_of is None else valid_of(fp)
            idx = np.flatnonzero(valid)
            q, s = self._join(query_keys, stored[idx])
            s = idx[s]
            parts.append(
                Matches(q, fp.doc_id[s], np.full(len(s), b, dtype=object), {k: v[s] for k, v in payload_of(fp).items()})
            )
        return _concat_matches(parts, tuple(parts[0].payload)) if parts else Matches.empty()

    def lookup_urls(self, batch_id: str, url_keys: np.ndarray) -> Matches:
        return self._lookup(
            batch_id, lambda fp: fp.url_key, url_keys, lambda fp: {"content_hash": fp.content_hash}, lambda fp: fp.has_url
        )

    def lookup_content(self, batch_id: str, content_hash: np.ndarray) -> Matches:
        from dedup_tasks.fingerprint.content_hash import hash128_key

        return self._lookup(
            batch_id, lambda fp: hash128_key(fp.content_hash), hash128_key(content_hash), lambda fp: {}, Fingerprints.content_mask
        )

    def simhash_candidates(self, batch_id: str, simhash: np.ndarray) -> Matches:
        parts = []
        for band in range(4):
            shift = np.uint64(16 * band)
            q_band = (simhash >> shift) & np.uint64(0xFFFF)
            parts.append(
                self._lookup(
                    batch_id,
                    lambda fp, s=shift: ((fp.simhash >> s) & np.uint64(0xFFFF)) | (np.uint64(1) << np.uint64(63)),
                    q_band | (np.uint64(1) << np.uint64(63)),
                    lambda fp: {"simhash": fp.simhash},
                    lambda fp: fp.has_simhash,
                )
            )
        return _dedupe_matches(_concat_matches([p for p in parts if len(p)], ("simhash",)))

    def minhash_candidates(self, batch_id: str, band_keys: np.ndarray, *, main_min_bands: int = 1) -> Matches:
        parts = []
        for band in range(band_keys.shape[1] if band_keys.ndim == 2 else 0):
            parts.append(
                self._lookup(
                    batch_id,
                    lambda fp, j=band: fp.minhash_bands[:, j],
                    band_keys[:, band],
                    lambda fp: {"minhash": fp.minhash, "minhash_bits": np.full(len(fp), fp.minhash_bits, np.uint8)},
                    lambda fp: fp.has_minhash,
                )
            )
        found = _concat_matches([p for p in parts if len(p)], ("minhash", "minhash_bits"))
        if main_min_bands > 1 and self._main and len(found):
            found = _agreeing(found, np.isin(found.batch_id, list(self._main)), main_min_bands)
        return _dedupe_matches(found)

    def commit(self, batch_id: str, kept: Fingerprints) -> CommitResult:
        from dedup_tasks.fingerprint.minhash import truncate_signatures

        # Hold exactly what PostgresRegistry stores: b-bit rows keep only the low bits of each value.
        if kept.minhash_bits < 32:
            kept = dataclasses.replace(kept, minhash=truncate_signatures(kept.minhash, kept.minhash_bits))
        self._batches[batch_id] = kept
        return CommitResult(registered=len(kept), conflicts=Matches.empty())


def _agreeing(m: Matches, main: np.ndarray, min_bands: int) -> Matches:
    """Drop the rows of ``main`` (bool per row) whose (query, batch, document) occurs in fewer than
    ``min_bands`` rows (one row per agreeing band)."""
    import pandas as pd

    frame = pd.DataFrame({"q": m.query, "b": m.batch_id, "d": m.doc_id})
    bands = frame.groupby(["q", "b", "d"], sort=False)["q"].transform("size").to_numpy()
    keep = np.flatnonzero(~main | (bands >= min_bands))
    return Matches(m.query[keep], m.doc_id[keep], m.batch_id[keep], {k: v[keep] for k, v in m.payload.items()})


def _dedupe_matches(m: Matches) -> Matches:
    """Keep one row per (query, doc_id, batch_id): a candidate found through several bands counts once."""
    if len(m) == 0:
        return m
    import pandas as pd

    first = np.flatnonzero(~pd.DataFrame({"q": m.query, "b": m.batch_id, "d": m.doc_id}).duplicated().to_numpy())
    return Matches(m.query[first], m.doc_id[first], m.batch_id[first], {k: v[first] for k, v in m.payload.items()})
