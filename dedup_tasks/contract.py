"""The input and output data contract (DESIGN.md "Data contract") and its validation."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

REQUIRED_COLUMNS: dict[str, pa.DataType] = {
    "doc_id": pa.string(),
    "url": pa.string(),
    "title": pa.string(),
    "content": pa.string(),
    "fetched_at": pa.timestamp("us", tz="UTC"),
}
OPTIONAL_COLUMNS: dict[str, pa.DataType] = {"lang": pa.string()}
TEXT_COLUMNS = ("doc_id", "url", "title", "content", "lang")

# A decision's reason is its notes joined by this (a layer's note, then later ones): readers split on it.
REASON_SEPARATOR = "; "

DECISIONS_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("batch_id", pa.string()),
        ("action", pa.string()),
        ("layer", pa.string()),
        ("matched_doc_id", pa.string()),
        ("matched_batch_id", pa.string()),
        ("score", pa.float64()),
        ("threshold", pa.float64()),
        ("reason", pa.string()),
        ("config_hash", pa.string()),
        # Kept rows only: the best candidate that fell short of a near-duplicate threshold (what the
        # audit samples as near misses and the what-if replays); null on drops and clear keeps.
        ("suspect_layer", pa.string()),
        ("suspect_doc_id", pa.string()),
        ("suspect_batch_id", pa.string()),
        ("suspect_score", pa.float64()),
        # What ``score`` measures on a drop (docs/decisions.md): exact, hamming_distance,
        # jaccard_estimate, cosine, cross_logit or cross_prob_cos; null on keeps. Last, so readers of
        # the older schema still line up.
        ("score_kind", pa.string()),
    ]
)
# The score_kind of an L4 drop a cross-encoder confirmed: a logit, on no cosine's scale, or the mean
# of its probability and the aligned cosine (layers.semantic.CROSS_SCORE "prob_cos"), on no cosine's either.
CROSS_LOGIT = "cross_logit"
CROSS_PROB_COS = "cross_prob_cos"
# The near misses L2 and L3 record on kept rows (columns suspect_*, read by L4 and the weekly audit's
# near-miss strata): SimHash distance up to this, estimated Jaccard from this.
NEAR_MISS_HAMMING_MAX = 12
NEAR_MISS_JACCARD_MIN = 0.4
CROSS_SCORE_KINDS = (CROSS_LOGIT, CROSS_PROB_COS)

MAX_ROWS_NAMED = 10


class ContractError(ValueError):
    """Input that violates the data contract; the message names the file and rows."""


def _rows_named(rows: np.ndarray, doc_ids: np.ndarray | None = None) -> str:
    shown = [str(int(r)) if doc_ids is None else f"{int(r)} (doc_id={doc_ids[r]!r})" for r in rows[:MAX_ROWS_NAMED]]
    more = f" and {len(rows) - MAX_ROWS_NAMED} more" if len(rows) > MAX_ROWS_NAMED else ""
    return ", ".join(shown) + more


def conform_schema(table: pa.Table, source: str) -> pa.Table:
    """Cast the contract columns to their contract types, or raise naming the column and file."""
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise ContractError(f"{source}: missing required column(s) {missing}; found {table.column_names}")
    for name, typ in {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}.items():
        if name not in table.column_names:
            continue
        column = table.column(name)
        if column.type == typ:
            continue
        if name == "fetched_at":
            column = _as_utc_timestamp(column, source)
        elif pa.types.is_string(typ) and (
            pa.types.is_large_string(column.type) or pa.types.is_string_view(column.type) or pa.types.is_null(column.type)
        ) or pa.types.is_dictionary(column.type) and pa.types.is_string(column.type.value_type):
            column = column.cast(typ)
        else:
            raise ContractError(f"{source}: column {name!r} has type {column.type}, expected {typ}")
        table = table.set_column(table.column_names.index(name), name, column)
    return table


def _as_utc_timestamp(column: pa.ChunkedArray, source: str) -> pa.ChunkedArray:
    typ = column.type
    if not pa.types.is_timestamp(typ):
        raise ContractError(f"{source}: column 'fetched_at' has type {typ}, expected timestamp[us, tz=UTC]")
    if typ.tz is None:
        # A naive timestamp is read as UTC: crawlers log UTC, and a local-time guess would be worse.
        column = pc.assume_timezone(column, "UTC")
    return column.cast(pa.timestamp("us", tz="UTC"), safe=False)


def repair_text(table: pa.Table, source: str) -> tuple[pa.Table, np.ndarray]:
    """Replace invalid UTF-8 (including encoded lone surrogates) with U+FFFD.

    Returns the table and a per-row flag of repaired rows (their decision says so). Arrow reads
    invalid UTF-8 from Parquet without complaint; every later string kernel would fail on it.
    """
    repaired = np.zeros(table.num_rows, bool)
    for name in TEXT_COLUMNS:
        if name not in table.column_names:
            continue
        column = _one_array(table.column(name))
        if isinstance(column, pa.ChunkedArray):
            continue
        try:
            column.validate(full=True)
            continue
        except pa.ArrowInvalid:
            pass
        values = column.cast(pa.binary()).to_pylist()
        fixed = []
        for i, raw in enumerate(values):
            if raw is None:
                fixed.append(None)
                continue
            try:
                fixed.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                fixed.append(raw.decode("utf-8", errors="replace"))
                repaired[i] = True
        table = table.set_column(table.column_names.index(name), name, pa.array(fixed, pa.string()))
    return table, repaired


def check_rows(table: pa.Table, source: str) -> None:
    """doc_id non-null and unique, fetched_at non-null; raise naming the rows otherwise."""
    doc_id = table.column("doc_id")
    null_ids = np.flatnonzero(pc.is_null(doc_id).to_numpy(zero_copy_only=False))
    if len(null_ids):
        raise ContractError(f"{source}: doc_id is null in row(s) {_rows_named(null_ids)}")
    ids = doc_id.to_numpy().astype(object)
    # PostgreSQL text cannot hold U+0000 (the registry would fail at commit, naming no row).
    nul = np.flatnonzero(pc.match_substring(doc_id, "\x00").to_numpy(zero_copy_only=False))
    if len(nul):
        raise ContractError(f"{source}: doc_id contains a NUL character in row(s) {_rows_named(nul, ids)}")
    # Python objects, not numpy's fixed-width strings (those drop trailing NULs and would conflate ids).
    counts = pc.value_counts(doc_id.combine_chunks() if isinstance(doc_id, pa.ChunkedArray) else doc_id)
    dup = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    if len(dup):
        dup_values = set(dup.to_pylist())
        rows = np.flatnonzero(pc.is_in(doc_id, value_set=dup).to_numpy(zero_copy_only=False))
        raise ContractError(
            f"{source}: doc_id must be unique within the batch; {len(dup_values)} duplicated value(s) "
            f"in row(s) {_rows_named(rows, ids)}"
        )
    null_ts = np.flatnonzero(pc.is_null(table.column("fetched_at")).to_numpy(zero_copy_only=False))
    if len(null_ts):
        raise ContractError(f"{source}: fetched_at is null in row(s) {_rows_named(null_ts, ids)}")


def sort_batch(table: pa.Table) -> pa.Table:
    """Batch order: (fetched_at, doc_id). The earlier document always wins.

    A batch already in that order (a crawler writes an hour as it fetches it) with one chunk per
    column (one row group) is returned as it is: taking it in order would copy every column, text
    included, into the same single chunks."""
    order = pc.sort_indices(table, [("fetched_at", "ascending"), ("doc_id", "ascending")])
    single = all(column.num_chunks == 1 for column in table.columns)
    if single and np.array_equal(order.to_numpy(), np.arange(len(order))):
        return table
    return table.take(order)


def _one_array(column: pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The column as one array: its only chunk as it is (combine_chunks would copy it), several
    combined; a column without chunks is returned unchanged."""
    if column.num_chunks == 1:
        return column.chunk(0)
    return column.combine_chunks() if column.num_chunks else column
