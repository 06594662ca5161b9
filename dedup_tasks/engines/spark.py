"""The cascade on Apache Spark: an archive of many hours in one job, or one hour too large for one worker.

Where the work happens:

* **Executors** (``mapInArrow``, any number of partitions) run the single-node kernels row by row:
  pass 1 of ``pipeline.prepare`` (folding, content hashes, URL keys, the content lines of each
  document), then, once the batch-wide template lines are known, pass 2 (the near-duplicate view,
  language) and the SimHash and MinHash fingerprints (``layers.simhash.simhash_rows``,
  ``layers.minhash.minhash_rows``). Nothing is re-implemented: the executors import the same
  functions.
* **Spark SQL** counts template lines per (batch, site, line) (``normalize.text.template_lines``'s
  rule: a line in >= BOILERPLATE_MIN_DOCS documents of one site).
* **Executors, candidate pairs** (``candidate_pairs``): each document's band keys (MinHash's
  ``MinHasher.band_keys``; the four 16-bit SimHash bands) exploded and self-joined on
  (batch, kind, band, key) into (newer, earlier) pairs in batch order, each pair once with its first
  shared MinHash band (SimHash pairs beyond the layer's distance dropped in the join); screened in
  the JVM on the signatures (MinHash's estimate) to the pairs either layer can act on; then both
  documents' shingle sets joined on doc_id and the pair verified with ``candidates.verify_pairs``
  (L3's verifier, the passage rule included).
* **The driver** runs the layers themselves, batch by batch, oldest first: the URL and exact
  layers, the registry lookups, the SimHash layer unchanged (its search over the executors'
  SimHashes; its hits' verification read from the executors' verdicts through its
  ``verify_matches`` hook) and the MinHash layer unchanged but for its ``in_batch`` hook, which
  resolves the executors' verified pairs in batch order with the stream's rule
  (``engines.pairs.resolve_pairs``: the earlier *kept* document wins); rows held to a plain Jaccard
  (URL updates, short texts; they depend on L1's outcome) get the verifier's verdict for that here.
  Then L4 semantic over the survivors, the commit into the same registry, and the decisions. So an
  archive gives the same decisions as running its hours one by one, and each hour the same as the
  single-node engine (tests/engines/test_spark.py). The driver holds per document its keys,
  SimHash and signature, and the near-duplicate text only when L4 runs; never a shingle set (the
  few rows with a registry MinHash hit read theirs back from the executors' rows) nor the input
  columns: the deduplicated rows are written by Spark (a semi-join of the input with the kept doc_ids).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import dedup_tasks
from dedup_tasks.config import DedupConfig
from dedup_tasks.contract import NEAR_MISS_JACCARD_MIN, ContractError, check_rows, conform_schema, repair_text
from dedup_tasks.fingerprint.candidates import (
    SHORT,
    ShortTexts,
    facts_veto,
    leadin_items_differ,
    verify_pairs,
)
from dedup_tasks.fingerprint.hashing import codepoints
from dedup_tasks.fingerprint.minhash import (
    EN_CHAR_SHINGLES,
    EN_SHINGLE_WORDS,
    MINHASH_SEED,
    SHINGLE_CHARS,
    MinHasher,
    earlier_covered,
)
from dedup_tasks.fingerprint.stoplist import (
    AUTO_STOPLIST,
    DEFAULT_STOPLIST,
    configured_stoplist,
    learned_name,
    load_stoplist,
    registry_band_keys,
    stoplist_setting,
)
from dedup_tasks.io import (
    BatchPaths,
    InputError,
    input_files,
    replace_dir,
    write_json,
    write_parquet_dir,
    write_template_lines,
)
from dedup_tasks.layers import LayerContext, LayerStats
from dedup_tasks.layers.base import REASON, add_reason
from dedup_tasks.layers.minhash import (
    VERIFY_FLOOR,
    MinHashLayer,
    minhash_rows,
    verifier_of,
)
from dedup_tasks.layers.near import (
    LEADIN,
    NEAR_LEN,
    SHORT_TEXT,
    leadin_column,
    leadins_of,
    number_sets,
    passage_runs,
    short_text_rows,
)
from dedup_tasks.layers.simhash import SIMHASH_WORD_NGRAM, SIMHASH_ZH_FEATURES, SimHashLayer, simhash_rows
from dedup_tasks.normalize.text import site_codes_of
from dedup_tasks.pipeline import (
    LONG_REASON,
    MAX_NEAR_CHARS,
    REPAIRED_REASON,
    BatchResult,
    BatchSummary,
    _chunks,
    _pass_one,
    _pass_two_by_chunk,
    finish_batch,
    run_layers,
)
from dedup_tasks.registry.base import Registry

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ENGINE_COLUMNS = ("_spark_simhash", "_spark_minhash", "_spark_shingles", "_spark_registry_bands", "_near_len")
# What the driver reads of the executors' rows: everything but the shingle sets, which stay on disk
# (read back only for the few rows with a registry MinHash hit).
_DRIVER_COLUMNS = (
    "doc_id", "fetched_us", "url_key", "url_valid", "url_reason", "ch_hi", "ch_lo", "repaired", "near_text", "lang",
    "near_len", "too_long", "simhash", "sig", "shingles", "reg_bands", "short_text", "host",
)  # fmt: skip

# Spark has no unsigned integers: 64-bit keys and hashes travel as the int64 with the same bits.
_ROWS_SCHEMA = (
    "batch_id string, doc_id string, fetched_us long, url_key long, url_valid boolean, url_reason string,"
    " ch_hi long, ch_lo long, repaired boolean, host string, lines array<long>"
)
_BANDS_SCHEMA = (
    "batch_id string, doc_id string, fetched_us long, ch_hi long, ch_lo long, simhash long, kind byte, band short, key long"
)
_VERDICTS_SCHEMA = (
    "batch_id string, newer string, earlier string, mh_band short, est double, dist int,"
    " ok boolean, jaccard double, covers_newer double, covers_earlier double"
)
_VERDICTS_ARROW = pa.schema(
    [("newer", pa.string()), ("earlier", pa.string()), ("mh_band", pa.int16()), ("est", pa.float64()), ("dist", pa.int32()),
     ("ok", pa.bool_()), ("jaccard", pa.float64()), ("covers_newer", pa.float64()), ("covers_earlier", pa.float64())]
)  # fmt: skip
SIMHASH_KIND, MINHASH_KIND = 0, 1
_FP_SCHEMA = (
    "batch_id string, doc_id string, near_text string, lang string, near_len long, too_long boolean,"
    " simhash long, sig binary, sig_words array<int>, shingles long, sets binary, reg_bands binary, short_text string"
)


def _signed(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, np.uint64).view(np.int64)


def _unsigned(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(column.to_numpy(zero_copy_only=False), np.int64).view(np.uint64)


def spark_session(master: str | None = None, app_name: str = "crawl-dedup", conf: dict[str, str] | None = None) -> SparkSession:
    """A SparkSession for the cascade: ``master`` (default env SPARK_MASTER, else local[*]) with UTC
    time, Arrow batches and no UI. Python workers import this checkout of dedup_tasks."""
    from pyspark.sql import SparkSession

    master = master or os.environ.get("SPARK_MASTER", "local[*]")
    _choose_worker_python(master, conf or {})
    here = str(Path(dedup_tasks.__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "5000")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.executorEnv.PYTHONPATH", path)
        .config("spark.sql.adaptive.enabled", "true")
    )
    if os.environ.get("SPARK_DRIVER_HOST"):
        # In a container the executors reach the driver by its service name, not the container id.
        builder = builder.config("spark.driver.host", os.environ["SPARK_DRIVER_HOST"])
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _choose_worker_python(master: str, conf: dict[str, str]) -> None:
    """The interpreter Spark's Python workers run: the user's ``spark.pyspark.python`` or
    ``PYSPARK_PYTHON`` if set, else in local mode this interpreter. PySpark reads only the
    environment variable in a driver started from Python, and without either it runs ``python3``
    from PATH, which under an Airflow worker, cron or a Makefile naming the venv's interpreter is
    another Python with none of the requirements. On a cluster the executors' interpreter is
    the cluster's to choose (docs/spark.md), so it is left alone there."""
    chosen = conf.get("spark.pyspark.python") or os.environ.get("PYSPARK_PYTHON")
    if chosen is None and master.startswith("local"):
        chosen = sys.executable
    if chosen:
        os.environ["PYSPARK_PYTHON"] = chosen


# ---- executors ----------------------------------------------------------------------------------


def _conformed(rb: pa.RecordBatch) -> tuple[pa.Table, np.ndarray]:
    table = pa.Table.from_batches([rb])
    source = f"batch {table.column('batch_id')[0].as_py() if table.num_rows else '?'}"
    table, repaired = repair_text(conform_schema(table, source), source)
    return table, repaired


def _rows_pass(config: DedupConfig) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Pass 1 of ``prepare`` per row: URL keys, content hashes, and each document's distinct content lines."""
    from dedup_tasks.normalize.url import url_keys

    tracking = config.tracking_params

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            table, repaired = _conformed(rb)
            n = table.num_rows
            if n == 0:
                continue
            keys = url_keys(table.column("url"), tracking_params=tracking)
            hashes, line_doc, line_hash, _ = _pass_one(table, list(_chunks(n)), None)
            # A line counts once per document (template_lines counts distinct documents).
            order = np.lexsort((line_hash, line_doc))
            doc, h = line_doc[order], line_hash[order]
            first = np.ones(len(doc), bool)
            first[1:] = (doc[1:] != doc[:-1]) | (h[1:] != h[:-1])
            doc, h = doc[first], h[first]
            offsets = np.searchsorted(doc, np.arange(n + 1)).astype(np.int32)
            lines = pa.ListArray.from_arrays(pa.array(offsets), pa.array(_signed(h), pa.int64()))
            fetched = table.column("fetched_at").cast(pa.int64())
            yield pa.RecordBatch.from_pydict(
                {
                    "batch_id": table.column("batch_id").cast(pa.string()).combine_chunks(),
                    "doc_id": table.column("doc_id").cast(pa.string()).combine_chunks(),
                    "fetched_us": fetched.combine_chunks(),
                    "url_key": pa.array(_signed(keys.key), pa.int64()),
                    "url_valid": pa.array(keys.valid, pa.bool_()),
                    "url_reason": pa.array(keys.reason, pa.string()),
                    "ch_hi": pa.array(_signed(hashes[:, 0]), pa.int64()),
                    "ch_lo": pa.array(_signed(hashes[:, 1]), pa.int64()),
                    "repaired": pa.array(repaired, pa.bool_()),
                    "host": pa.array(np.where(keys.valid, keys.host, "").astype(object), pa.string()),
                    "lines": lines,
                }
            )

    return run


def _fingerprint_pass(
    config: DedupConfig, templates: dict[str, np.ndarray], stoplist: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Pass 2 of ``prepare`` with each batch's template lines, then the SimHash and MinHash kernels."""
    hasher = MinHasher(config.minhash_num_perm, MINHASH_SEED, config.minhash_bands, config.minhash_rows)
    none = np.empty(0, np.uint64)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            whole, _ = _conformed(rb)
            ids = whole.column("batch_id").cast(pa.string())
            for batch_id in pc.unique(ids).to_pylist():
                table = whole.filter(pc.equal(ids, batch_id)) if len(templates) > 1 else whole
                yield _fingerprints(table, templates.get(batch_id, none), config, hasher, stoplist)

    return run


def _fingerprints(table: pa.Table, templates: np.ndarray, config: DedupConfig, hasher: MinHasher, stoplist: str) -> pa.RecordBatch:
    n = table.num_rows
    given = table.column("lang") if "lang" in table.column_names else None
    parts, lengths, too_long, lang = _pass_two_by_chunk(table, list(_chunks(n)), templates, given)
    near = pa.chunked_array(parts, pa.string()) if parts else pa.chunked_array([], pa.string())
    view = pa.table({"doc_id": table.column("doc_id"), "_near_text": near, "_lang": pa.array(lang, pa.string())})
    sims = simhash_rows(view, SIMHASH_ZH_FEATURES, SIMHASH_WORD_NGRAM)
    sig, counts, (sets, set_offsets) = minhash_rows(
        view, hasher, SHINGLE_CHARS, EN_SHINGLE_WORDS, None, EN_CHAR_SHINGLES
    )
    sig_bytes = _packed_rows(sig, np.arange(n + 1) * sig.shape[1])
    set_bytes = _packed_rows(np.asarray(sets, np.uint32), set_offsets)
    # The registry's band keys need the shingle sets, which stay here: L3's own function, on the executor.
    reg = registry_band_keys(sig, (sets, set_offsets), hasher, config.registry_bands, configured_stoplist(stoplist))
    reg_bytes = _packed_rows(reg, np.arange(n + 1) * reg.shape[1])
    return pa.RecordBatch.from_pydict(
        {
            "batch_id": table.column("batch_id").cast(pa.string()).combine_chunks(),
            "doc_id": table.column("doc_id").cast(pa.string()).combine_chunks(),
            "near_text": near.combine_chunks(),
            "lang": pa.array(lang, pa.string()),
            "near_len": pa.array(np.asarray(lengths, np.int64)),
            "too_long": pa.array(np.asarray(too_long, bool)),
            "simhash": pa.array(_signed(sims), pa.int64()),
            "sig": sig_bytes,
            # The same values as Spark SQL sees them (the same bits), for the candidate screen in the JVM.
            "sig_words": pa.ListArray.from_arrays(
                pa.array(np.arange(n + 1, dtype=np.int32) * hasher.num_perm),
                pa.array(np.ascontiguousarray(sig, np.uint32).ravel().view(np.int32)),
            ),
            "shingles": pa.array(np.asarray(counts, np.int64)),
            "sets": set_bytes,
            "reg_bands": reg_bytes,
            # The short-text rule reads characters: the view of the rows it may read, for both sides of a pair.
            "short_text": pc.if_else(pa.array(short_text_rows(np.asarray(lengths, np.int64), config)), near.combine_chunks(), None),
        }
    )


def _codepoint_rows(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The code points of each row of a string column (null: none) and their offsets."""
    cp, offsets = codepoints(pc.fill_null(column, ""))
    return np.ascontiguousarray(cp, np.int32), np.asarray(offsets, np.int64)


def _packed_rows(values: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """A binary column whose row i packs ``values`` (any fixed-width dtype, flattened) from offsets[i] to offsets[i + 1]."""
    flat = np.ascontiguousarray(values).ravel()
    starts = (np.asarray(offsets, np.int64) * flat.itemsize).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), len(starts) - 1, [None, pa.py_buffer(starts), pa.py_buffer(flat.tobytes())])


def _uint32_rows(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(values, offsets in values) of a binary column of packed uint32."""
    wide = pa.types.is_large_binary(column.type)
    kind = np.int64 if wide else np.int32
    offsets = np.frombuffer(column.buffers()[1], kind, len(column) + 1, column.offset * np.dtype(kind).itemsize).astype(np.int64)
    data = column.buffers()[2]
    values = np.frombuffer(data, np.uint32, (offsets[-1] - offsets[0]) // 4, offsets[0]) if data is not None and offsets[-1] > offsets[0] else np.empty(0, np.uint32)
    return values, (offsets - offsets[0]) // 4


# ---- executors: candidate pairs and their verification ----------------------------------------


def _band_pass(config: DedupConfig) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """One row per (document, band): MinHash's LSH band keys (``MinHasher.band_keys``) of documents
    with shingles, and the four 16-bit SimHash bands ``stream_simhash`` indexes of documents long
    enough for SimHash (a pair within Hamming distance 3 shares one of them)."""
    hasher = MinHasher(config.minhash_num_perm, MINHASH_SEED, config.minhash_bands, config.minhash_rows)
    simhash_on = config.layer_enabled("simhash")
    minhash_on = config.layer_enabled("minhash")

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            n = rb.num_rows
            if n == 0:
                continue
            parts: list[tuple[np.ndarray, int, np.ndarray, np.ndarray]] = []  # (rows, kind, bands, keys)
            if minhash_on:
                sig, _ = _uint32_rows(rb.column("sig"))
                has = np.flatnonzero(rb.column("shingles").to_numpy() > 0)
                keys = hasher.band_keys(sig.reshape(n, hasher.num_perm)[has])
                parts.append((np.repeat(has, hasher.bands), MINHASH_KIND, np.tile(np.arange(hasher.bands), len(has)), keys.ravel()))
            if simhash_on:
                reliable = np.flatnonzero(rb.column("near_len").to_numpy() >= config.simhash_min_chars)
                sims = _unsigned(rb.column("simhash"))[reliable]
                shifts = np.arange(4, dtype=np.uint64) * np.uint64(16)
                keys = (sims[:, None] >> shifts) & np.uint64(0xFFFF)
                parts.append((np.repeat(reliable, 4), SIMHASH_KIND, np.tile(np.arange(4), len(reliable)), keys.ravel()))
            for rows, kind, bands, keys in parts:
                if not len(rows):
                    continue
                take = pa.array(rows)
                yield pa.RecordBatch.from_pydict(
                    {
                        **{c: rb.column(c).take(take) for c in ("batch_id", "doc_id", "fetched_us", "ch_hi", "ch_lo", "simhash")},
                        "kind": pa.array(np.full(len(rows), kind, np.int8)),
                        "band": pa.array(bands.astype(np.int16)),
                        "key": pa.array(_signed(keys), pa.int64()),
                    }
                )

    return run


def _verify_pass(config: DedupConfig) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``verify_pairs`` (L3's verifier, the passage rule included, with the newer row's passage run
    length from its language and length, ``near.passage_runs``) on both documents' shingle sets.
    A short text (by its length, known here) is held to the short rules here; a URL update's plain
    Jaccard depends on L1's outcome, so it is applied on the driver from the scores here."""
    verifier = verifier_of(config)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            n = rb.num_rows
            if n == 0:
                continue
            est = rb.column("est").to_numpy()
            needed = (rb.column("mh_band").is_valid().to_numpy(zero_copy_only=False) & (est >= VERIFY_FLOOR)) | rb.column(
                "dist"
            ).is_valid().to_numpy(zero_copy_only=False)
            rows = np.flatnonzero(needed)
            ok = np.zeros(n, bool)
            scores = [np.full(n, np.nan) for _ in range(3)]
            if len(rows):
                take = pa.array(rows)
                a, a_off = _uint32_rows(rb.column("sets_n").take(take))
                b, b_off = _uint32_rows(rb.column("sets_e").take(take))
                hashes = np.concatenate([a, b])
                offsets = np.concatenate([a_off, b_off[1:] + a_off[-1]])
                length = rb.column("len_n").take(take).to_numpy()
                texts = ShortTexts(*_codepoint_rows(rb.column("st_n").take(take))).join(
                    ShortTexts(*_codepoint_rows(rb.column("st_e").take(take)))
                )
                runs = passage_runs(rb.column("lang_n").take(take).to_numpy(zero_copy_only=False), length, config)
                # A short text's rules read the shingle sets (what differs), so they are applied here.
                strict = np.where(length < config.simhash_min_chars, SHORT, np.nan)
                got = verify_pairs(
                    hashes, offsets, np.arange(len(rows)), np.arange(len(rows)) + len(rows), verifier, strict, runs=runs,
                    texts=texts,
                )
                ok[rows] = got[0]
                for out, values in zip(scores, got[1:], strict=True):
                    out[rows] = values
            valid = ~needed
            yield pa.RecordBatch.from_pydict(
                {
                    **{c: rb.column(c) for c in ("batch_id", "newer", "earlier", "mh_band", "est", "dist")},
                    "ok": pa.array(ok, mask=valid),
                    "jaccard": pa.array(scores[0], mask=valid),
                    "covers_newer": pa.array(scores[1], mask=valid),
                    "covers_earlier": pa.array(scores[2], mask=valid),
                }
            )

    return run


def candidate_pairs(spark: SparkSession, rows_dir: Path, config: DedupConfig, out: Path) -> None:
    """In-batch candidate pairs by band-key joins, screened and verified on the executors, written
    under ``out/batch_id=*/``: (newer, earlier) doc_ids in batch order with MinHash's first shared
    band and estimate, the SimHash distance, and the verifier's loose verdict and scores."""
    from pyspark.sql import functions as F

    docs = spark.read.parquet(str(rows_dir))
    bands = docs.select("batch_id", "doc_id", "fetched_us", "ch_hi", "ch_lo", "sig", "simhash", "shingles", "near_len").mapInArrow(
        _band_pass(config), _BANDS_SCHEMA
    )
    a, b = bands.alias("a"), bands.alias("b")
    later = (F.col("a.fetched_us") > F.col("b.fetched_us")) | (
        (F.col("a.fetched_us") == F.col("b.fetched_us")) & (F.col("a.doc_id") > F.col("b.doc_id"))
    )
    if config.layer_enabled("exact"):
        # Of documents with one content hash at most one reaches L2/L3 (the exact layer keeps the
        # first of them): their pairs, a cluster's square, are never candidates.
        later = later & ~((F.col("a.ch_hi") == F.col("b.ch_hi")) & (F.col("a.ch_lo") == F.col("b.ch_lo")))
    # A SimHash pair matters only within the layer's distance (its near misses up to
    # NEAR_MISS_HAMMING_MAX are the driver's search, which needs no sets): filtered in the join, the
    # chance collisions of 16-bit bands, quadratic in the batch, never reach a shuffle.
    close = (F.col("a.kind") == MINHASH_KIND) | (
        F.bit_count(F.col("a.simhash").bitwiseXOR(F.col("b.simhash"))) <= config.simhash_max_distance
    )
    joined = a.join(b, [a.batch_id == b.batch_id, a.kind == b.kind, a.band == b.band, a.key == b.key]).where(later & close)
    pairs = joined.groupBy(F.col("a.batch_id").alias("batch_id"), F.col("a.doc_id").alias("newer"), F.col("b.doc_id").alias("earlier")).agg(
        F.min(F.when(F.col("a.kind") == MINHASH_KIND, F.col("a.band"))).alias("mh_band"),
        F.max(F.col("a.kind") == SIMHASH_KIND).alias("sh"),
    )

    def side(columns: dict[str, str], key: str):
        return docs.select(F.col("batch_id"), F.col("doc_id").alias(key), *[F.col(c).alias(alias) for c, alias in columns.items()])

    # The screen runs in the JVM: a pair's estimate is MinHash's, the share of equal signature values
    # (estimated_jaccard: equal counts over num_perm, the same double), its distance SimHash's.
    width = config.minhash_num_perm
    floor = min(VERIFY_FLOOR, NEAR_MISS_JACCARD_MIN, config.minhash_threshold)
    equal = F.aggregate(F.zip_with("sw_n", "sw_e", lambda x, y: F.when(x == y, 1).otherwise(0)), F.lit(0), lambda acc, v: acc + v)
    est = equal / F.lit(width)
    dist = F.bit_count(F.col("sim_n").bitwiseXOR(F.col("sim_e")))
    for_minhash = F.col("mh_band").isNotNull() & (F.col("est") >= floor)
    for_simhash = F.col("sh") & (F.col("dist") <= config.simhash_max_distance)
    screened = (
        pairs.join(side({"sig_words": "sw_n", "simhash": "sim_n"}, "newer"), ["batch_id", "newer"])
        .join(side({"sig_words": "sw_e", "simhash": "sim_e"}, "earlier"), ["batch_id", "earlier"])
        .select("batch_id", "newer", "earlier", "mh_band", "sh", est.cast("double").alias("est"), dist.cast("int").alias("dist"))
        .where(for_minhash | for_simhash)
        .select(
            "batch_id", "newer", "earlier", F.when(for_minhash, F.col("mh_band")).alias("mh_band"), "est",
            F.when(for_simhash, F.col("dist")).alias("dist"),
        )
    )
    verdicts = (
        screened.join(side({"sets": "sets_n", "lang": "lang_n", "near_len": "len_n", "short_text": "st_n"}, "newer"), ["batch_id", "newer"])
        .join(side({"sets": "sets_e", "short_text": "st_e"}, "earlier"), ["batch_id", "earlier"])
        .select("batch_id", "newer", "earlier", "mh_band", "est", "dist", "sets_n", "sets_e", "lang_n", "len_n", "st_n", "st_e")
        .mapInArrow(_verify_pass(config), _VERDICTS_SCHEMA)
    )
    verdicts.write.mode("overwrite").partitionBy("batch_id").parquet(str(out))


# ---- the job ------------------------------------------------------------------------------------


@dataclass
class SparkFingerprints:
    """What the executors computed for a set of batches, collected on the driver."""

    rows_dir: Path  # batch_id=<id>/ per batch, one row per document: keys, fingerprints, shingle set, near-duplicate text
    pairs_dir: Path  # batch_id=<id>/ per batch: the verified in-batch candidate pairs (candidate_pairs)
    seconds: float
    partitions: int
    timings: dict[str, float]  # seconds per Spark phase
    templates: dict[str, np.ndarray]  # each batch's template lines, published beside its kept rows

    def rows(self, batch_id: str, text: bool = True) -> pa.Table:
        """The batch's rows without their shingle sets; without the near-duplicate text unless ``text``
        (L4 reads it; L1-L3 need only its length on the driver)."""
        import pyarrow.parquet as pq

        folder = self.rows_dir / f"batch_id={batch_id}"
        columns = [c for c in _DRIVER_COLUMNS if text or c != "near_text"]
        return pq.read_table(folder, columns=columns) if folder.exists() else pa.table({"doc_id": pa.array([], pa.string())})

    def pairs(self, batch_id: str) -> pa.Table:
        import pyarrow.parquet as pq

        folder = self.pairs_dir / f"batch_id={batch_id}"
        if folder.exists():
            return pq.read_table(folder)
        return _VERDICTS_ARROW.empty_table()

    def sets(self, batch_id: str, doc_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The shingle sets (values, offsets) of ``doc_ids`` of a batch, in that order, read from the
        executors' rows one row group at a time."""
        import pyarrow.dataset as ds

        wanted = pa.array(doc_ids, pa.string())
        found = ds.dataset(self.rows_dir / f"batch_id={batch_id}").to_table(
            columns=["doc_id", "sets"], filter=ds.field("doc_id").isin(wanted)
        )
        at = pc.index_in(wanted, found.column("doc_id")).to_numpy(zero_copy_only=False)
        return _uint32_rows(found.column("sets").combine_chunks().take(pa.array(at.astype(np.int64))))


def read_batches(spark: SparkSession, batches: list[BatchPaths]) -> DataFrame:
    """The input partitions of ``batches`` as one DataFrame with a ``batch_id`` column."""
    from pyspark.sql import functions as F

    frames = []
    for paths in batches:
        files = input_files(paths.input)
        if not files:
            raise InputError(f"batch {paths.batch_id}: no Parquet files under {paths.input}")
        frames.append(spark.read.parquet(*[str(f) for f in files]).withColumn("batch_id", F.lit(paths.batch_id)))
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other, allowMissingColumns=True)
    return frame


def compute(
    spark: SparkSession, batches: list[BatchPaths], config: DedupConfig, work: Path, partitions: int | None = None,
    stoplist: str | None = None,
) -> SparkFingerprints:
    """Run the distributed part of the cascade over ``batches``: prepare and the fingerprints,
    written under ``work``. ``stoplist``: the ``minhash_registry_stoplist`` value the registry keys
    come from (``index_stoplist_setting``; None: the configured one, "auto" taken as the built-in)."""
    if stoplist is None:
        stoplist = DEFAULT_STOPLIST if config.minhash_registry_stoplist == AUTO_STOPLIST else config.minhash_registry_stoplist
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from dedup_tasks.normalize.text import BOILERPLATE_MIN_DOCS

    started = time.perf_counter()
    partitions = partitions or max(2, spark.sparkContext.defaultParallelism * 2)
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    # Shuffled once and kept (spilling to disk): pass 1 and pass 2 both read the text.
    text = read_batches(spark, batches).repartition(partitions).persist(StorageLevel.MEMORY_AND_DISK)
    rows = text.mapInArrow(_rows_pass(config), _ROWS_SCHEMA).persist(StorageLevel.MEMORY_AND_DISK)

    # Template lines per batch (lines of >= BOILERPLATE_MIN_DOCS documents of one site), applied to
    # every site of the batch as on one node.
    timings: dict[str, float] = {}
    mark = time.perf_counter()
    frequent = (
        rows.select("batch_id", "host", F.explode("lines").alias("line"))
        .groupBy("batch_id", "host", "line")
        .count()
        .where(F.col("count") >= BOILERPLATE_MIN_DOCS)
        .select("batch_id", "line")
        .distinct()
        .toArrow()
    )
    templates: dict[str, np.ndarray] = {paths.batch_id: np.empty(0, np.uint64) for paths in batches}
    if frequent.num_rows:
        frequent = frequent.sort_by([("batch_id", "ascending"), ("line", "ascending")])
        for batch_id in pc.unique(frequent.column("batch_id")).to_pylist():
            lines = frequent.filter(pc.equal(frequent.column("batch_id"), batch_id)).column("line")
            templates[batch_id] = np.unique(_unsigned(lines))
    timings["pass1_and_templates"], mark = time.perf_counter() - mark, time.perf_counter()
    # Read once, by the write below (which is what runs it, so its time is pass 2's too).
    fp = text.mapInArrow(_fingerprint_pass(config, templates, stoplist), _FP_SCHEMA)
    # Per-document results go to the work directory, one folder per batch: the driver then holds
    # one batch at a time, however many hours the job covers.
    rows_dir = work / "rows"
    (
        rows.drop("lines")
        .join(fp, ["batch_id", "doc_id"])
        .write.mode("overwrite")
        .partitionBy("batch_id")
        .parquet(str(rows_dir))
    )
    rows.unpersist()
    text.unpersist()
    timings["pass2_fingerprints_and_rows_written"], mark = time.perf_counter() - mark, time.perf_counter()
    pairs_dir = work / "pairs"
    candidate_pairs(spark, rows_dir, config, pairs_dir)
    timings["candidate_pairs_verified"] = time.perf_counter() - mark
    return SparkFingerprints(rows_dir, pairs_dir, time.perf_counter() - started, partitions, timings, templates)


# ---- the driver: the layers, batch by batch -----------------------------------------------------


def _positions(batch: pa.Table, doc_ids: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Rows of ``batch`` holding ``doc_ids`` (-1: not in this layer's input)."""
    at = pc.index_in(doc_ids, batch.column("doc_id"))
    return pc.fill_null(at, -1).to_numpy(zero_copy_only=False).astype(np.int64)


def _float(column: pa.ChunkedArray) -> np.ndarray:
    return pc.fill_null(column, np.nan).to_numpy(zero_copy_only=False).astype(np.float64)


def _strict_verdict(verifier, ok_loose: np.ndarray, jac: np.ndarray, newer: np.ndarray, earlier: np.ndarray, strict: np.ndarray) -> np.ndarray:
    """The verifier's verdict for rows held to a plain Jaccard (``strict_rows``); the executors'
    (strict NaN, the passage rule included) for the others, as ``verify_pairs`` with ``strict``."""
    # SHORT rows (negative) take the executors' verdict, which held them to the short rules.
    return np.where(~(strict >= 0), ok_loose, np.asarray(verifier.accepts(jac, newer, earlier, strict), bool))


class SparkSimHashLayer(SimHashLayer):
    """L2 unchanged (its search over the SimHashes the executors computed, on the driver), with its
    hits verified by the executors (``candidate_pairs``, the same ``verify_pairs``)."""

    def __init__(self, config: DedupConfig, pairs: pa.Table) -> None:
        super().__init__(config)
        self.pairs = pairs.filter(pc.is_valid(pairs.column("dist")))

    def fingerprints(self, batch: pa.Table, ctx: LayerContext) -> np.ndarray:
        return batch.column("_spark_simhash").to_numpy().astype(np.uint64)

    def verify_matches(self, batch, newer, earlier, strict, ctx):
        if not len(newer):
            return verify_pairs(np.empty(0, np.uint32), np.zeros(1, np.int64), newer, earlier, verifier_of(self.config), strict)
        pairs = self.pairs
        wanted = pa.table({"newer": batch.column("doc_id").take(pa.array(newer)), "earlier": batch.column("doc_id").take(pa.array(earlier)),
                           "_i": pa.array(np.arange(len(newer)))})  # fmt: skip
        got = wanted.join(pairs, ["newer", "earlier"], join_type="left outer").sort_by("_i")
        missing = pc.is_null(got.column("ok")).to_numpy(zero_copy_only=False)
        if missing.any():
            # Every SimHash hit within the distance shares a band, so the executors verified it.
            raise RuntimeError(f"SimHash pairs not verified by the executors: {got.filter(pa.array(missing)).slice(0, 3).to_pylist()}")
        jac, cn, ce = (_float(got.column(c)) for c in ("jaccard", "covers_newer", "covers_earlier"))
        ok = got.column("ok").to_numpy(zero_copy_only=False).astype(bool)
        verifier, strict = verifier_of(self.config), np.asarray(strict, np.float64)
        ok = _strict_verdict(verifier, ok, jac, cn, ce, strict)
        ok = facts_veto(verifier, number_sets(batch, cache=ctx.near_text), newer, earlier, jac, ok, strict)
        return ok, jac, cn, ce


class SparkMinHashLayer(MinHashLayer):
    """L3 unchanged but for where its inputs are: the signatures from the executors; the in-batch
    candidates from their band joins, verified there with the same ``verify_pairs`` and resolved here
    in batch order by ``engines.pairs.resolve_pairs`` (``stream_minhash``'s rule on those pairs); the
    shingle sets of rows with registry hits read back from the executors' rows."""

    def __init__(self, config: DedupConfig, pairs: pa.Table, sets: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]) -> None:
        super().__init__(config)
        self.pairs = pairs.filter(pc.is_valid(pairs.column("mh_band")))
        self.read_sets = sets

    def fingerprints(self, batch: pa.Table, ctx: LayerContext, hasher: MinHasher):
        sig, _ = _uint32_rows(batch.column("_spark_minhash").combine_chunks())
        counts = batch.column("_spark_shingles").to_numpy().astype(np.int64)
        return sig.reshape(batch.num_rows, hasher.num_perm), counts, None

    def registry_keys(self, batch, sig, sets, hasher, stoplist):
        # The executors computed them with index_stoplist_setting's stoplist, the one ``stoplist`` is.
        values, _ = _uint32_rows(batch.column("_spark_registry_bands").combine_chunks())
        return values.copy().view(np.uint64).reshape(batch.num_rows, self.config.registry_bands)

    def registry_covered(self, sig_earlier, rows, sets, hasher, batch):
        uniq, inverse = np.unique(rows, return_inverse=True)
        hashes, offsets = self.sets_of(uniq, sets, batch)
        return earlier_covered(sig_earlier, inverse.ravel(), hashes, offsets, hasher)

    def sets_of(self, rows, sets, batch):
        return self.read_sets(batch.column("doc_id").take(pa.array(rows)).to_numpy(zero_copy_only=False))

    def in_batch(self, keys, sig, active, sets, verifier, strict, batch, numbers, texts=None):
        from dedup_tasks.engines.pairs import resolve_pairs

        cfg = self.config
        pairs = self.pairs
        newer, earlier = _positions(batch, pairs.column("newer")), _positions(batch, pairs.column("earlier"))
        here = (newer >= 0) & (earlier >= 0)
        newer, earlier = newer[here], earlier[here]
        pick = pa.array(np.flatnonzero(here))
        est = pairs.column("est").take(pick).to_numpy()
        jac, cn, ce = (_float(pairs.column(c).take(pick)) for c in ("jaccard", "covers_newer", "covers_earlier"))
        ok = pc.fill_null(pairs.column("ok").take(pick), False).to_numpy(zero_copy_only=False).astype(bool)
        # The stream's scoring: at VERIFY_FLOOR and above the verifier on the exact sets, below it the estimate.
        verified = est >= VERIFY_FLOOR
        ok = np.where(verified, _strict_verdict(verifier, ok, jac, cn, ce, strict[newer]), est >= cfg.minhash_threshold)
        # The facts check reads the numbers of the driver's near text, as the single-node stream does.
        ok = np.where(verified, facts_veto(verifier, numbers, newer, earlier, jac, ok, strict[newer]), ok)
        # Site lead-ins are the batch's (this driver's), so their rule is applied here, on the short texts.
        leadin = leadins_of(batch)
        short = np.flatnonzero(verified & ok & (strict[newer] == SHORT) & (leadin[newer] > 0))
        if len(short) and texts is not None:
            ok[short] = ~leadin_items_differ(texts, newer[short], earlier[short], leadin[newer[short]])
        return resolve_pairs(
            batch.num_rows, newer, earlier, pairs.column("mh_band").take(pick).to_numpy(), np.where(verified, jac, est), ok,
            np.where(verified, cn, np.nan), np.where(verified, ce, np.nan), active, NEAR_MISS_JACCARD_MIN,
        )  # fmt: skip


def _prepared(rows: pa.Table, source: str, config: DedupConfig) -> pa.Table:
    """The layer view ``pipeline.prepare`` would build, from the executors' columns, in batch order."""
    rows = rows.sort_by([("fetched_us", "ascending"), ("doc_id", "ascending")])
    n = rows.num_rows
    check_rows(
        pa.table({"doc_id": rows.column("doc_id"), "fetched_at": rows.column("fetched_us").cast(pa.timestamp("us", tz="UTC"))}),
        source,
    )
    near_len = rows.column("near_len").to_numpy()
    hosts = rows.column("host").to_numpy(zero_copy_only=False).astype(object)
    view = pa.table(
        {
            "doc_id": rows.column("doc_id"),
            "_repaired": rows.column("repaired"),
            "_row": pa.array(np.arange(n), pa.int64()),
            REASON: pa.nulls(n, pa.string()),
            "_url_key": pa.array(_unsigned(rows.column("url_key")), pa.uint64()),
            "_url_valid": rows.column("url_valid"),
            "_url_reason": rows.column("url_reason"),
            "_ch_hi": pa.array(_unsigned(rows.column("ch_hi")), pa.uint64()),
            "_ch_lo": pa.array(_unsigned(rows.column("ch_lo")), pa.uint64()),
            "_empty": pa.array(near_len == 0),
            **({"_near_text": rows.column("near_text")} if "near_text" in rows.column_names else {NEAR_LEN: pa.array(near_len)}),
            "_lang": rows.column("lang"),
            "_spark_simhash": pa.array(_unsigned(rows.column("simhash")), pa.uint64()),
            "_spark_minhash": rows.column("sig"),
            "_spark_shingles": rows.column("shingles"),
            "_spark_registry_bands": rows.column("reg_bands"),
            SHORT_TEXT: rows.column("short_text"),
            # Site lead-ins need the whole batch's short texts of each host: made here, as prepare does.
            LEADIN: leadin_column(rows.column("short_text"), site_codes_of(hosts), hosts != "", near_len, config),
        }
    )
    too_long = rows.column("too_long").to_numpy(zero_copy_only=False).astype(bool)
    repaired = rows.column("repaired").to_numpy(zero_copy_only=False).astype(bool)
    # The reasons in prepare's order: the long-document note, then the repair.
    if too_long.any():
        view = add_reason(view, too_long, LONG_REASON.format(MAX_NEAR_CHARS))
    return add_reason(view, repaired, REPAIRED_REASON)


def run_spark_batch(
    rows: pa.Table,
    batch_id: str,
    config: DedupConfig,
    registry: Registry,
    prepare_seconds: float = 0.0,
    on_layer: Callable[[LayerStats], None] | None = None,
    spark_stats: dict | None = None,
    pairs: pa.Table | None = None,
    sets: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
) -> BatchResult:
    """The driver's part for one batch: the layers over the executors' fingerprints and verified
    candidate pairs (``SparkFingerprints.pairs``), the commit, the decisions. ``sets`` reads the
    shingle sets of some doc_ids (``SparkFingerprints.sets``). ``BatchResult.kept`` holds the kept
    doc_ids (the rows are Spark's to write)."""
    started = time.perf_counter()
    started_at = datetime.now(UTC).isoformat()
    ctx = LayerContext(batch_id, config, registry)
    registry.begin(batch_id)
    view = _prepared(rows, f"batch {batch_id}", config)
    extra = {"engine": "spark", **(spark_stats or {})}
    if pairs is not None:
        # What the driver got instead of every document's shingle set.
        extra["verified_pairs"] = pairs.num_rows
    prep_stats = LayerStats("prepare", view.num_rows, 0, prepare_seconds, extra)
    if on_layer:
        on_layer(prep_stats)
    if pairs is None or sets is None:
        raise ValueError("the Spark layers need the executors' candidate pairs and shingle sets")
    layers = {
        "simhash": lambda cfg: SparkSimHashLayer(cfg, pairs),
        "minhash": lambda cfg: SparkMinHashLayer(cfg, pairs, sets),
    }
    survivors, drops, stats = run_layers(view, ctx, on_layer, layers)
    survivors = survivors.drop_columns([c for c in ENGINE_COLUMNS if c in survivors.column_names])
    # The executors' prepare time counts too: it ran before this driver step started.
    return finish_batch(
        view.select(["doc_id"]), survivors, drops, [prep_stats, *stats], ctx, started - prepare_seconds, started_at,
        on_layer,
    )


def run_batches(
    spark: SparkSession,
    batches: list[BatchPaths],
    config: DedupConfig,
    registry: Registry,
    on_layer: Callable[[LayerStats], None] | None = None,
    partitions: int | None = None,
) -> list[BatchSummary]:
    """Deduplicate ``batches`` (one hour, or an archive of many) in one Spark job and publish each.

    The executors fingerprint every batch at once; the driver then runs the layers and the commit
    batch by batch in batch_id order (oldest first), so each batch sees exactly the registry it
    would have seen had the batches run one by one.
    """
    batches = sorted(batches, key=lambda p: p.batch_id)
    if len({p.batch_id for p in batches}) != len(batches):
        raise InputError("a batch is named twice")
    if not batches:
        return []
    work = batches[0].root / "work" / f"spark-{uuid.uuid4().hex[:12]}"
    try:
        return _run(spark, batches, config, registry, work, on_layer, partitions)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# Pages of the first batch the driver learns a new registry's stoplist from (its head: the executors hold
# the batch's shingles, the driver reads the partition itself).
LEARN_SAMPLE_DOCS = 50_000


def index_stoplist_setting(config: DedupConfig, registry: Registry, first: BatchPaths | None = None) -> str:
    """The ``minhash_registry_stoplist`` value the executors compute the registry's band keys with.

    "auto" is settled here, on the driver, by the registry (``Registry.band_key_stoplist``): what it
    records, or for a new registry the stoplist learned from the first ``LEARN_SAMPLE_DOCS`` pages of
    the job's first batch ``first`` as ``python -m dedup_tasks stoplist learn`` would (the built-in one
    below ``fingerprint.stoplist.LEARN_MIN_DOCS`` English pages, or without ``first``). A learned
    stoplist goes to the executors as a file under ``<root>/registry/stoplists``. A registry that dies
    with the process is keyed on the plain signature ("")."""
    from dedup_tasks.io import read_input
    from dedup_tasks.stoplist_learn import propose_from_table

    if registry.plain_band_keys:
        return ""
    if config.minhash_registry_stoplist != AUTO_STOPLIST:
        return config.minhash_registry_stoplist

    def propose():
        if first is None:
            return load_stoplist(DEFAULT_STOPLIST)
        # File by file until the sample is full: the driver never reads a whole first hour for it.
        parts, rows = [], 0
        for file in input_files(first.input):
            if rows >= LEARN_SAMPLE_DOCS:
                break
            parts.append(read_input(file)[0])
            rows += parts[-1].num_rows
        table = pa.concat_tables(parts, promote_options="default").slice(0, LEARN_SAMPLE_DOCS)
        return propose_from_table(table, learned_name(first.batch_id), config)

    stoplist = registry.band_key_stoplist(propose)
    return stoplist_setting(stoplist, Path(config.root) / "registry" / "stoplists")


def _run(spark, batches, config, registry, work, on_layer, partitions) -> list[BatchSummary]:
    from pyspark.sql import functions as F

    fps = compute(spark, batches, config, work, partitions, index_stoplist_setting(config, registry, batches[0] if batches else None))
    counts = {p.batch_id: len(input_files(p.input)) for p in batches}
    text = read_batches(spark, batches)
    summaries = []
    total = None
    for paths in batches:
        # The facts check (L2/L3) reads numbers from the near text; L4 reads the text itself.
        facts = config.minhash_facts_min_new > 0 and (config.layer_enabled("minhash") or config.layer_enabled("simhash"))
        rows = fps.rows(paths.batch_id, text=facts or config.layer_enabled("semantic"))
        if rows.num_rows == 0:
            raise ContractError(f"batch {paths.batch_id}: {paths.input} ({counts[paths.batch_id]} files) has no rows")
        if total is None:
            total = max(1, sum(pq_rows(fps.rows_dir / f"batch_id={p.batch_id}") for p in batches))
        share = fps.seconds * rows.num_rows / total  # the Spark stage's time, spread by rows
        result = run_spark_batch(
            rows,
            paths.batch_id,
            config,
            registry,
            share,
            on_layer,
            {"spark_seconds": round(fps.seconds, 2), "spark_partitions": fps.partitions, **{k: round(v, 2) for k, v in fps.timings.items()}},
            fps.pairs(paths.batch_id),
            lambda ids, batch_id=paths.batch_id: fps.sets(batch_id, ids),
        )
        kept_ids = spark.createDataFrame(result.kept.select(["doc_id"]).to_pandas())
        deduped = (
            text.where(F.col("batch_id") == paths.batch_id)
            .join(F.broadcast(kept_ids), ["doc_id"], "left_semi")
            .orderBy("fetched_at", "doc_id")
            .drop("batch_id")
        )
        publish_spark(paths, result, deduped, fps.templates.get(paths.batch_id))
        summaries.append(result.summary)
    return summaries


def pq_rows(folder: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows for f in folder.glob("*.parquet")) if folder.exists() else 0


def publish_spark(paths: BatchPaths, result: BatchResult, deduped: DataFrame, templates: np.ndarray | None = None) -> None:
    """decisions/ from the driver, deduped/ from Spark (with the batch's template lines beside it, as
    the CLI publishes them), each written to a temporary directory then renamed."""
    write_parquet_dir(result.decisions, paths.decisions)

    def fill(tmp: Path) -> None:
        deduped.write.mode("overwrite").option("compression", "zstd").parquet(str(tmp))
        for marker in tmp.glob("_SUCCESS"):
            marker.unlink()
        for crc in tmp.glob(".*.crc"):
            crc.unlink()
        if templates is not None:
            write_template_lines(tmp, templates)

    replace_dir(paths.deduped, fill)
    result.summary.outputs = {"deduped": str(paths.deduped), "decisions": str(paths.decisions), "summary": str(paths.summary)}
    write_json({**result.summary.to_dict(), "engine": "spark"}, paths.summary)

