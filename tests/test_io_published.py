"""Published partitions read back by document (io.read_published_rows): what L3 verifies a registered
candidate on, and L4 embeds when a vector is not stored, without reading the whole earlier hour."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dedup_tasks.config import DedupConfig
from dedup_tasks.fingerprint.minhash import EN_CHAR_SHINGLES, EN_SHINGLE_WORDS, SHINGLE_CHARS
from dedup_tasks.io import (
    PUBLISHED_ROW_GROUP_ROWS,
    TEMPLATE_LINES_FILE,
    BatchPaths,
    read_published_rows,
    template_lines_of,
    with_template_lines,
    write_published,
)
from dedup_tasks.layers.minhash import published_shingle_sets, shingle_sets
from dedup_tasks.pipeline import prepare, publish, run_batch
from dedup_tasks.registry.base import MemoryRegistry
from tests.conftest import make_batch

FOOTER = "Subscribe to the Daily Gazette newsletter for more stories like this one every morning"


def _story(i: int) -> str:
    words = " ".join(f"w{i}x{j}" for j in range(60))
    return f"Council story number {i} about the harbour budget. {words}\n{FOOTER}"


def test_a_batch_publishes_its_template_lines_and_a_document_reads_back_as_it_was_fingerprinted(tmp_path):
    # Five pages of one site share a footer line: the batch learns it as a template line (>= 4 pages)
    # and strips it. Two are exact copies of the first, so the published partition keeps three pages
    # with the footer: learned over the kept rows it would be no template line, and the page read back
    # would fingerprint differently from what the registry holds.
    rows = [{"doc_id": "first", "url": "https://gazette.example/a", "title": "Harbour", "content": _story(0)}]
    rows += [{"doc_id": f"copy{i}", "url": f"https://gazette.example/c{i}", "title": "Harbour", "content": _story(0)} for i in range(2)]
    rows += [{"doc_id": f"other{i}", "url": f"https://gazette.example/o{i}", "title": f"Other {i}", "content": _story(i + 1)} for i in range(2)]
    config = DedupConfig(layers=("url", "exact"), root=str(tmp_path))
    batch = make_batch(rows)
    prepared = prepare(batch, config)
    learned = template_lines_of(prepared.schema)
    assert learned is not None and len(learned) >= 1

    paths = BatchPaths(tmp_path, "2026-12-01T00")
    result = run_batch(batch, paths.batch_id, config, MemoryRegistry())
    assert result.kept.num_rows == 3
    publish(paths, result)
    published_file = paths.deduped / "part-00000.parquet"
    stored = np.frombuffer((paths.deduped / TEMPLATE_LINES_FILE).read_bytes(), "<u8")
    assert np.array_equal(stored, learned)
    assert template_lines_of(pq.ParquetFile(published_file).schema_arrow) is None  # not in the file readers see
    assert pq.read_table(paths.deduped).num_rows == 3  # Parquet readers skip the "_" file
    relearned = template_lines_of(prepare(pq.read_table(published_file), config).schema)
    assert len(np.setdiff1d(learned, relearned)) >= 1  # the footer is no template line of the kept rows

    back = read_published_rows(paths.deduped, ["first"])
    assert back.table.column("doc_id").to_pylist() == ["first"]
    again = prepare(back.table, config, templates=back.templates)
    original = prepared.filter(pa.compute.equal(prepared.column("doc_id"), "first"))
    assert again.column("_near_text").to_pylist() == original.column("_near_text").to_pylist()
    assert "newsletter" not in again.column("_near_text")[0].as_py()

    # L3's read back gives the shingle set the batch fingerprinted.
    earlier = published_shingle_sets(config, np.array(["first"], object), np.array([paths.batch_id], object))
    want_hashes, want_offsets = shingle_sets(
        original, np.array([0]), SHINGLE_CHARS, EN_SHINGLE_WORDS, EN_CHAR_SHINGLES
    )
    assert earlier.index.tolist() == [0]
    assert np.array_equal(earlier.hashes[earlier.offsets[0] : earlier.offsets[1]], want_hashes[want_offsets[0] : want_offsets[1]])
    assert earlier.row_groups_read == 1


def _table(n: int) -> pa.Table:
    return pa.table({
        "doc_id": [f"d{i:05d}" for i in range(n)],
        "content": [f"text of document {i}" for i in range(n)],
    })


def test_only_the_row_groups_holding_the_documents_are_read(tmp_path):
    n = 2 * PUBLISHED_ROW_GROUP_ROWS + 100
    templates = np.array([3, 7, 2**63 + 5], np.uint64)
    part = tmp_path / "deduped" / "dt=2026-12-01" / "hour=00"
    part.mkdir(parents=True)
    write_published(with_template_lines(_table(n), templates), part)
    assert (part / TEMPLATE_LINES_FILE).exists()
    assert pq.ParquetFile(part / "part-00000.parquet").num_row_groups == 3

    last = n - 1
    wanted = ["d00001", f"d{last:05d}", "d00000", "not-there", "d00001"]
    back = read_published_rows(part, wanted)
    assert back.row_groups_read == 2  # the first and the last group, not the middle one
    assert sorted(back.table.column("doc_id").to_pylist()) == ["d00000", "d00001", f"d{last:05d}"]
    by_id = dict(zip(back.table.column("doc_id").to_pylist(), back.table.column("content").to_pylist(), strict=True))
    assert by_id[f"d{last:05d}"] == f"text of document {last}"
    assert np.array_equal(back.templates, templates)

    nothing = read_published_rows(part, ["not-there"])
    assert nothing.table.num_rows == 0 and nothing.row_groups_read == 0


def test_a_partition_published_without_template_lines_is_read_whole(tmp_path):
    # Published by code before per-document reads: the template lines must be learned over the whole
    # partition again, so the whole partition comes back.
    part = tmp_path / "old"
    part.mkdir()
    pq.write_table(_table(50), part / "part-00000.parquet")
    back = read_published_rows(part, ["d00003"])
    assert back.templates is None and back.table.num_rows == 50


def test_a_missing_partition_raises_file_not_found(tmp_path):
    try:
        read_published_rows(tmp_path / "gone", ["d1"])
    except FileNotFoundError as exc:
        assert "gone" in str(exc)
    else:
        raise AssertionError("no error for a missing partition")
