import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_tasks.config import DedupConfig
from dedup_tasks.contract import ContractError
from dedup_tasks.io import InputError, read_input
from dedup_tasks.pipeline import prepare
from tests.conftest import make_batch


def rows(n=3):
    return [{"doc_id": f"d{i}", "url": f"http://a.com/{i}", "title": "t", "content": f"text {i}"} for i in range(n)]


def test_missing_column_names_the_source():
    table = make_batch(rows()).drop_columns(["content"])
    with pytest.raises(ContractError, match=r"part-7.parquet: missing required column\(s\) \['content'\]"):
        prepare(table, DedupConfig(), "part-7.parquet")


def test_mistyped_column_names_column_and_type():
    table = make_batch(rows())
    table = table.set_column(table.column_names.index("fetched_at"), "fetched_at", pa.array([1, 2, 3]))
    with pytest.raises(ContractError, match="column 'fetched_at' has type int64"):
        prepare(table, DedupConfig(), "f.parquet")


def test_duplicate_doc_id_names_rows():
    data = rows(4)
    data[3]["doc_id"] = "d1"
    with pytest.raises(ContractError, match=r"doc_id must be unique.*row\(s\) 1 \(doc_id='d1'\), 3 \(doc_id='d1'\)"):
        prepare(make_batch(data), DedupConfig(), "f")


def test_null_doc_id_and_null_fetched_at_name_rows():
    data = rows(3)
    data[2]["doc_id"] = None
    with pytest.raises(ContractError, match=r"doc_id is null in row\(s\) 2"):
        prepare(make_batch(data), DedupConfig(), "f")
    table = make_batch(rows(3))
    ts = table.column("fetched_at").to_pylist()
    ts[0] = None
    table = table.set_column(table.column_names.index("fetched_at"), "fetched_at", pa.array(ts, table.schema.field("fetched_at").type))
    with pytest.raises(ContractError, match=r"fetched_at is null in row\(s\) 0"):
        prepare(table, DedupConfig(), "f")


def test_naive_timestamps_are_read_as_utc_and_large_strings_accepted():
    table = make_batch(rows())
    naive = table.column("fetched_at").cast(pa.timestamp("ns"))
    table = table.set_column(table.column_names.index("fetched_at"), "fetched_at", naive)
    table = table.set_column(table.column_names.index("doc_id"), "doc_id", table.column("doc_id").cast(pa.large_string()))
    out = prepare(table, DedupConfig(), "f")
    assert out.schema.field("fetched_at").type == pa.timestamp("us", tz="UTC")


def test_invalid_utf8_is_replaced_and_recorded(tmp_path):
    # Bytes of a lone surrogate (as some writers emit) are invalid UTF-8 inside a Parquet string column.
    bad = b"caf\xed\xa0\x80 text"
    table = make_batch(rows(2))
    content = pa.Array.from_buffers(pa.string(), 2, [None, pa.py_buffer(pa.array([0, len(bad), len(bad) + 3], pa.int32()).buffers()[1]), pa.py_buffer(bad + b"abc")])
    table = table.set_column(table.column_names.index("content"), "content", content)
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path)
    read, _ = read_input(path)
    out = prepare(read, DedupConfig(), str(path))
    reasons = out.column("_reason").to_pylist()
    assert "invalid UTF-8" in reasons[0] and reasons[1] is None


def test_corrupt_parquet_names_the_file(tmp_path):
    part = tmp_path / "crawl"
    part.mkdir()
    (part / "a.parquet").write_bytes(b"PAR1 not really parquet")
    with pytest.raises(InputError, match=r"a.parquet: not a readable Parquet file"):
        read_input(part)


def test_empty_partition_is_an_error(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_input(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no .parquet files"):
        read_input(tmp_path / "empty")


def test_sort_batch_orders_and_leaves_an_ordered_single_chunk_batch_uncopied():
    from datetime import UTC, datetime

    from dedup_tasks.contract import sort_batch

    t0 = datetime(2026, 12, 1, tzinfo=UTC)
    ts = pa.array([t0, t0, t0.replace(minute=1)], pa.timestamp("us", tz="UTC"))
    ordered = pa.table({"doc_id": ["a", "b", "c"], "fetched_at": ts, "content": ["x", "y", "z"]})
    same = sort_batch(ordered)
    assert same.column("content").chunk(0).buffers()[2].address == ordered.column("content").chunk(0).buffers()[2].address
    # Out of order (doc_id breaks the tie of equal fetched_at), or in several chunks: taken in order.
    shuffled = ordered.take([2, 1, 0])
    assert sort_batch(shuffled).column("doc_id").to_pylist() == ["a", "b", "c"]
    chunked = pa.concat_tables([ordered.slice(0, 2), ordered.slice(2)])
    assert chunked.column("doc_id").num_chunks == 2
    result = sort_batch(chunked)
    assert result.equals(ordered) and result.column("doc_id").num_chunks == 1
