"""Hourly crawl deduplication: validate -> url -> exact -> simhash -> minhash -> semantic -> commit -> publish.

Thin wiring only: every task body is one call into ``dedup_tasks``. Tasks hand each other Parquet paths
and counts through XCom, never data. Each task redoes only its own output, so retries and reruns
(clear, backfill) are idempotent; the registry commit replaces the batch's earlier registration.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import Asset, CronDataIntervalTimetable, Param, dag, get_current_context, task

from dedup_tasks.airflow_support import PARAM_SPECS

# One asset for the published output; each event's extra names the hour's partition and counts.
DEDUPED = Asset(name="crawl_dedup_deduped", uri="dedup://crawl_dedup/deduped")
TASK_DEFAULTS = {"retries": 2, "retry_delay": timedelta(minutes=2), "execution_timeout": timedelta(minutes=30)}


def _params() -> dict[str, Param]:
    return {name: Param(default, type=kind, **extra) for name, (kind, default, extra) in PARAM_SPECS.items()}


def _step(name: str) -> dict:
    from dedup_tasks.airflow_support import run_step

    # An error no retry can fix (bad Param, missing partition, registry that cannot start) fails the
    # task at once (AirflowFailException), not 2 x 2 min later.
    return run_step(name, get_current_context())


@dag(
    dag_id="crawl_dedup",
    schedule=CronDataIntervalTimetable("0 * * * *", timezone="UTC"),
    start_date=pendulum.datetime(2026, 12, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args=TASK_DEFAULTS,
    params=_params(),
    tags=["dedup"],
    doc_md=__doc__,
)
def crawl_dedup():
    @task
    def validate() -> dict:
        return _step("validate")

    @task
    def url(_: dict) -> dict:
        return _step("url")

    @task
    def exact(_: dict) -> dict:
        return _step("exact")

    @task
    def simhash(_: dict) -> dict:
        return _step("simhash")

    @task
    def minhash(_: dict) -> dict:
        return _step("minhash")

    @task
    def semantic(_: dict) -> dict:
        return _step("semantic")

    # Never compacts the registry (dedup_registry_maintenance does), but may wait for a compaction.
    @task
    def commit(_: dict) -> dict:
        return _step("commit")

    @task(outlets=[DEDUPED])
    def publish(_: dict) -> dict:
        result = _step("publish")
        get_current_context()["outlet_events"][DEDUPED].extra = {
            "batch_id": result["batch_id"],
            "partition": result["deduped"],
            "kept": result["kept"],
        }
        return result

    publish(commit(semantic(minhash(simhash(exact(url(validate())))))))


crawl_dedup()
