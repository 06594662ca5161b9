"""The crawl_dedup_archive DAG's task: many hours (or one huge hour) in one Spark job."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dedup_tasks.airflow_support.tasks import PARAM_SPECS, config_from_params, fails_fast
from dedup_tasks.io import BatchPaths, InputError

ARCHIVE_PARAM_SPECS: dict[str, tuple[Any, Any, dict[str, Any]]] = {
    "first_batch": ("string", "2026-12-01T00", {"description": "first hour of the archive, e.g. 2026-12-01T00"}),
    "last_batch": ("string", "2026-12-01T23", {"description": "last hour (inclusive); hours without input are skipped"}),
    "spark_master": (["null", "string"], None, {"description": "Spark master URL (default SPARK_MASTER, else local[*])"}),
    "partitions": (["null", "integer"], None, {"minimum": 1, "description": "input partitions (default 2 per core)"}),
    **PARAM_SPECS,
}


@fails_fast
def run_archive(params: Mapping[str, Any]) -> dict:
    """Deduplicate every hour from ``first_batch`` to ``last_batch`` on Spark, oldest first.

    Returns per hour the counts and output paths (XCom carries no data).
    """
    from dedup_tasks.cli import batch_range
    from dedup_tasks.engines.spark import run_batches, spark_session
    from dedup_tasks.registry.connect import open_registry
    from dedup_tasks.runtime import process_settings

    process_settings()
    config = config_from_params(params)
    root = Path(config.root).resolve()
    os.environ.setdefault("DEDUP_ROOT", str(root))
    hours = batch_range(params["first_batch"], params["last_batch"])
    batches = [p for p in (BatchPaths(root, h) for h in hours) if p.input.exists()]
    if not batches:
        raise InputError(f"no input partition from {hours[0]} to {hours[-1]} under {root / 'crawl'}")
    spark = spark_session(params.get("spark_master"), "crawl_dedup_archive")
    with open_registry(config, schema=config.db_schema) as registry:
        summaries = run_batches(spark, batches, config, registry, partitions=params.get("partitions"))
    return {
        "batches": [
            {"batch_id": s.batch_id, "rows_in": s.rows_in, "kept": s.kept, "dropped": s.dropped, **s.outputs} for s in summaries
        ],
        "skipped": sorted(set(hours) - {p.batch_id for p in batches}),
    }
