"""Context -> (config, batch paths, registry) -> one ``dedup_tasks.steps`` call."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from dedup_tasks.config import ALL_LAYERS, DEFAULT_LAYERS, DedupConfig
from dedup_tasks.io import BatchPaths

# Run-time overridable settings: (JSON-schema type, default, extra schema). The DAG turns these into
# validated Params, so a manual run or a backfill from the UI can change them.
PARAM_SPECS: dict[str, tuple[Any, Any, dict[str, Any]]] = {
    "root": (["null", "string"], None, {"description": "data root (default: DEDUP_ROOT or ./data)"}),
    "layers": (
        "array",
        list(DEFAULT_LAYERS),
        {"items": {"type": "string", "enum": list(ALL_LAYERS)}, "description": "layers to run, in cascade order"},
    ),
    "simhash_max_distance": ("integer", 3, {"minimum": 0, "maximum": 16}),
    "minhash_threshold": ("number", DedupConfig.minhash_threshold, {"minimum": 0.05, "maximum": 1.0}),
    "semantic_threshold": ("number", 0.92, {"minimum": -1.0, "maximum": 1.0}),
    # Per-language L4 thresholds win over semantic_threshold; null falls back to it.
    "semantic_threshold_zh": (["null", "number"], 0.975, {"minimum": -1.0, "maximum": 1.0}),
    "semantic_threshold_en": (["null", "number"], 0.975, {"minimum": -1.0, "maximum": 1.0}),
    "keep_url_updates": ("boolean", True, {}),
}


def batch_id_for(data_interval_start: datetime) -> str:
    """The hour a run covers, as a batch id: 2026-12-01T00."""
    return data_interval_start.strftime("%Y-%m-%dT%H")


def config_from_params(params: Mapping[str, Any]) -> DedupConfig:
    overrides = {name: params.get(name) for name in PARAM_SPECS if params.get(name) is not None}
    if "layers" in overrides:
        overrides["layers"] = tuple(overrides["layers"])
    return DedupConfig.load(overrides)


@contextlib.contextmanager
def _registry(config: DedupConfig, step: str) -> Iterator[Any]:
    if step == "publish":
        yield None
        return
    from dedup_tasks.registry.connect import open_registry

    with open_registry(config, schema=config.db_schema) as registry:
        yield registry


def run_step(step: str, context: Mapping[str, Any]) -> dict:
    """Run one cascade step for the run's data interval; returns paths and counts for XCom."""
    from dedup_tasks.runtime import use_shared_allocator
    from dedup_tasks.steps import run_step as run

    use_shared_allocator()
    config = config_from_params(context.get("params") or {})
    start = context.get("data_interval_start") or context["logical_date"]
    paths = BatchPaths(Path(config.root).resolve(), batch_id_for(start))
    os.environ.setdefault("DEDUP_ROOT", str(paths.root))
    with _registry(config, step) as registry:
        return run(step, paths, config, registry)


def run_compaction(context: Mapping[str, Any]) -> dict:
    """The maintenance DAG's task: compact the registry when its recent tier is over the threshold."""
    from dedup_tasks.registry.maintenance import compact_registry

    params = dict(context.get("params") or {})
    min_docs = params.pop("min_docs", None)
    config = DedupConfig.load({"root": params.get("root")})
    return compact_registry(config, min_docs)
