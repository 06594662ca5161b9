"""The registry's index signature: MinHash over a document's shingles minus the language's most common ones.

Two unrelated English articles share the language's common character 5-grams ("ofthe", "ation",
"inthe"), so now and then a whole LSH band of their signatures agrees: a *chance* candidate. Their
number per lookup grows linearly with the registry (~2e-4 per registered English document on 24
bands; docs/registry-scale.md, "Chance agreements"), which no hourly lookup against billions of
documents can carry. The registry's band keys therefore come from an *index signature*: the same
permutations as the product's signature, taken over the shingles that are not in a frozen stoplist of
common 5-grams. The verifier and the stored signature keep the product's whole set.

Taking the minima with the *same* permutations means a document none of whose shingles is on the
stoplist (nearly every Chinese one) gets exactly the product signature's values, so its band keys do not
change. A document whose every shingle is on the stoplist keeps its whole set (it must still have keys).

The stoplist is part of the registry's key space: registering with one and looking up with another finds
nothing, so its name is recorded in the registry (``band_key_space`` in registry_meta) and checked.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit, prange

import dedup_tasks.kernel_cache  # noqa: F401  (keys the numba cache on every kernel file)
from dedup_tasks.config import ConfigError
from dedup_tasks.fingerprint import kernels
from dedup_tasks.fingerprint.minhash import MinHasher

STOPLIST_DIR = Path(__file__).resolve().parent / "stoplists"
# The built-in English stoplist (STOPLIST_DIR/<name>.u32: sorted little-endian uint32 shingle hashes).
DEFAULT_STOPLIST = "en-5gram-sotu-df2pct-v1"


@dataclass(frozen=True)
class Stoplist:
    """A set of 32-bit shingle hashes (``kernels.shingle_hashes``), with a table for one-probe membership."""

    name: str
    hashes: np.ndarray  # sorted unique uint32
    # The members in an open-addressing table (kernels.hash_slot): keys, and a slot's index (-1: empty).
    table_keys: np.ndarray  # uint64
    table_slots: np.ndarray  # int64
    # One bit per value of a hash's top 16 bits, set where a member has them: 8 kB that stay in L1, so
    # most shingles that are not members never touch the table (~15% of the bits are set at 10k members).
    bitmap: np.ndarray  # uint64[1024]

    @classmethod
    def of(cls, name: str, hashes: np.ndarray) -> Stoplist:
        values = np.unique(np.asarray(hashes, np.uint32))
        table_keys = np.zeros(kernels.hash_table_size(max(len(values), 1)), np.uint64)
        table_slots = np.full(len(table_keys), -1, np.int64)
        _fill(values, table_keys, table_slots)
        bitmap = np.zeros(1024, np.uint64)
        top = (values >> np.uint32(16)).astype(np.int64)
        np.bitwise_or.at(bitmap, top >> 6, np.left_shift(np.uint64(1), (top & 63).astype(np.uint64)))
        return cls(name, values, table_keys, table_slots, bitmap)

    def __len__(self) -> int:
        return len(self.hashes)

    @property
    def key_space(self) -> str:
        """What a registry keyed with this stoplist records: its name and a digest of its hashes."""
        return f"stoplist:{self.name}#{hashlib.sha256(self.hashes.astype('<u4').tobytes()).hexdigest()[:12]}"

    def contains(self, hashes32: np.ndarray) -> np.ndarray:
        """Bool per hash: on the stoplist."""
        out = np.empty(len(hashes32), np.bool_)
        _members(np.ascontiguousarray(hashes32, np.uint32), self.table_keys, self.table_slots, self.bitmap, out)
        return out

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        self.hashes.astype("<u4").tofile(tmp)
        tmp.replace(path)


def load_stoplist(name_or_path: str) -> Stoplist:
    """A built-in stoplist by name (``STOPLIST_DIR``), or a file of sorted little-endian uint32 hashes
    (``python -m dedup_tasks stoplist learn`` writes one); named after the file's stem."""
    return _load(str(name_or_path))


def stoplist_file(name_or_path: str) -> Path:
    """The file a stoplist name or path stands for; FileNotFoundError naming the built-in ones."""
    path = Path(name_or_path)
    if not path.suffix:
        path = STOPLIST_DIR / f"{name_or_path}.u32"
    if not path.is_file():
        known = sorted(p.stem for p in STOPLIST_DIR.glob("*.u32"))
        raise FileNotFoundError(f"stoplist {name_or_path!r}: no file {path} (built-in stoplists: {known})")
    return path


@functools.lru_cache(maxsize=4)
def _load(name_or_path: str) -> Stoplist:
    path = stoplist_file(name_or_path)
    raw = path.read_bytes()
    if len(raw) % 4:
        raise ValueError(f"stoplist {path}: {len(raw)} bytes is not a whole number of uint32 hashes")
    return Stoplist.of(path.stem, np.frombuffer(raw, "<u4"))


SIGNATURE_KEY_SPACE = "signature"  # band keys of the plain signature (no stoplist; registries before the index signature)
# minhash_registry_stoplist="auto": the registry's own stoplist. A new registry learns it from the English
# pages of its first batch (``propose_stoplist``) and keeps it (``Registry.band_key_stoplist``); an
# existing one goes on with whatever it was keyed on.
AUTO_STOPLIST = "auto"
LEARN_CUTOFF = 0.02  # document frequency above which a shingle is stopped (the built-in one's)
# A first batch with fewer English pages than this keys a new registry on the built-in stoplist: a demo
# hour or a test batch of a few hundred pages gives document frequencies too coarse to trust.
LEARN_MIN_DOCS = 2_000
LEARN_MAX_DOCS = 20_000  # English pages a registry learns from at most (~0.5 CPU-s per 10,000)


def configured_stoplist(setting: str) -> Stoplist | None:
    """The stoplist ``minhash_registry_stoplist`` names (None for "": keys of the plain signature); a
    ConfigError naming the setting where it cannot be loaded."""
    if not setting:
        return None
    try:
        return load_stoplist(setting)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"minhash_registry_stoplist: {exc}") from exc


def check_stoplist_setting(setting: str) -> None:
    """A ConfigError naming the setting where ``minhash_registry_stoplist`` names no file, without
    loading it (a run whose registry keys on the plain signature does not need it)."""
    if setting and setting != AUTO_STOPLIST:
        try:
            stoplist_file(setting)
        except OSError as exc:
            raise ConfigError(f"minhash_registry_stoplist: {exc}") from exc


def band_key_space(setting: str) -> str:
    """The registry key space of ``minhash_registry_stoplist`` ("": the plain signature's; "auto":
    whatever the registry records)."""
    if setting == AUTO_STOPLIST:
        return AUTO_STOPLIST
    stoplist = configured_stoplist(setting)
    return SIGNATURE_KEY_SPACE if stoplist is None else stoplist.key_space


def learned_name(batch_id: str) -> str:
    """The name of a stoplist a registry learned from batch ``batch_id`` (file-name safe)."""
    return "learned-" + re.sub(r"[^A-Za-z0-9_.-]", "_", batch_id)


def propose_stoplist(
    name: str, hashes32: np.ndarray, offsets: np.ndarray, english: np.ndarray, min_docs: int | None = None
) -> Stoplist:
    """What a new registry under ``minhash_registry_stoplist="auto"`` is keyed on: the stoplist of
    these English documents' shingles (at most ``LEARN_MAX_DOCS`` of them, evenly spread) when there
    are at least ``min_docs``, else the built-in one (a few hundred pages give document frequencies
    too coarse to trust). ``min_docs`` defaults to ``LEARN_MIN_DOCS``."""
    min_docs = LEARN_MIN_DOCS if min_docs is None else min_docs
    english = np.asarray(english, bool)
    if min_docs <= 0 or int(english.sum()) < min_docs:
        return load_stoplist(DEFAULT_STOPLIST)
    rows = np.flatnonzero(english)
    if len(rows) > LEARN_MAX_DOCS:
        # Evenly spread over the batch: a first hour of a million pages learns from 20,000 of them.
        english = np.zeros_like(english)
        english[rows[np.linspace(0, len(rows) - 1, LEARN_MAX_DOCS).astype(np.int64)]] = True
    return learn_stoplist(name, hashes32, offsets, english, LEARN_CUTOFF)


def stoplist_from_record(key_space: str, hashes: np.ndarray | None) -> Stoplist | None:
    """The stoplist a registry's recorded key space stands for (None: the plain signature): a built-in
    by name, else the hashes recorded beside it; ValueError when they do not match the record."""
    if key_space == SIGNATURE_KEY_SPACE:
        return None
    name = key_space.split(":", 1)[1].split("#", 1)[0]
    built_in = _built_in(name)
    if built_in is not None and built_in.key_space == key_space:
        return built_in
    if hashes is None:
        raise ValueError(
            f"the registry is keyed on {key_space!r}, whose hashes it does not hold: set"
            f" minhash_registry_stoplist to the file it was keyed with ({name}.u32)"
        )
    stoplist = Stoplist.of(name, hashes)
    if stoplist.key_space != key_space:
        raise ValueError(f"the registry's recorded stoplist hashes do not match its key space {key_space!r}")
    return stoplist


def _built_in(name: str) -> Stoplist | None:
    """The built-in stoplist of this name (None: there is none)."""
    return load_stoplist(name) if (STOPLIST_DIR / f"{name}.u32").is_file() else None


def is_built_in(stoplist: Stoplist) -> bool:
    built_in = _built_in(stoplist.name)
    return built_in is not None and built_in.key_space == stoplist.key_space


def stoplist_setting(stoplist: Stoplist | None, directory: Path) -> str:
    """A ``minhash_registry_stoplist`` value naming ``stoplist`` for code that reads the setting (the
    Spark executors): "" for none, a built-in's name, else a file ``directory/<name>.u32`` written for
    it (tmp, then rename; a file already there with other hashes is an error)."""
    if stoplist is None:
        return ""
    if is_built_in(stoplist):
        return stoplist.name
    path = Path(directory) / f"{stoplist.name}.u32"
    if path.is_file():
        if load_stoplist(str(path)).key_space != stoplist.key_space:
            raise ValueError(f"{path} holds another stoplist than the registry's {stoplist.key_space!r}")
        return str(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stoplist.save(path)
    return str(path)


def learn_stoplist(name: str, hashes32: np.ndarray, offsets: np.ndarray, rows: np.ndarray, cutoff: float) -> Stoplist:
    """The shingles found in more than ``cutoff`` of the documents ``rows`` (bool per document) of these
    sets (``hashes32`` grouped by ``offsets``; repeats within a document count once)."""
    offsets = np.asarray(offsets, np.int64)
    picked = np.flatnonzero(np.asarray(rows, bool))
    sizes = offsets[picked + 1] - offsets[picked]
    out_offsets = np.zeros(len(picked) + 1, np.int64)
    np.cumsum(sizes, out=out_offsets[1:])
    # Each picked document's distinct hashes (a numba pass, sorting one document at a time), then one
    # radix sort of the 32-bit values: runs are document frequencies. A sort of (document, hash) pairs
    # as 64-bit values took 9 CPU-s on 10,000 English pages; this takes a tenth of that.
    distinct = np.empty(int(out_offsets[-1]), np.uint32)
    kept = _distinct_per_document(np.ascontiguousarray(hashes32, np.uint32), offsets, picked, out_offsets, distinct)
    first = np.repeat(out_offsets[:-1] - (np.cumsum(kept) - kept), kept)
    values = np.sort(distinct[first + np.arange(int(kept.sum()))], kind="stable")
    if not len(values):
        return Stoplist.of(name, values)
    starts = np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))
    df = np.diff(np.append(starts, len(values)))
    return Stoplist.of(name, values[starts][df > cutoff * len(picked)])


@njit(parallel=True, nogil=True, cache=True)
def _distinct_per_document(hashes32, offsets, picked, out_offsets, out):
    """Per picked document: its distinct hashes, sorted, at out[out_offsets[i]:]; returns their counts."""
    kept = np.zeros(len(picked), np.int64)
    for i in prange(len(picked)):
        d = picked[i]
        part = np.sort(hashes32[offsets[d] : offsets[d + 1]])
        at = out_offsets[i]
        k = 0
        for j in range(len(part)):
            if j == 0 or part[j] != part[j - 1]:
                out[at + k] = part[j]
                k += 1
        kept[i] = k
    return kept


def index_signatures(
    sig: np.ndarray, hashes32: np.ndarray, offsets: np.ndarray, perm_a: np.ndarray, perm_b: np.ndarray, stoplist: Stoplist
) -> np.ndarray:
    """(n, len(perm_a)) uint32: the MinHash of each set without its stoplisted shingles.

    ``sig`` is the product signature of the same sets (its first len(perm_a) values, same permutations):
    rows with no stoplisted shingle, or only stoplisted ones, take it unchanged."""
    width = len(perm_a)
    out = np.ascontiguousarray(sig[:, :width], np.uint32).copy()
    _index_minhash(
        np.ascontiguousarray(hashes32, np.uint32), np.asarray(offsets, np.int64), np.asarray(perm_a, np.uint32),
        np.asarray(perm_b, np.uint32), stoplist.table_keys, stoplist.table_slots, stoplist.bitmap, out,
    )  # fmt: skip
    return out


@njit(cache=True)
def _fill(values, table_keys, table_slots):
    for i in range(len(values)):
        s = kernels.hash_slot(table_keys, table_slots, np.uint64(values[i]))
        table_keys[s] = values[i]
        table_slots[s] = i


@njit(inline="always", cache=True)
def _member(h, table_keys, table_slots, bitmap):
    top = np.int64(h >> np.uint32(16))
    if (bitmap[top >> 6] >> np.uint64(top & 63)) & np.uint64(1) == np.uint64(0):
        return False
    return table_slots[kernels.hash_slot(table_keys, table_slots, np.uint64(h))] >= 0


@njit(parallel=True, nogil=True, cache=True)
def _members(hashes32, table_keys, table_slots, bitmap, out):
    for i in prange(len(hashes32)):
        out[i] = _member(hashes32[i], table_keys, table_slots, bitmap)


@njit(parallel=True, nogil=True, cache=True)
def _index_minhash(hashes32, offsets, perm_a, perm_b, table_keys, table_slots, bitmap, out):
    for d in prange(len(offsets) - 1):
        s, end = offsets[d], offsets[d + 1]
        kept = np.empty(end - s, np.uint32)
        n = 0
        for i in range(s, end):
            h = hashes32[i]
            if not _member(h, table_keys, table_slots, bitmap):
                kept[n] = h
                n += 1
        if n == 0 or n == end - s:
            continue  # the product signature's values, already in `out`
        row = out[d]
        row[:] = np.uint32(0xFFFFFFFF)
        kernels.minhash_row(row, kept, 0, n, perm_a, perm_b)


def registry_band_keys(
    sig: np.ndarray, sets: tuple[np.ndarray, np.ndarray], hasher: MinHasher, bands: int, stoplist: Stoplist | None
) -> np.ndarray:
    """(n, bands) uint64: the registry's LSH band keys of the documents whose product signatures are
    ``sig`` and shingle sets ``sets`` (hashes, offsets): the first ``bands`` band keys of the index
    signature (``index_signatures``), or of ``sig`` itself without a stoplist."""
    width = bands * hasher.rows
    if stoplist is None:
        index = np.ascontiguousarray(sig[:, :width])
    else:
        a, b = hasher.permutations
        index = index_signatures(sig, sets[0], sets[1], a[:width], b[:width], stoplist)
    return kernels.band_keys(index, bands, hasher.rows)
