"""The dedup_audit DAG: parses, weekly data intervals, the week derived from the interval."""

from __future__ import annotations

import pendulum
import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(REPO / "dags" / "dedup_audit.py"))
    assert bag.import_errors == {}
    return bag.dags["dedup_audit"]


def test_weekly_data_interval_is_one_iso_week(dag):
    from airflow.sdk import CronDataIntervalTimetable
    from airflow.timetables.interval import CronDataIntervalTimetable as CoreTimetable

    from dedup_tasks.audit.weeks import week_of

    assert isinstance(dag.timetable, CronDataIntervalTimetable)
    assert (dag.timetable.expression, str(dag.timetable.timezone)) == ("0 0 * * 1", "UTC")
    # The scheduler's side of the same timetable decides the data interval.
    core = CoreTimetable(dag.timetable.expression, timezone="UTC")
    interval = core.infer_manual_data_interval(run_after=pendulum.datetime(2026, 12, 9, 12, tz="UTC"))
    assert interval.start == pendulum.datetime(2026, 11, 30, tz="UTC")
    assert interval.end == pendulum.datetime(2026, 12, 7, tz="UTC")
    assert week_of(interval.start) == "2026-W49"
    assert [t.task_id for t in dag.tasks] == ["audit"]
    assert dag.tasks[0].retries >= 2


def test_run_for_interval(week_root, monkeypatch, pg_dsn, registry_schema):
    from dedup_tasks.audit.run import run_for_interval

    monkeypatch.setenv("DEDUP_DB_URL", pg_dsn)  # what the DAG's workers get from the env / dedup_db conn
    monkeypatch.setenv("DEDUP_DB_SCHEMA", registry_schema)
    # A root Param must lie under the configured data root (#16 row 4): here, the week's parent.
    monkeypatch.setenv("DEDUP_ROOT", str(week_root.parent))
    result = run_for_interval(pendulum.datetime(2026, 11, 30, tz="UTC"),
                              {"root": str(week_root), "per_stratum": 2, "target_precision": 0.95} | {"x": None})
    assert result["week"] == "2026-W49" and result["sampled"] > 0
