"""Registry maintenance: move the fingerprint registry's recent tier into its main tier when it is full.

Thin wiring: two tasks, each one call into ``dedup_tasks.registry.maintenance``. Hourly commits of
crawl_dedup only insert into the small recent tier; this DAG checks its size every hour (at :30,
between two crawl_dedup commits) and compacts once it holds ``compact_threshold_docs`` documents
(DedupConfig, default 1M, about ten crawl hours), so no batch ever pays for a compaction. Commits that
arrive meanwhile wait on the registry lock; lookups stay correct (see dedup_tasks.registry.postgres).
A manual run with ``min_docs=0`` compacts whatever the recent tier holds. Then the L4 sentence vectors
(a cache keyed by text) older than ``sentence_vector_retention_days`` are deleted (default: none).

With the embedded server (no DEDUP_DB_URL / dedup_db connection) a task stops the server it started,
which ends other tasks' sessions: their transaction rolls back and their retry redoes it. Use a
real server in production.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import CronTriggerTimetable, Param, dag, get_current_context, task


@dag(
    dag_id="dedup_registry_maintenance",
    schedule=CronTriggerTimetable("30 * * * *", timezone="UTC"),
    start_date=pendulum.datetime(2026, 12, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5), "execution_timeout": timedelta(hours=2)},
    params={
        "root": Param(None, type=["null", "string"], description="data root (default: DEDUP_ROOT or ./data)"),
        "min_docs": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            description="compact when the recent tier holds this many documents (default: compact_threshold_docs)",
        ),
        "sentence_retention_days": Param(
            None,
            type=["null", "number"],
            minimum=0,
            description="delete L4 sentence vectors older than this (default: sentence_vector_retention_days; none: keep)",
        ),
    },
    tags=["dedup", "maintenance"],
    doc_md=__doc__,
)
def dedup_registry_maintenance():
    @task
    def compact() -> dict:
        from dedup_tasks.airflow_support import run_compaction

        return run_compaction(get_current_context())

    @task
    def prune_sentences() -> dict:
        from dedup_tasks.airflow_support import run_sentence_pruning

        return run_sentence_pruning(get_current_context())

    compact() >> prune_sentences()


dedup_registry_maintenance()
