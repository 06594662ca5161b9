"""Re-deduplicate an archive (a backfill of many hours, oldest first) or one hour too large for one worker.

One task, one Spark job (``dedup_tasks.engines.spark``): the executors fingerprint every hour at
once, the driver runs the layers and the registry commit hour by hour, so the result equals running
the hours one by one through ``crawl_dedup``. A plain @task calling the library, started by hand:
the Spark provider is not a dependency of the project; ``spark_master`` points the job at a cluster
(docker-compose's spark-master) or runs it in the task's process (``local[*]``).
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import Param, dag, get_current_context, task

from dedup_tasks.airflow_support.archive import ARCHIVE_PARAM_SPECS


@dag(
    dag_id="crawl_dedup_archive",
    schedule=None,
    start_date=pendulum.datetime(2026, 12, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5), "execution_timeout": timedelta(hours=12)},
    params={name: Param(default, type=kind, **extra) for name, (kind, default, extra) in ARCHIVE_PARAM_SPECS.items()},
    tags=["dedup", "spark"],
    doc_md=__doc__,
)
def crawl_dedup_archive():
    @task
    def dedup_archive() -> dict:
        from dedup_tasks.airflow_support.archive import run_archive

        return run_archive(get_current_context()["params"])

    dedup_archive()


crawl_dedup_archive()
