"""Bulk transfer between numpy columns and PostgreSQL: binary COPY in, CSV/binary COPY out.

Per-row Python work is what makes a registry slow at 100k documents per batch, so rows are encoded
and decoded column-wise with numpy (and pyarrow for text) instead of one tuple at a time.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
_COPY_TRAILER = (-1).to_bytes(2, "big", signed=True)

_FIXED = {"bool": "?", "int2": ">i2", "int4": ">i4", "int8": ">i8", "float8": ">f8"}


def u64_to_i64(values: np.ndarray) -> np.ndarray:
    """uint64 -> int64 with the same 64 bits (values >= 2**63 become negative); how the schema stores uint64."""
    return np.ascontiguousarray(values, dtype=np.uint64).view(np.int64)


def i64_to_u64(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64).view(np.uint64)


def u16_to_i16(values: np.ndarray) -> np.ndarray:
    """16-bit band values (0..65535) stored bit-identically in a smallint."""
    return np.ascontiguousarray(values, dtype=np.uint16).view(np.int16)


def encode_binary_copy(columns: Sequence[tuple[str, Any]]) -> bytes:
    """The complete `COPY ... (FORMAT binary)` stream for `columns` (see `_encode_parts`)."""
    return b"".join(bytes(part) for part in _encode_parts(columns))


def _encode_parts(columns: Sequence[tuple[str, Any]]) -> list[memoryview]:
    """Rows for `COPY ... FROM STDIN (FORMAT binary)`, built column-wise.

    Each column is (kind, values): kind is bool/int2/int4/int8/float8 (1-D array), bytea (2-D uint8
    array, one fixed-width value per row), text (sequence of str) or varbytea (pyarrow binary array).
    NULLs only through the nullable kinds `int8?` ((values, valid mask)) and `varbytea?` (a pyarrow
    binary array with nulls): they are written as variable-length fields, length -1 where NULL.

    A row is runs of fixed-width fields (numpy structured arrays, big-endian) separated by text values;
    pyarrow joins the runs row-wise in C, so no Python loop touches a row.
    """
    if not columns:
        raise ValueError("no columns")
    n = len(columns[0][1])
    pieces: list[Any] = []  # structured arrays (fixed runs) and pyarrow large_binary arrays (text)
    fields: list[tuple] = [("nfields", ">i2")]
    values: dict[str, Any] = {"nfields": len(columns)}

    def close_run() -> None:
        run = np.zeros(n, dtype=np.dtype(fields))
        for name, value in values.items():
            run[name] = value
        pieces.append(run)

    for j, (kind, column) in enumerate(columns):
        if kind.endswith("?"):
            # Nullable: written as a variable-length field (length -1 where NULL).
            kind, column, nulls = _nullable(kind[:-1], column)
        else:
            nulls = None
        if len(column) != n:
            raise ValueError("columns differ in length")
        if kind in _FIXED:
            dtype = np.dtype(_FIXED[kind])
            fields.extend([(f"l{j}", ">i4"), (f"v{j}", dtype)])
            values[f"l{j}"] = dtype.itemsize
            values[f"v{j}"] = np.asarray(column)
        elif kind == "bytea":
            data = np.ascontiguousarray(column, dtype=np.uint8).reshape(n, -1)
            fields.extend([(f"l{j}", ">i4"), (f"v{j}", np.uint8, (data.shape[1],))])
            values[f"l{j}"] = data.shape[1]
            values[f"v{j}"] = data
        elif kind in ("text", "varbytea"):
            # varbytea: a pyarrow (large_)binary array of variable-length bytea values.
            if kind == "text":
                arr = column if isinstance(column, pa.Array) else pa.array(column, type=pa.large_string())
                arr = arr.cast(pa.large_string())
            else:
                arr = column.cast(pa.large_binary())
            if arr.null_count:
                raise ValueError(f"{kind} column contains nulls")
            fields.append((f"l{j}", ">i4"))
            lengths = pc.binary_length(arr).to_numpy(zero_copy_only=False)
            values[f"l{j}"] = lengths if nulls is None else np.where(nulls, -1, lengths)
            close_run()
            pieces.append(arr.cast(pa.large_binary()))
            fields, values = [], {}
        else:
            raise ValueError(f"unsupported column kind {kind!r}")
    if fields:
        close_run()

    if len(pieces) == 1:
        body = memoryview(pieces[0]).cast("B")
    elif n == 0:
        body = memoryview(b"")
    else:
        arrays = []
        for piece in pieces:
            if isinstance(piece, np.ndarray):
                width = piece.dtype.itemsize
                buf = pa.py_buffer(piece)
                piece = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, buf])
                piece = piece.cast(pa.large_binary())
            arrays.append(piece)
        joined = pc.binary_join_element_wise(*arrays, pa.scalar(b"", pa.large_binary()))
        offsets = np.frombuffer(joined.buffers()[1], np.int64)
        body = memoryview(joined.buffers()[2])[offsets[0] : offsets[n]]
    return [memoryview(_COPY_HEADER), body, memoryview(_COPY_TRAILER)]


def _nullable(kind: str, column: Any) -> tuple[str, pa.Array, np.ndarray]:
    """A nullable column as (varbytea, values with NULLs as empty, NULL mask).

    kind int8 takes (values, valid mask); varbytea a pyarrow binary array with nulls.
    """
    if kind == "int8":
        values, valid = column
        valid = np.asarray(valid, bool)
        data = np.ascontiguousarray(np.asarray(values)[valid], dtype=">i8")
        offsets = np.zeros(len(valid) + 1, np.int64)
        np.cumsum(np.where(valid, 8, 0), out=offsets[1:])
        arr = pa.LargeBinaryArray.from_buffers(
            pa.large_binary(), len(valid), [None, pa.py_buffer(offsets), pa.py_buffer(data.view(np.uint8))]
        )
        return "varbytea", arr, ~valid
    if kind == "varbytea":
        arr = column.cast(pa.large_binary())
        nulls = arr.is_null().to_numpy(zero_copy_only=False)
        return "varbytea", pc.fill_null(arr, pa.scalar(b"", pa.large_binary())), nulls
    raise ValueError(f"unsupported nullable column kind {kind!r}")


class _PartsReader:
    """A read()-able view over encoded parts, so the COPY stream is never copied into one bytes object."""

    def __init__(self, parts: list[memoryview]) -> None:
        self._parts = [p for p in parts if len(p)]
        self._i = 0
        self._pos = 0

    def read(self, size: int = -1) -> bytes:
        if self._i >= len(self._parts):
            return b""
        part = self._parts[self._i]
        end = len(part) if size < 0 else min(len(part), self._pos + size)
        chunk = bytes(part[self._pos : end])
        self._pos = end
        if end >= len(part):
            self._i += 1
            self._pos = 0
        return chunk

    def readline(self, size: int = -1) -> bytes:  # psycopg2 only calls read(); present for file-likeness
        return self.read(size)


def copy_in(cur: Any, table: str, names: Sequence[str], columns: Sequence[tuple[str, Any]]) -> None:
    """Binary COPY of numpy columns into `table` (already quoted/qualified by the caller)."""
    if len(columns[0][1]) == 0:
        return
    reader = _PartsReader(_encode_parts(columns))
    cur.copy_expert(f"COPY {table} ({', '.join(names)}) FROM STDIN (FORMAT binary)", reader, size=1 << 20)


def copy_out_table(cur: Any, query: str, params: Any, schema: Sequence[tuple[str, pa.DataType]]) -> pa.Table:
    """Run `query` as `COPY (...) TO STDOUT (FORMAT csv)` and parse it with pyarrow.

    CSV keeps the text columns (doc_id, batch_id) parseable without a per-row loop; bytea columns
    should be selected as encode(x, 'hex') and decoded with `hex_to_bytes`.
    """
    sql = cur.mogrify(query, params).decode() if params is not None else query
    out = io.BytesIO()
    cur.copy_expert(f"COPY ({sql}) TO STDOUT (FORMAT csv)", out)
    names = [name for name, _ in schema]
    if out.tell() == 0:
        return pa.table({name: pa.array([], type=typ) for name, typ in schema})
    out.seek(0)
    return pacsv.read_csv(
        out,
        read_options=pacsv.ReadOptions(column_names=names),
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types=dict(schema), strings_can_be_null=False, quoted_strings_can_be_null=False
        ),
    )


def copy_out_int8(cur: Any, query: str, params: Any, ncols: int) -> np.ndarray:
    """(n, ncols) int64 from a query of only NOT NULL bigint columns, via binary COPY (no text parsing)."""
    sql = cur.mogrify(query, params).decode() if params is not None else query
    out = io.BytesIO()
    cur.copy_expert(f"COPY ({sql}) TO STDOUT (FORMAT binary)", out)
    raw = out.getbuffer()
    header = 19  # signature (11) + flags (4) + extension length (4, always 0 from the server)
    body = raw[header : len(raw) - 2]
    fields = [("n", ">i2")]
    for j in range(ncols):
        fields += [(f"l{j}", ">i4"), (f"v{j}", ">i8")]
    rows = np.frombuffer(body, dtype=np.dtype(fields))
    return np.stack([rows[f"v{j}"].astype(np.int64) for j in range(ncols)], axis=1).reshape(len(rows), ncols)


_HEX = np.full(256, 255, np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i


def hex_to_bytes(column: pa.ChunkedArray | pa.Array, width: int | None = None) -> np.ndarray:
    """(n, width) uint8 from a string column of equal-length hex strings (PostgreSQL's encode(.., 'hex')).

    `width` (bytes per value) is taken from the data when None; it is required to shape an empty result.
    """
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    arr = arr.cast(pa.large_string())
    n = len(arr)
    if n == 0:
        return np.empty((0, width or 0), np.uint8)
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + n + 1]
    if width is None:
        width = int(offsets[1] - offsets[0]) // 2
    if not np.all(np.diff(offsets) == 2 * width):
        raise ValueError(f"expected {2 * width} hex digits per value")
    chars = np.frombuffer(arr.buffers()[2], np.uint8)[offsets[0] : offsets[-1]].reshape(n, 2 * width)
    nibbles = _HEX[chars]
    if (nibbles == 255).any():
        raise ValueError("invalid hex digit")
    return (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]


def hex_to_binary(column: pa.ChunkedArray | pa.Array) -> pa.LargeBinaryArray:
    """A binary array from a string column of hex strings of any lengths (encode(.., 'hex'))."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    arr = arr.cast(pa.large_string())
    n = len(arr)
    if n == 0:
        return pa.array([], pa.large_binary())
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset : arr.offset + n + 1]
    if (np.diff(offsets) % 2).any():
        raise ValueError("odd number of hex digits")
    nibbles = _HEX[np.frombuffer(arr.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]]
    if (nibbles == 255).any():
        raise ValueError("invalid hex digit")
    data = (nibbles[0::2] << 4) | nibbles[1::2]
    return pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer((offsets - offsets[0]) // 2), pa.py_buffer(data)]
    )


def text_column(table: pa.Table, name: str) -> np.ndarray:
    """A string column as the object array of str the Matches API uses."""
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=object)
