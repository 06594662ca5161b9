"""Run one batch through the cascade: prepare -> layers -> commit -> outputs.

``run_batch`` is the library entry point (tables in, tables out, no files); ``run_partition`` adds the
data-root layout and the atomic writes. The CLI and the Airflow DAG both call these functions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dedup_tasks.config import ALL_LAYERS, DedupConfig
from dedup_tasks.contract import DECISIONS_SCHEMA, REASON_SEPARATOR
from dedup_tasks.fingerprint.minhash import MINHASH_SEED, MinHasher
from dedup_tasks.io import (
    BatchPaths,
    carry_template_lines,
    publish_outputs,
    read_input,
    recover_outputs,
    write_published,
)
from dedup_tasks.layers import LAYER_CLASSES, LayerContext, LayerStats
from dedup_tasks.layers.base import (
    PRIVATE_PREFIX,
    SCORE_KINDS,
    decision_rows,
    drop_reasons,
    strings_np,
    unescape_input_names,
)
from dedup_tasks.layers.minhash import registry_band_keys_of, signatures_of
from dedup_tasks.prepare import (  # noqa: F401  (re-exported: the Spark engine, steps and tests import them here)
    LONG_REASON,
    MAX_NEAR_CHARS,
    REPAIRED_REASON,
    _chunks,
    _pass_one,
    _pass_two_by_chunk,
    prepare,
    prepare_with_text,
)
from dedup_tasks.registry.base import Fingerprints, Registry

CONFLICT_REASON = "registered by a concurrent batch before this commit"


class InvariantError(RuntimeError):
    """The decisions would not account for every input row exactly once; nothing is published."""


@dataclass
class BatchSummary:
    batch_id: str
    rows_in: int
    kept: int
    dropped: int
    layers: list[LayerStats]
    config_hash: str
    seconds: float
    embedded: int = 0
    commit_conflicts: int = 0
    # Later batches this commit found holding copies of documents it keeps (earlier batch wins): their
    # copies were retracted from the registry and they need a rerun. batch_id -> documents.
    stale_batches: dict[str, int] = field(default_factory=dict)
    registry: str = ""
    outputs: dict[str, str] = field(default_factory=dict)
    started_at: str = ""

    def to_dict(self) -> dict:
        data = asdict(self)
        data["dropped_per_layer"] = {s.layer: s.dropped for s in self.layers}
        data["seconds_per_layer"] = {s.layer: round(s.seconds, 4) for s in self.layers}
        return data

    def table(self) -> str:
        lines = [f"batch {self.batch_id}  config {self.config_hash}", f"{'layer':<10}{'rows in':>10}{'dropped':>10}{'seconds':>10}{'docs/s':>12}"]
        for s in self.layers:
            rate = s.rows_in / s.seconds if s.seconds > 0 else float("inf")
            lines.append(f"{s.layer:<10}{s.rows_in:>10}{s.dropped:>10}{s.seconds:>10.2f}{rate:>12,.0f}")
        if self.commit_conflicts:
            lines.append(f"{'commit':<10}{'':>10}{self.commit_conflicts:>10}")
        for batch, docs in sorted(self.stale_batches.items()):
            lines.append(f"warning: later batch {batch} kept {docs} copies of documents this batch keeps: rerun it")
        lines.append(f"rows in {self.rows_in}   dropped {self.dropped}   kept {self.kept}   total {self.seconds:.2f} s")
        return "\n".join(lines)


@dataclass
class BatchResult:
    kept: pa.Table
    decisions: pa.Table
    summary: BatchSummary


# ---- cascade ------------------------------------------------------------------------------------


def run_layers(
    batch: pa.Table,
    ctx: LayerContext,
    on_layer: Callable[[LayerStats], None] | None = None,
    layer_classes: dict | None = None,
) -> tuple[pa.Table, list[pa.Table], list[LayerStats]]:
    """The enabled layers in cascade order; ``layer_classes`` replaces some layers' classes (another
    engine's subclasses that read fingerprints it computed elsewhere)."""
    # Looked up per enabled layer: a disabled layer's module is never imported (layers.LAYER_CLASSES).
    replaced = layer_classes or {}
    drops, stats = [], []
    for name in ALL_LAYERS:
        if not ctx.config.layer_enabled(name):
            continue
        out = (replaced.get(name) or LAYER_CLASSES[name])(ctx.config).run(batch, ctx)
        batch = out.survivors
        drops.append(out.drops)
        stats.append(out.stats)
        if on_layer:
            on_layer(out.stats)
    return batch, drops, stats


def fingerprints_of(survivors: pa.Table, config: DedupConfig) -> Fingerprints:
    from dedup_tasks.layers.content import content_hash_columns, ensure_content_hash

    n = survivors.num_rows
    survivors = ensure_content_hash(survivors)
    names = survivors.column_names
    has_minhash = "_minhash" in names
    sig = signatures_of(survivors) if has_minhash else np.zeros((n, config.minhash_num_perm), np.uint32)
    hasher = MinHasher(config.minhash_num_perm, MINHASH_SEED, config.minhash_bands, config.minhash_rows)
    not_empty = ~survivors.column("_empty").to_numpy().astype(bool)
    return Fingerprints(
        doc_id=strings_np(survivors, "doc_id"),
        url_key=survivors.column("_url_key").to_numpy().astype(np.uint64),
        has_url=survivors.column("_url_valid").to_numpy().astype(bool),
        content_hash=content_hash_columns(survivors),
        simhash=survivors.column("_simhash").to_numpy().astype(np.uint64) if "_simhash" in names else np.zeros(n, np.uint64),
        has_simhash=(survivors.column("_has_simhash").to_numpy().astype(bool) if "_simhash" in names else np.zeros(n, bool)) & not_empty,
        minhash=sig,
        has_minhash=(survivors.column("_has_minhash").to_numpy().astype(bool) if has_minhash else np.zeros(n, bool)) & not_empty,
        # The registry keeps registry_signature_bits of each value (docs/registry.md, "Signatures") and the
        # band keys L3 probed with (its index signature's first registry_bands bands).
        minhash_bands=_registry_bands(survivors, sig, has_minhash, config, hasher),
        has_content=not_empty,
        minhash_bits=config.registry_signature_bits,
    )



def _registry_bands(survivors: pa.Table, sig: np.ndarray, has_minhash: bool, config: DedupConfig, hasher: MinHasher) -> np.ndarray:
    keys = registry_band_keys_of(survivors)
    if keys is not None:
        return keys
    if has_minhash and survivors.num_rows and config.minhash_registry_stoplist:
        # The index signature needs the shingle sets, which only L3 has: registering the plain
        # signature's keys here would put them where no lookup of this registry looks.
        raise ValueError("the kept rows carry MinHash signatures but not the registry band keys L3 computes (_registry_bands)")
    return hasher.band_keys(sig)[:, : config.registry_bands] if survivors.num_rows else np.zeros((0, config.registry_bands), np.uint64)


def commit(survivors: pa.Table, ctx: LayerContext) -> tuple[pa.Table, pa.Table]:
    """Register the kept documents; rows an earlier batch registered first (concurrently) become drops.

    Later batches the registry found holding copies of what we keep end up in ``ctx.stale``.
    """
    result = ctx.registry.commit(ctx.batch_id, fingerprints_of(survivors, ctx.config))
    ctx.stale = dict(getattr(result, "stale", {}) or {})
    conflicts = result.conflicts
    if not len(conflicts):
        return survivors, decision_rows(survivors.slice(0, 0), ctx, "drop", None)
    rows, first = np.unique(conflicts.query, return_index=True)
    layer = conflicts.payload.get("layer")
    lost = survivors.take(pa.array(rows, pa.int64()))
    score = conflicts.payload["score"][first] if "score" in conflicts.payload else np.full(len(rows), np.nan)
    layers = layer[first] if layer is not None else np.full(len(rows), None, object)
    # The re-check's own rule is the registry's, not necessarily this config's: no threshold is claimed.
    match = drop_reasons(layers, score, None, conflicts.doc_id[first], conflicts.batch_id[first])
    reason = pc.binary_join_element_wise(CONFLICT_REASON, pc.fill_null(match, "a match"), ": ")
    drops = decision_rows(
        lost,
        ctx,
        "drop",
        None,
        matched_doc_id=conflicts.doc_id[first],
        matched_batch_id=conflicts.batch_id[first],
        score=score,
        reason=reason,
    )
    if layer is not None:
        drops = drops.set_column(drops.column_names.index("layer"), "layer", pa.array(layers, pa.string()))
        kinds = pa.array([SCORE_KINDS.get(name) for name in layers], pa.string())
        drops = drops.set_column(drops.column_names.index("score_kind"), "score_kind", kinds)
    keep = np.ones(survivors.num_rows, bool)
    keep[rows] = False
    return survivors.filter(pa.array(keep)), drops


def layer_view(prepared: pa.Table) -> pa.Table:
    """What the layers read and carry: doc_id and the private columns, not the input texts.

    Each layer copies its survivors; leaving title/content behind keeps those copies small. The
    kept rows' input columns are taken from the prepared table by ``_row`` at the end.
    """
    return prepared.select(["doc_id", *[c for c in prepared.column_names if c.startswith(PRIVATE_PREFIX)]])


def assemble(prepared: pa.Table, kept: pa.Table, drops: list[pa.Table], ctx: LayerContext) -> tuple[pa.Table, pa.Table]:
    """Kept rows (input columns only) and one decision per input row in batch order; checks the invariant."""
    keep_decisions = decision_rows(kept, ctx, "keep", None)
    decisions = pa.concat_tables([keep_decisions, *drops]).cast(DECISIONS_SCHEMA)
    ids = prepared.column("doc_id").cast(pa.string())
    position = pc.index_in(decisions.column("doc_id"), value_set=ids)
    if decisions.num_rows != prepared.num_rows or position.null_count:
        raise InvariantError(f"batch {ctx.batch_id}: {decisions.num_rows} decisions for {prepared.num_rows} rows")
    if len(np.unique(position.to_numpy(zero_copy_only=False))) != prepared.num_rows:
        raise InvariantError(f"batch {ctx.batch_id}: a row has more than one decision")
    decisions = decisions.append_column("_pos", position).sort_by("_pos").drop_columns(["_pos"])
    decisions = _repoint_to_committed(decisions, ctx.batch_id)
    public = [c for c in prepared.column_names if not c.startswith(PRIVATE_PREFIX)]
    kept_rows = unescape_input_names(prepared.select(public).take(kept.column("_row")))
    return carry_template_lines(prepared, kept_rows), decisions


def _repoint_to_committed(decisions: pa.Table, batch_id: str) -> pa.Table:
    """A drop matched to a document of this batch that the commit then dropped (an earlier batch had
    registered it concurrently) names, instead, the registered document that one was dropped for."""
    if not pc.any(pc.match_substring(pc.fill_null(decisions.column("reason"), ""), CONFLICT_REASON)).as_py():
        return decisions  # the usual case: nothing was dropped at commit
    frame = decisions.select(["doc_id", "action", "matched_doc_id", "matched_batch_id", "reason"]).to_pandas()
    lost = frame[(frame.action == "drop") & frame.reason.fillna("").str.contains(CONFLICT_REASON, regex=False)]
    if lost.empty:
        return decisions
    target = dict(zip(lost.doc_id, zip(lost.matched_doc_id, lost.matched_batch_id, strict=True), strict=True))
    hit = ((frame.action == "drop") & (frame.matched_batch_id == batch_id) & frame.matched_doc_id.isin(target)).to_numpy()
    if not hit.any():
        return decisions
    doc = frame.matched_doc_id.to_numpy(dtype=object).copy()
    batch = frame.matched_batch_id.to_numpy(dtype=object).copy()
    doc[hit] = [target[d][0] for d in doc[hit]]
    batch[hit] = [target[d][1] for d in frame.matched_doc_id.to_numpy(dtype=object)[hit]]
    reason = frame.reason.to_numpy(dtype=object).copy()
    note = "matched document of this batch was dropped at commit; names what it was dropped for"
    reason[hit] = [note if not isinstance(r, str) else f"{r}{REASON_SEPARATOR}{note}" for r in reason[hit]]
    for name, values in (("matched_doc_id", doc), ("matched_batch_id", batch), ("reason", reason)):
        decisions = decisions.set_column(decisions.column_names.index(name), name, pa.array(values, pa.string(), from_pandas=True))
    return decisions


def run_batch(
    table: pa.Table,
    batch_id: str,
    config: DedupConfig,
    registry: Registry,
    source: str = "batch",
    on_layer: Callable[[LayerStats], None] | None = None,
) -> BatchResult:
    """Deduplicate one batch against itself and the registry; register what it keeps."""
    started = time.perf_counter()
    started_at = datetime.now(UTC).isoformat()
    ctx = LayerContext(batch_id, config, registry)
    registry.begin(batch_id)
    t0 = time.perf_counter()
    prepared, ctx.near_text = prepare_with_text(table, config, source)
    prep_stats = LayerStats("prepare", table.num_rows, 0, time.perf_counter() - t0)
    if on_layer:
        on_layer(prep_stats)
    del table
    handed_over = {"view": layer_view(prepared)}
    inputs = prepared.select([c for c in prepared.column_names if not c.startswith(PRIVATE_PREFIX)])
    del prepared  # from here on the input columns and the layers' view are all that is held
    ctx.inputs = inputs
    # Not bound to a name here: once the first layer has copied its survivors, the full view is freed.
    survivors, drops, stats = run_layers(handed_over.pop("view"), ctx, on_layer)
    return finish_batch(inputs, survivors, drops, [prep_stats, *stats], ctx, started, started_at, on_layer)


def finish_batch(
    inputs: pa.Table,
    survivors: pa.Table,
    drops: list[pa.Table],
    stats: list[LayerStats],
    ctx: LayerContext,
    started: float,
    started_at: str,
    on_layer: Callable[[LayerStats], None] | None = None,
) -> BatchResult:
    """Commit the survivors, assemble one decision per input row and the summary (both engines).

    ``stats`` starts with the prepare step's; ``started`` is a ``perf_counter`` reading."""
    t0 = time.perf_counter()
    survivors, conflict_drops = commit(survivors, ctx)
    commit_stats = LayerStats("commit", survivors.num_rows + conflict_drops.num_rows, conflict_drops.num_rows, time.perf_counter() - t0)
    if on_layer:
        on_layer(commit_stats)
    kept, decisions = assemble(inputs, survivors, [*drops, conflict_drops], ctx)
    summary = BatchSummary(
        batch_id=ctx.batch_id,
        rows_in=inputs.num_rows,
        kept=kept.num_rows,
        dropped=inputs.num_rows - kept.num_rows,
        layers=[*stats, commit_stats],
        config_hash=ctx.config.config_hash,
        seconds=time.perf_counter() - started,
        commit_conflicts=conflict_drops.num_rows,
        stale_batches=ctx.stale,
        registry=type(ctx.registry).__name__,
        started_at=started_at,
        embedded=sum(int(s.extra.get("embedded", 0)) for s in stats),
    )
    return BatchResult(kept, decisions, summary)


def run_partition(
    paths: BatchPaths,
    config: DedupConfig,
    registry: Registry,
    on_layer: Callable[[LayerStats], None] | None = None,
) -> BatchSummary:
    """Read a partition, run the batch, and publish deduped/, decisions/ and runs/.../summary.json."""
    recover(paths)  # an interrupted publish of this batch is completed first (consistent outputs)
    # No local reference to the input table: run_batch frees it once prepared.
    result = run_batch(read_input(paths.input)[0], paths.batch_id, config, registry, str(paths.input), on_layer)
    publish(paths, result)
    return result.summary


def publish(paths: BatchPaths, result: BatchResult) -> None:
    """decisions/, deduped/ and summary.json as one atomic step (io.publish_outputs)."""
    import json

    import pyarrow.parquet as pq

    result.summary.outputs = {
        "deduped": str(paths.deduped),
        "decisions": str(paths.decisions),
        "summary": str(paths.summary),
    }
    name = "part-00000.parquet"
    publish_outputs(
        paths.root,
        paths.run_dir,
        [
            (paths.decisions, lambda tmp: pq.write_table(result.decisions, tmp / name, compression="zstd")),
            (paths.deduped, lambda tmp: write_published(result.kept, tmp, name)),
        ],
        [(paths.summary, json.dumps(result.summary.to_dict(), indent=2, sort_keys=True, default=str))],
    )


def recover(paths: BatchPaths) -> bool:
    """Complete a publish of ``paths`` that a crash interrupted and remove stale temporaries."""
    return recover_outputs(paths.root, paths.run_dir, [paths.decisions, paths.deduped, paths.summary])

