"""Weekly dedup audit: a stratified sample of the week's drops, precision from labels, report.html.

Thin wiring: one task, one call into ``dedup_tasks.audit``. The week audited is the ISO week of the
run's data_interval_start; the weekly cron data interval (Monday 00:00 to the next Monday, UTC) is
exactly one ISO week, so the run that starts when a week ends audits that week. Rerunning (clear,
backfill) rewrites the week's directory atomically and keeps the labels, which live in PostgreSQL.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import CronDataIntervalTimetable, Param, dag, get_current_context, task


@dag(
    dag_id="dedup_audit",
    # "@weekly" alone has no week-long data interval in Airflow 3; the cron data-interval timetable does.
    schedule=CronDataIntervalTimetable("0 0 * * 1", timezone="UTC"),
    start_date=pendulum.datetime(2026, 11, 30, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5), "execution_timeout": timedelta(hours=1)},
    params={
        "root": Param(None, type=["null", "string"], description="data root (default: DEDUP_ROOT or ./data)"),
        "per_stratum": Param(20, type="integer", minimum=1, maximum=500),
        "near_miss_per_layer": Param(20, type="integer", minimum=0, maximum=500),
        "target_precision": Param(0.98, type="number", minimum=0.5, maximum=1.0),
    },
    tags=["dedup", "audit"],
    doc_md=__doc__,
)
def dedup_audit():
    @task
    def audit() -> dict:
        from dedup_tasks.airflow_support import run_audit_week

        return run_audit_week(get_current_context())

    audit()


dedup_audit()
