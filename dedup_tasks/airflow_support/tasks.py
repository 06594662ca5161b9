"""Context -> (config, batch paths, registry) -> one ``dedup_tasks.steps`` call."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from dedup_tasks.config import ALL_LAYERS, DEFAULT_LAYERS, ConfigError, DedupConfig, run_config
from dedup_tasks.io import BatchPaths, MissingPartition

_HOUR = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}$")

_DEPLOYED = "empty: the deployment's setting (DEDUP_CONFIG)"

# Run-time overridable settings: (JSON-schema type, default, extra schema). The DAG turns these into
# validated Params, so a manual run or a backfill from the UI can change them.
PARAM_SPECS: dict[str, tuple[Any, Any, dict[str, Any]]] = {
    # The hour to deduplicate. A manual run's logical date defaults to "now", whose hour has no data
    # yet: name the hour here instead (default: the run's data interval, as scheduled runs do).
    "batch_hour": (
        ["null", "string"],
        None,
        {
            "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}$",
            "description": "hour to deduplicate, e.g. 2026-12-01T05 (UTC); empty: the run's data interval",
        },
    ),
    "root": (
        ["null", "string"],
        None,
        {"description": "data root: the configured one (DEDUP_ROOT, default ./data) or a directory under it"},
    ),
    "layers": (
        "array",
        list(DEFAULT_LAYERS),
        {
            "items": {"type": "string", "enum": list(ALL_LAYERS)},
            "minItems": 1,
            "uniqueItems": True,
            "description": "layers to run (at least one; they always run in cascade order)",
        },
    ),
    # Thresholds: null (the default) takes the deployment's value (DEDUP_CONFIG, e.g. with an audit
    # overlay); a value given in the trigger form wins for that run, as when rerunning the hours an
    # `audit recommend` overlay names (docs/audit.md).
    "simhash_max_distance": (["null", "integer"], None, {"minimum": 0, "maximum": 16, "description": _DEPLOYED}),
    "minhash_threshold": (["null", "number"], None, {"minimum": 0.05, "maximum": 1.0, "description": _DEPLOYED}),
    "semantic_threshold": (["null", "number"], None, {"minimum": -1.0, "maximum": 1.0, "description": _DEPLOYED}),
    # Per-language L4 thresholds win over semantic_threshold.
    "semantic_threshold_zh": (["null", "number"], None, {"minimum": -1.0, "maximum": 1.0, "description": _DEPLOYED}),
    "semantic_threshold_en": (["null", "number"], None, {"minimum": -1.0, "maximum": 1.0, "description": _DEPLOYED}),
    "keep_url_updates": ("boolean", True, {}),
    # The opt-in rewrite path's pair budget: a run that raises it judges the rows an earlier run of the
    # hour left unread (their decisions say "over the batch's budget"). Null: the deployment's setting.
    "semantic_sketch_pair_budget": (
        ["null", "integer"],
        None,
        {
            "minimum": 0,
            "description": "rewrite candidate pairs confirmed at most (0: no cap; empty: the deployment's setting)",
        },
    ),
}


def batch_id_for(data_interval_start: datetime) -> str:
    """The hour a run covers, as a batch id: 2026-12-01T00."""
    return data_interval_start.strftime("%Y-%m-%dT%H")


# Library errors a retry cannot fix: the DAG fails the task at once on these (AirflowFailException).
FAIL_FAST_ERRORS: tuple[type[Exception], ...] = (MissingPartition, ConfigError)


def config_from_params(params: Mapping[str, Any]) -> DedupConfig:
    """The run's config from its Params (root confined to the data root, layers non-empty)."""
    overrides = {name: params.get(name) for name in PARAM_SPECS if name != "batch_hour" and name in params}
    return run_config(overrides)


def batch_id_of(context: Mapping[str, Any]) -> str:
    """The hour a run deduplicates: its ``batch_hour`` Param, else its data interval's start."""
    hour = (context.get("params") or {}).get("batch_hour")
    if hour:
        if not _HOUR.match(str(hour)):
            raise ConfigError(f"batch_hour {hour!r}: expected an hour like 2026-12-01T05")
        return str(hour)
    return batch_id_for(context.get("data_interval_start") or context["logical_date"])


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
    from dedup_tasks.runtime import process_settings
    from dedup_tasks.steps import run_step as run

    process_settings()
    config = config_from_params(context.get("params") or {})
    paths = BatchPaths(Path(config.root).resolve(), batch_id_of(context))
    os.environ.setdefault("DEDUP_ROOT", str(paths.root))
    with _registry(config, step) as registry:
        return run(step, paths, config, registry)


def run_compaction(context: Mapping[str, Any]) -> dict:
    """The maintenance DAG's task: compact the registry when its recent tier is over the threshold."""
    from dedup_tasks.registry.maintenance import compact_registry

    params = dict(context.get("params") or {})
    min_docs = params.pop("min_docs", None)
    config = run_config({"root": params.get("root")})
    return compact_registry(config, min_docs)


def run_sentence_pruning(context: Mapping[str, Any]) -> dict:
    """The maintenance DAG's task: delete the sentence vectors older than the retention (none without one)."""
    from dedup_tasks.registry.maintenance import prune_sentence_vectors

    params = dict(context.get("params") or {})
    config = run_config({"root": params.get("root")})
    return prune_sentence_vectors(config, params.get("sentence_retention_days"))
