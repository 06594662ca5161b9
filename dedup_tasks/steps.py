"""The cascade as separately runnable steps over files, for orchestrators (one Airflow task per step).

Each step reads what the previous step wrote under ``<root>/work/batch_id=.../`` and (re)writes only
its own outputs, atomically: a retried step redoes its own output and nothing else. Steps return
small dicts of paths and counts (what an orchestrator passes between tasks), never data. The
in-process ``pipeline.run_batch`` runs the same functions without the intermediate files.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dedup_tasks.config import ALL_LAYERS, DedupConfig
from dedup_tasks.io import BatchPaths, MissingPartition, read_input, write_json, write_parquet_dir
from dedup_tasks.layers import LAYER_CLASSES, LayerContext, LayerStats
from dedup_tasks.pipeline import (
    BatchResult,
    BatchSummary,
    assemble,
    commit,
    layer_view,
    prepare,
    publish,
    recover,
)
from dedup_tasks.registry.base import Registry

STEPS: tuple[str, ...] = ("validate", *ALL_LAYERS, "commit", "publish")


class StepOrderError(RuntimeError):
    """A step ran before the step it depends on wrote its output."""


def _stage(paths: BatchPaths, name: str) -> Path:
    return paths.work / name


def _read(paths: BatchPaths, name: str) -> pa.Table:
    stage = _stage(paths, name)
    if not stage.exists():
        raise StepOrderError(f"batch {paths.batch_id}: {stage} is missing; run the step that writes it first")
    return pq.read_table(stage)


def _write(paths: BatchPaths, name: str, table: pa.Table, stats: dict) -> None:
    write_parquet_dir(table, _stage(paths, name))
    write_json(stats, _stage(paths, name + ".json"))


def _stats(paths: BatchPaths, name: str) -> dict:
    return json.loads(_stage(paths, name + ".json").read_text())


def _previous_survivors(paths: BatchPaths, layer: str) -> str:
    index = ALL_LAYERS.index(layer)
    return "prepared" if index == 0 else f"{ALL_LAYERS[index - 1]}.survivors"


def validate(paths: BatchPaths, config: DedupConfig, registry: Registry) -> dict:
    """Read and validate the input partition; record the registry snapshot for the commit re-check."""
    started = time.perf_counter()
    recover(paths)  # complete a publish of this batch that a crash interrupted (issue #16 row 5)
    table, files = read_input(paths.input)
    if table.num_rows == 0:
        # As good as missing: no retry helps until the crawl writes rows (the DAG fails fast on it).
        raise MissingPartition(f"batch {paths.batch_id}: input partition {paths.input} has no rows; nothing to publish")
    registry.begin(paths.batch_id)
    prepared = prepare(table, config, str(paths.input))
    stats = asdict(LayerStats("prepare", table.num_rows, 0, time.perf_counter() - started))
    stats["started_at"] = datetime.now(UTC).isoformat()
    stats["files"] = [str(f) for f in files]
    _write(paths, "prepared", prepared, stats)
    return {"batch_id": paths.batch_id, "rows": prepared.num_rows, "path": str(_stage(paths, "prepared"))}


def run_layer(name: str, paths: BatchPaths, config: DedupConfig, registry: Registry) -> dict:
    """One layer over the previous layer's survivors; a switched-off layer passes them through."""
    batch = _read(paths, _previous_survivors(paths, name))
    if name == ALL_LAYERS[0]:
        batch = layer_view(batch)
    ctx = LayerContext(paths.batch_id, config, registry)
    if name == "semantic" and config.semantic_confirms_by_sentences:
        # The aligned score cuts sentences from the input text, which the layers' view does not carry.
        ctx.inputs = _read(paths, "prepared").select(["title", "content"])
    if config.layer_enabled(name):
        out = LAYER_CLASSES[name](config).run(batch, ctx)
        survivors, drops, stats = out.survivors, out.drops, asdict(out.stats)
    else:
        from dedup_tasks.layers.base import decision_rows

        survivors, drops = batch, decision_rows(batch.slice(0, 0), ctx, "drop", name)
        stats = {"layer": name, "rows_in": batch.num_rows, "dropped": 0, "seconds": 0.0, "extra": {"skipped": True}}
    _write(paths, f"{name}.drops", drops, stats)
    _write(paths, f"{name}.survivors", survivors, stats)
    return {"batch_id": paths.batch_id, "layer": name, "rows_in": batch.num_rows, "dropped": drops.num_rows}


def commit_batch(paths: BatchPaths, config: DedupConfig, registry: Registry) -> dict:
    """Register the kept documents (one transaction) and assemble one decision per input row."""
    started = time.perf_counter()
    ctx = LayerContext(paths.batch_id, config, registry)
    survivors = _read(paths, f"{ALL_LAYERS[-1]}.survivors")
    kept, conflict_drops = commit(survivors, ctx)
    prepared = _read(paths, "prepared")
    drops = [_read(paths, f"{name}.drops") for name in ALL_LAYERS]
    kept_public, decisions = assemble(prepared, kept, [*drops, conflict_drops], ctx)
    layer_stats = [LayerStats(**{k: v for k, v in _stats(paths, "prepared").items() if k in LayerStats.__annotations__})]
    for name in ALL_LAYERS:
        stats = _stats(paths, f"{name}.drops")
        if not stats.get("extra", {}).get("skipped"):
            layer_stats.append(LayerStats(stats["layer"], stats["rows_in"], stats["dropped"], stats["seconds"]))
    layer_stats.append(LayerStats("commit", survivors.num_rows, conflict_drops.num_rows, time.perf_counter() - started))
    summary = BatchSummary(
        batch_id=paths.batch_id,
        rows_in=prepared.num_rows,
        kept=kept_public.num_rows,
        dropped=prepared.num_rows - kept_public.num_rows,
        layers=layer_stats,
        config_hash=config.config_hash,
        seconds=sum(s.seconds for s in layer_stats),
        commit_conflicts=conflict_drops.num_rows,
        stale_batches=ctx.stale,
        embedded=sum(int(_stats(paths, f"{n}.drops").get("extra", {}).get("embedded", 0)) for n in ALL_LAYERS),
        registry=type(registry).__name__,
        started_at=_stats(paths, "prepared").get("started_at", ""),
    )
    write_parquet_dir(kept_public, _stage(paths, "kept"))
    write_parquet_dir(decisions, _stage(paths, "decisions"))
    write_json(summary.to_dict(), _stage(paths, "summary.json"))
    return {"batch_id": paths.batch_id, "kept": summary.kept, "dropped": summary.dropped}


def publish_batch(paths: BatchPaths) -> dict:
    """Move the committed outputs into deduped/, decisions/ and runs/; remove the work files."""
    data = json.loads(_stage(paths, "summary.json").read_text())
    summary = BatchSummary(**{k: v for k, v in data.items() if k in BatchSummary.__dataclass_fields__})
    summary.layers = [LayerStats(**s) for s in data["layers"]]
    result = BatchResult(_read(paths, "kept"), _read(paths, "decisions"), summary)
    publish(paths, result)
    shutil.rmtree(paths.work, ignore_errors=True)
    return {
        "batch_id": paths.batch_id,
        "deduped": str(paths.deduped),
        "decisions": str(paths.decisions),
        "summary": str(paths.summary),
        "rows_in": summary.rows_in,
        "kept": summary.kept,
        "dropped": summary.dropped,
        "dropped_per_layer": data.get("dropped_per_layer", {}),
    }


def run_step(step: str, paths: BatchPaths, config: DedupConfig, registry: Registry | None) -> dict:
    """Dispatch by step name (validate, a layer name, commit, publish)."""
    if step == "publish":
        return publish_batch(paths)
    if registry is None:
        raise ValueError(f"step {step!r} needs a registry")
    if step == "validate":
        return validate(paths, config, registry)
    if step == "commit":
        return commit_batch(paths, config, registry)
    if step in ALL_LAYERS:
        return run_layer(step, paths, config, registry)
    raise ValueError(f"unknown step {step!r}; steps are {list(STEPS)}")
